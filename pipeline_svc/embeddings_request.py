"""OpenAI's `/v1/embeddings` JSON -> the typed render request and the answer's encoding, every field honoured or refused.

The policy (OpenAI's fields, then vLLM 0.33's pooling extras, as its EmbeddingCompletionRequest takes them):
- `input`: a string, strings, token ids or lists of token ids (OpenAI's four forms; render tokenizes and checks
  them); or vLLM's chat form, `messages` (one conversation: embeddings_chat.py); messages in `input` are refused;
- `model`: render checks it; `user`: the caller's identity, on the trace;
- `encoding_format`: "float" (a list of numbers) or "base64" (the vector's float32 bytes, little-endian as OpenAI's
  SDK decodes them, unless vLLM's `embed_dtype` / `endianness` ask another type / order: embed_dtypes.py), or
  vLLM's binary "bytes" / "bytes_only" (embeddings_bytes.py);
- `dimensions`: the engine's (a Matryoshka model only, else 400 naming it, as vLLM);
- vLLM's `truncate_prompt_tokens`, `truncation_side`, `add_special_tokens`, `use_activation` (false: not
  normalized), `priority` and `request_id` (the answer's id is `embd-<request_id>`) go to render and the engine;
  its `embed_dtype` (float32, float16, bfloat16, fp8_e4m3, fp8_e5m2: the base64 bytes' type) and `endianness`
  (native, little, big: their order) shape the answer;
  its `padding` "max_length" pads each input to the model length with the pad token (render); "do_not_pad" and
  `cache_salt` change nothing here (a pooling engine caches nothing to isolate) and are taken; `mm_processor_kwargs`
  is refused;
- `normalize` is refused with vLLM's words; any other field is refused: UNSUPPORTED_FIELD (400) naming it;
- `null` means "not given"; a malformed value is INVALID_REQUEST naming the field.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline_svc.embed_dtypes import EMBED_DTYPES
from pipeline_svc.embeddings_chat import chat_part
from scaleout.v1 import render_pb2
from scaleout_common.errors import QUOTE_CHARS, ServiceError, clip
from scaleout_common.json_body import load_object
from scaleout_common.openai_body_rules import parse_typed, prompt_forms
from scaleout_common.reasons import Reason, fail

# vLLM's fields of every pooling request (its PoolingBasicRequestMixin and `use_activation`): embeddings, score,
# rerank and pooling take them alike (pooling_field).
POOLING_TYPED = ("model", "truncate_prompt_tokens", "truncation_side", "use_activation", "priority", "request_id")
TYPED = (*POOLING_TYPED, "dimensions", "add_special_tokens")
BOOLEANS = ("add_special_tokens", "use_activation")
ENCODINGS = ("float", "base64", "bytes", "bytes_only")  # the last two: embeddings_bytes.py
BYTE_ORDERS = {"native": "<" if sys.byteorder == "little" else ">", "little": "<", "big": ">"}
NO_OP_VALUES = {"padding": ("do_not_pad",)}
REFUSED = {
    "encoding_format": "is float, base64, bytes or bytes_only",
    "normalize": "Parameter `normalize` was removed; use `use_activation` instead.",  # vLLM's words
    "mm_processor_kwargs": "(multimodal processing) is not supported: the model takes text",
}
TYPED_INPUT = re.compile(r"(?:inputs|input_token_ids)\[(\d+)\](?:\.token_ids)?")


@dataclass
class EmbeddingsRequest:
    typed: render_pb2.RenderEmbeddingRequest
    chat: render_pb2.RenderChatRequest | None = None  # vLLM's chat form: rendered first, its ids the one input
    encoding: str = "float"
    byte_order: str = "<"  # the base64 bytes' ("<" little-endian, OpenAI's)
    embed_dtype: str = "float32"  # the base64 bytes' type (embed_dtypes.py)
    identity: dict[str, str] = field(default_factory=dict)


def _unsupported(name: str, why: str) -> ServiceError:
    name = clip(name, QUOTE_CHARS)
    return fail(Reason.UNSUPPORTED_FIELD, f"`{name}` {why}", name)


def _input(value) -> dict:
    """OpenAI's four input forms as the typed request's `inputs` or `input_token_ids`."""
    try:
        forms = prompt_forms(value)
    except ServiceError:
        raise fail(
            Reason.INVALID_REQUEST,
            "`input` must be a string, a list of strings, a list of token ids or a list of such lists",
            "input",
        ) from None
    if "prompts" in forms:
        return {"inputs": forms["prompts"]}
    return {"input_token_ids": forms["prompt_token_ids"]}


def _cache_salt(value) -> None:
    if not isinstance(value, str) or not 1 <= len(value) <= 1024:  # vLLM's bounds
        raise fail(Reason.INVALID_REQUEST, "`cache_salt` must be a string of 1 to 1024 characters", "cache_salt")


def typed_field(name: str, value, out: dict) -> None:
    """A field of the typed render request, its JSON type checked (booleans are not numbers here)."""
    if isinstance(value, bool) != (name in BOOLEANS):
        raise fail(Reason.INVALID_REQUEST, f"`{name}` has the wrong type", name)
    out[name] = value


def pooling_field(name: str, value, out: dict, identity: dict[str, str]) -> bool:
    """One of the fields every pooling request takes, into the typed render request's `out` or the caller's
    `identity`, or refused naming it; False where `name` is not one of them."""
    if name in POOLING_TYPED:
        typed_field(name, value, out)
    elif name == "user":
        if not isinstance(value, str):
            raise fail(Reason.INVALID_REQUEST, "`user` must be a string", "user")
        identity["user"] = value
    elif name == "cache_salt":
        _cache_salt(value)
    elif name == "padding" and value == "max_length":
        out["pad_to_max_length"] = True
    elif name == "padding" and value not in NO_OP_VALUES[name]:
        raise _unsupported(name, f"= {clip(json.dumps(value), QUOTE_CHARS)} is not supported by this deployment")
    elif name == "normalize":
        raise fail(Reason.INVALID_REQUEST, REFUSED[name], name)
    elif name != "padding":
        return False
    return True


def refused(name: str, why: dict[str, str]) -> ServiceError:
    """The refusal of a field no rule took: UNSUPPORTED_FIELD naming it, with the route's reason where it has one."""
    return _unsupported(name, why.get(name, REFUSED.get(name, "is not a field this API takes")))


def embeddings_request(body: bytes) -> EmbeddingsRequest:
    return embeddings_fields(load_object(body))


def embeddings_fields(body: dict) -> EmbeddingsRequest:
    data = {k: v for k, v in body.items() if v is not None}
    out, parsed = {}, EmbeddingsRequest(render_pb2.RenderEmbeddingRequest())
    if "messages" in data:
        parsed.chat = chat_part(data)
    elif "input" not in data:
        raise fail(Reason.MISSING_PROMPT, "`input` is required", "input")
    for name, value in data.items():
        if name == "input":
            out.update(_input(value))
        elif pooling_field(name, value, out, parsed.identity):
            pass
        elif name in TYPED:
            typed_field(name, value, out)
        elif name == "encoding_format" and value in ENCODINGS:
            parsed.encoding = value
        elif name == "endianness" and value in BYTE_ORDERS:
            parsed.byte_order = BYTE_ORDERS[value]
        elif name == "embed_dtype" and value in EMBED_DTYPES:
            parsed.embed_dtype = value
        elif name in NO_OP_VALUES and value in NO_OP_VALUES[name]:
            pass
        elif name in NO_OP_VALUES or name in ("endianness", "embed_dtype"):
            raise _unsupported(name, f"= {clip(json.dumps(value), QUOTE_CHARS)} is not supported by this deployment")
        else:
            raise refused(name, {})
    parsed.typed = parse_typed(out, parsed.typed)
    return parsed


def renamed(error: ServiceError, name_of: Callable[[int], str]) -> ServiceError:
    """`error` with render's and the engine's `inputs[i]` / `input_token_ids[i]` named `name_of(i)`: the client's
    field (every pooling route's one rule for it)."""
    rename = lambda text: TYPED_INPUT.sub(lambda m: name_of(int(m[1])), text)  # noqa: E731
    error.message = rename(error.message)
    error.violations = [(rename(name), rename(why)) for name, why in error.violations]
    return error


def in_client_terms(error: ServiceError, body: bytes) -> ServiceError:
    """`error` in the client's terms: `input[i]` (`input` where it sent one string or one list of ids)."""
    if not any(TYPED_INPUT.match(name) for name, _ in error.violations):
        return error
    try:
        sent = json.loads(body).get("input")
    except (ValueError, AttributeError):
        return error
    several = isinstance(sent, list) and bool(sent) and not isinstance(sent[0], int)
    return renamed(error, lambda i: f"input[{i}]" if several else "input")
