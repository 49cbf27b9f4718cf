"""vLLM's `POST /tokenize` and `GET /tokenizer_info` bodies over render's typed Tokenize and its tokenizer.

`/tokenize` reads the client's JSON as our TokenizeRequest (a key it does not name is refused, naming it) and
prints vLLM 0.33's TokenizeResponse: `token_strs` is null unless `return_token_strs` asked for it, which proto
JSON cannot print; `token_offsets` (ours: vLLM has none) only when `return_token_offsets` asked for it.
`/tokenizer_info` prints vLLM's TokenizerInfo: the tokenizer's init kwargs without file paths, added tokens as
their text, `tokenizer_class` as vLLM names its wrapped tokenizer and the effective `chat_template`; vLLM serves
it only with --enable-tokenizer-info-endpoint, and so does render (the template may be a deployment's own).
"""

from __future__ import annotations

import json
from typing import Any

from google.api import httpbody_pb2
from transformers import TokenizersBackend

from render_svc.renderer import Renderer
from render_svc.tokenize_rpcs import tokenize
from scaleout.v1 import render_pb2
from scaleout_common.errors import QUOTE_CHARS, clip
from scaleout_common.json_body import load_object
from scaleout_common.openai_body_rules import clean_messages, parse_typed
from scaleout_common.reasons import Reason, fail

JSON = "application/json"
TOKENIZE_FIELDS = frozenset(render_pb2.TokenizeRequest.DESCRIPTOR.fields_by_name)
FILE_PATHS = ("vocab_file", "merges_file")  # vLLM drops them: they are the server's paths
# vLLM's server wraps the tokenizer it loads: a cache ("Cached" + the class's name), then, for a fast tokenizer, a
# pool of copies ("TokenizerPool" + that) (vllm/tokenizers/hf.py); vLLM's `tokenizer_class` names the wrapper.
CACHED, POOLED = "Cached", "TokenizerPool"


def _json(payload: dict) -> httpbody_pb2.HttpBody:
    return httpbody_pb2.HttpBody(content_type=JSON, data=json.dumps(payload, ensure_ascii=False).encode())


def tokenize_request(data: bytes) -> render_pb2.TokenizeRequest:
    body = {key: value for key, value in load_object(data).items() if value is not None}
    unknown = next((key for key in body if key not in TOKENIZE_FIELDS), None)
    if unknown is not None:
        name = clip(unknown, QUOTE_CHARS)  # a client's key: quoted by its head, as any client value
        raise fail(Reason.UNSUPPORTED_FIELD, f"`{name}` is not a field this API takes", name)
    if "messages" in body:
        body["messages"] = clean_messages(body["messages"])
    return parse_typed(body, render_pb2.TokenizeRequest())


def tokenize_vllm(renderer: Renderer, body: httpbody_pb2.HttpBody) -> httpbody_pb2.HttpBody:
    request = tokenize_request(body.data)
    answer = tokenize(renderer, request)
    payload: dict = {
        "count": answer.count,
        "max_model_len": answer.max_model_len,
        "tokens": list(answer.tokens),
        "token_strs": list(answer.token_strs) if request.return_token_strs else None,
    }
    if request.return_token_offsets:
        payload["token_offsets"] = [{"start": o.start, "end": o.end} for o in answer.token_offsets]
    return _json(payload)


def _plain(value):
    """vLLM's `_make_json_serializable`: an AddedToken as its text, containers walked, anything else as it is."""
    if hasattr(value, "content"):
        return value.content
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def tokenizer_config(renderer: Renderer) -> dict:
    tokenizer = renderer.model.tokenizer
    kwargs = getattr(tokenizer, "init_kwargs", None) or {}
    pooled = POOLED if isinstance(tokenizer, TokenizersBackend) else ""
    config: dict[str, Any] = {"tokenizer_class": pooled + CACHED + type(tokenizer).__name__}  # first, as vLLM's
    config |= {k: _plain(v) for k, v in kwargs.items() if k not in FILE_PATHS}
    config.setdefault("truncation_side", "left")  # vLLM loads its tokenizer so; render truncates on the left too
    config["name_or_path"] = renderer.model.name  # never the server's folder (vLLM prints its path)
    if tokenizer.chat_template:  # --chat-template's, which replaced the folder's
        config["chat_template"] = tokenizer.chat_template
    return config


def tokenizer_info(renderer: Renderer, enabled: bool) -> httpbody_pb2.HttpBody:
    if not enabled:
        raise fail(Reason.ROUTE_NOT_ENABLED, "/tokenizer_info is served with --enable-tokenizer-info-endpoint")
    return _json(tokenizer_config(renderer))
