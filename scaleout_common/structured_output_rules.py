"""The structured-output rules of the contract (SamplingParams.structured_outputs and bad_words), for every
route that takes them.

Render compiles a request's `response_format`, `structured_outputs` and forced tool choices into a
`StructuredOutputs` message and checks it here; the engine checks any message it is sent (render's or a
direct caller's) here too, so the same bad constraint gets the same reason on `/v1/chat/completions/render`,
`/inference/v1/generate` and the one hop. What only the grammar backend can tell (a schema keyword it cannot
enforce, a regex it cannot parse) is the engine's to refuse, with the same reasons.

Rules:
- exactly one constraint (the oneof); `json_object` is only ever true; a choice has at least one option and
  no empty one; a schema or structural tag is JSON (a schema: an object or a boolean);
- the constraint's text is at most `max_bytes` (GRAMMAR_TOO_COMPLEX), and a grammar compiles within the
  engine's time bound (GRAMMAR_TOO_COMPLEX, raised there);
- `whitespace_pattern` is refused (UNSUPPORTED_FIELD): the backend (xgrammar) cannot honour it;
- `items` (a list's end and separators, for the engine's item budget) sets at least one of them and each text is
  at most MAX_ITEM_TEXT bytes (INVALID_GRAMMAR);
- reasoning and bad-word token ids are inside the vocabulary (TOKEN_ID_OUT_OF_VOCAB).
"""

from __future__ import annotations

import json

from scaleout_common.reasons import Reason, fail
from scaleout_common.sampling_rules import check_token_ids

FIELD = "sampling_params.structured_outputs"
MAX_GRAMMAR_BYTES = 1 << 20  # the engine's --max-grammar-bytes default
COMPILE_TIMEOUT_S = 10.0  # the engine's --grammar-compile-timeout-s default
MAX_ITEM_TEXT = 16  # bytes of `items.end` / `items.separators`: a bracket, a few separator characters
KINDS = ("json_schema", "json_object", "regex", "choice", "grammar", "structural_tag")


def kind(message) -> str | None:
    """Which constraint a `StructuredOutputs` message sets (None: none)."""
    return message.WhichOneof("constraint")


def text_size(message) -> int:
    """Bytes of the constraint's text (what compile time grows with)."""
    which = kind(message)
    if which == "choice":
        return sum(len(v.encode()) for v in message.choice.values)
    if which in ("json_schema", "regex", "grammar", "structural_tag"):
        return len(getattr(message, which).encode())
    return 0


def parse_json(text: str, field: str, what: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise fail(Reason.INVALID_GRAMMAR, f"{what} is not valid JSON: {error}", field) from None


def check(message, *, max_bytes: int = MAX_GRAMMAR_BYTES, prefix: str = FIELD) -> None:
    """Validate a `StructuredOutputs` message (its shape; compiling it is the engine's)."""
    which = kind(message)
    if which is None:
        raise fail(Reason.INVALID_GRAMMAR, f"structured_outputs must set one of {', '.join(KINDS)}", prefix)
    field = f"{prefix}.{which}"
    if which == "json_object" and not message.json_object:
        raise fail(Reason.INVALID_GRAMMAR, "json_object must be true when set", field)
    if which == "choice":
        if not message.choice.values:
            raise fail(Reason.INVALID_GRAMMAR, "choice must list at least one option", field)
        for i, value in enumerate(message.choice.values):
            if not value:
                raise fail(Reason.INVALID_GRAMMAR, "a choice option must not be empty", f"{field}.values[{i}]")
    if which in ("regex", "grammar") and not getattr(message, which).strip():
        raise fail(Reason.INVALID_GRAMMAR, f"{which} must not be empty", field)
    size = text_size(message)
    if size > max_bytes:
        raise fail(
            Reason.GRAMMAR_TOO_COMPLEX,
            f"the {which} constraint is {size} bytes, more than the limit of {max_bytes}",
            field,
        )
    if which == "json_schema":
        schema = parse_json(message.json_schema, field, "json_schema")
        if not isinstance(schema, (dict, bool)):
            raise fail(Reason.INVALID_GRAMMAR, "json_schema must be a JSON object (or a boolean schema)", field)
    if which == "structural_tag" and not isinstance(parse_json(message.structural_tag, field, "structural_tag"), dict):
        raise fail(Reason.INVALID_GRAMMAR, "structural_tag must be a JSON object", field)
    if message.whitespace_pattern:
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            "whitespace_pattern is not supported by this deployment's grammar backend (xgrammar); use "
            "disable_any_whitespace",
            f"{prefix}.whitespace_pattern",
        )
    if message.HasField("items"):
        _check_items(message.items, f"{prefix}.items")


def _check_items(items, path: str) -> None:
    if not items.end and not items.separators:
        raise fail(
            Reason.INVALID_GRAMMAR,
            "items sets neither end nor separators: a list needs the text that closes it or that opens an item",
            path,
        )
    for name in ("end", "separators"):
        size = len(getattr(items, name).encode())
        if size > MAX_ITEM_TEXT:
            raise fail(
                Reason.INVALID_GRAMMAR, f"items.{name} is {size} bytes, more than {MAX_ITEM_TEXT}", f"{path}.{name}"
            )


def check_token_ids_of(params, vocab_size: int) -> None:
    """Reasoning tag ids (the constraint's, the thinking budget's) and bad-word ids of a SamplingParams message
    must be inside the vocabulary."""
    for i, word in enumerate(params.bad_words):
        check_token_ids(word.token_ids, vocab_size, f"sampling_params.bad_words[{i}].token_ids")
    if params.HasField("structured_outputs") and params.structured_outputs.HasField("reasoning"):
        _check_reasoning_ids(params.structured_outputs.reasoning, vocab_size, f"{FIELD}.reasoning")
    if params.HasField("thinking_budget"):
        _check_reasoning_ids(params.thinking_budget.reasoning, vocab_size, "sampling_params.thinking_budget.reasoning")


def _check_reasoning_ids(reasoning, vocab_size: int, path: str) -> None:
    for name in ("start", "end", "ends_on"):
        for i, seq in enumerate(getattr(reasoning, name)):
            check_token_ids(seq.token_ids, vocab_size, f"{path}.{name}[{i}].token_ids")
    check_token_ids(reasoning.blank, vocab_size, f"{path}.blank")
