"""How an OpenAI-shaped JSON body's fields become a typed render request, where both front doors read one.

render's vLLM render paths (render_svc/vllm_render/) and the pipeline's one-hop routes (pipeline_svc/
openai_request.py) each decide which fields they take; the shapes those fields arrive in are read here, once:
the completions prompt forms, the message clean-up (a key the template is not given is refused, naming it), JSON
schemas kept as text, the typed parse that names the field json_format stopped at (every `logit_bias` key that
is no token id at once), and vLLM's decode-side token reuse (`kv_transfer_params.prompt_token_ids`). The Chat Completions and Responses rule for `prompt_cache_retention` lives here too.
"""

from __future__ import annotations

import json
import re
from typing import Any

from google.protobuf import json_format

from scaleout.v1 import common_pb2
from scaleout_common.errors import QUOTE_CHARS, ServiceError, clip
from scaleout_common.reasons import Reason, fail

COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's and vLLM's default for /v1/completions
# Message keys whose null or empty value carries nothing (an SDK echoing an assistant message back sends them).
EMPTY_MESSAGE_KEYS = ("refusal", "annotations", "audio", "function_call")
_AT_FIELD = re.compile(r' at "?\w+\.(\w+)')  # json_format's `at RenderChatRequest.temperature`
# A message's keys the chat template is given: the typed message's fields, by proto or JSON name.
MESSAGE_KEYS = frozenset(name for f in common_pb2.ChatMessage.DESCRIPTOR.fields for name in (f.name, f.json_name))
_LISTED = 5  # bad logit_bias keys named in one message
_TOKEN_ID = re.compile(r"-?[0-9]+")


def _invalid(field: str, message: str) -> ServiceError:
    return fail(Reason.INVALID_REQUEST, f"`{field}` {message}", field)


def prompt_forms(prompt) -> dict:
    """OpenAI's (and vLLM's) four prompt forms: a string, strings, token ids, or lists of token ids; as the
    typed completion request's `prompts` or `prompt_token_ids`."""
    if isinstance(prompt, str):
        return {"prompts": [prompt]}
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return {"prompts": prompt}
        if all(_is_id(t) for t in prompt):
            return {"prompt_token_ids": [{"token_ids": prompt}]}
        if all(isinstance(p, list) and p and all(_is_id(t) for t in p) for p in prompt):
            return {"prompt_token_ids": [{"token_ids": p} for p in prompt]}
    raise _invalid("prompt", "must be a string, a list of strings, a list of token ids or a list of such lists")


def prompt_cache_retention(value) -> None:
    """OpenAI's `prompt_cache_retention` (chat and Responses), a policy of how long a cached prefix may live:
    "in_memory" is what the engine's prefix cache is (engine_svc/scheduling/block_pool.py: blocks kept in memory
    while free, evicted least recently used), so it holds; "24h" asks for prefixes kept up to a day, which no
    tier here keeps: UNSUPPORTED_FIELD naming it."""
    if value == "in_memory":
        return
    if value == "24h":
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            '`prompt_cache_retention` = "24h" is not supported: the prefix cache is in memory only (send "in_memory")',
            "prompt_cache_retention",
        )
    raise _invalid("prompt_cache_retention", 'must be "in_memory" or "24h"')


def reused_prompt(out: dict) -> None:
    """vLLM's decode-side token reuse: `kv_transfer_params.prompt_token_ids` (the prefill step's prompt, forwarded
    by the router) is the chat's `prompt_token_ids`, sent in place of the rendered messages."""
    params = out.get("kv_transfer_params")
    if not isinstance(params, dict) or params.get("prompt_token_ids") is None:
        return
    ids = params.pop("prompt_token_ids")
    if not isinstance(ids, list) or not ids or not all(_is_id(i) and i >= 0 for i in ids):
        raise fail(  # vLLM's words
            Reason.INVALID_REQUEST,
            "`kv_transfer_params['prompt_token_ids']` must be a non-empty list of non-negative integers.",
            "kv_transfer_params.prompt_token_ids",
        )
    out["prompt_token_ids"] = ids
    if not params:
        del out["kv_transfer_params"]


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def clean_messages(messages) -> list:
    """The messages without the keys that carry nothing; vLLM's `reasoning` (>= 0.11) read as
    `reasoning_content`, which it still takes and which wins when both come."""
    if not isinstance(messages, list):
        raise _invalid("messages", "must be a list")
    cleaned = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _invalid(f"messages[{i}]", "must be an object")
        kept = {k: v for k, v in message.items() if v is not None and not (k in EMPTY_MESSAGE_KEYS and v in ([], ""))}
        for key in (k for k in kept if k not in MESSAGE_KEYS and k != "reasoning"):
            # vLLM hands extra keys to the chat template; ours takes the typed message only: refused, not dropped.
            name = f"messages[{i}].{clip(key, QUOTE_CHARS)}"
            raise fail(Reason.UNSUPPORTED_FIELD, f"`{name}` is not a message field this API takes", name)
        if "reasoning" in kept:
            kept.setdefault("reasoning_content", kept.pop("reasoning"))
        cleaned.append(kept)
    return cleaned


def schemas_as_text(out: dict) -> None:
    """JSON schemas as JSON text: a protobuf Struct would not keep their key order (the order they generate in)."""
    fmt = out.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        spec = fmt["json_schema"]
        if isinstance(spec.get("schema"), dict):
            out["response_format"] = {**fmt, "json_schema": {**spec, "schema": json.dumps(spec["schema"])}}
    outputs = out.get("structured_outputs")
    if isinstance(outputs, dict) and isinstance(outputs.get("json"), dict):
        out["structured_outputs"] = {**outputs, "json": json.dumps(outputs["json"])}


def _check_logit_bias(bias) -> None:
    """OpenAI's `logit_bias` keys: token ids, every key that is none named at once (the values: the typed parse)."""
    bad = [k for k in bias if not _TOKEN_ID.fullmatch(k)]
    if bad:
        named = ", ".join(repr(clip(k, QUOTE_CHARS)) for k in bad[:_LISTED]) + (", ..." if len(bad) > _LISTED else "")
        raise _invalid("logit_bias", f"keys must be token ids (integers); not: {named}")


def parse_typed(out: dict, message) -> Any:
    """`out` into the typed request `message`; a field of the wrong shape is INVALID_REQUEST naming it."""
    if isinstance(out.get("logit_bias"), dict):  # another shape: the typed parse names it
        _check_logit_bias(out["logit_bias"])
    try:
        return json_format.ParseDict(out, message)
    except json_format.ParseError as error:
        raise fail(
            Reason.INVALID_REQUEST, f"the request does not fit the API: {error}", _field_of(str(error))
        ) from None


def _field_of(error: str) -> str | None:
    """The top-level field json_format names: `Failed to parse <name> field`, `no field named "<name>"`, or, for a
    scalar of the wrong type (`"temperature": "hot"`), `... at <Message>.<name>`."""
    for marker, end in (("Failed to parse ", " field"), ('no field named "', '"')):
        start = error.find(marker)
        if start >= 0:
            rest = error[start + len(marker) :]
            return rest[: rest.find(end)] if end in rest else rest
    at = _AT_FIELD.search(error)
    return at.group(1) if at else None
