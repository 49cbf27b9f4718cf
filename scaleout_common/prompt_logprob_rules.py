"""The rules of prompt scoring: vLLM's `prompt_logprob_token_ids` rows, and whether a request's prompt logprobs can
fit the messages that must carry them. The engine checks both on every request; render checks the size on the
one-hop routes before any engine work.

- prompt_logprob_token_ids (vLLM 0.33's rules and words): exactly `len(prompt) - 1 - prompt_logprob_start` rows
  ("scored rows": the last prompt row predicts the output), not all empty, each at most max_logprobs ids, each id
  in [-1, vocab) (-1 pads a row: its value is -inf); prompt_logprob_start >= 0 and only with the rows.
- Size: `prompt_logprobs` of k alternatives over a prompt of N tokens is N - 1 rows of k + 1 entries, all in one
  gRPC message at each hop that carries them whole (--max-message-mb: 64 MB): the engine's first message, and on
  the one-hop routes derender's answer (a REST answer's JSON is sent in pieces, pipeline_svc/answer_pieces.py, so
  it has no such bound; nor has vLLM's). A request whose rows cannot fit is refused up front,
  INVALID_SAMPLING_PARAM naming `prompt_logprobs` and the limit, instead of being computed for minutes and dropped
  by gRPC as RESOURCE_EXHAUSTED (a 429, "retry later", for a request that never fits). Counted per alternative
  from each encoding: the engine's exactly (a float and a varint id: 320 KiB a row for SmolLM2's whole vocabulary
  of 49,152, so 204 rows in 64 MB); derender's at least (a float, varint id and rank, a string of at least one
  byte: 12.3 bytes for the whole vocabulary, 17 measured with SmolLM2's texts: 111 rows by the count, ~80 in fact);
  the JSON of a stream's one event (`"id": {"logprob": x, "rank": r, "decoded_token": t}, `, 18 characters a
  logprob: 77 bytes, 80-85 measured: 17 rows). Where the count lets through rows a hop cannot carry after all, the
  hop's RESOURCE_EXHAUSTED becomes the same refusal (`oversized`).
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

FIELD = "prompt_logprob_token_ids"
ENGINE, DERENDER, JSON = "engine", "derender", "json"  # the encodings that carry prompt logprobs whole
JSON_ENTRY_BYTES = len('"": {"logprob": , "rank": , "decoded_token": }, ') + 18 + 2  # ids' and ranks' digits aside
DERENDER_ENTRY_BYTES = 4 + 2 + 1  # a float; a string's tag, length and one byte (varint id and rank aside)
ROW_BYTES = 16  # a row's own logprob, rank and message framing, at least


def _digits(count: int, base: int, first: int) -> int:
    """Bytes of the integers first..first+count-1 printed in `base` digits per byte (10: decimal; 128: varint)."""
    total, low, width = 0, 0, 1
    while low < first + count:
        high = low * base if low else base
        total += max(0, min(high, first + count) - max(low, first)) * width
        low, width = high, width + 1
    return total


def answer_bytes(prompt_len: int, top: int, form: str) -> int:
    """At least the bytes of `top` prompt logprobs over a prompt of `prompt_len` tokens in `form`: the engine's
    PromptInfo, derender's PromptPositionLogprobs, or vLLM's JSON (the token itself and its alternatives)."""
    rows, entries = max(prompt_len - 1, 0), top + 1
    if form == ENGINE:
        return rows * (ROW_BYTES + 4 * top + _digits(top, 128, 0))
    if form == DERENDER:
        return rows * (ROW_BYTES + entries * DERENDER_ENTRY_BYTES + _digits(entries, 128, 0) + _digits(entries, 128, 1))
    return rows * (entries * JSON_ENTRY_BYTES + _digits(entries, 10, 0) + _digits(entries, 10, 1))


def check_answer_fits(prompt_len: int, top: int | None, limit_bytes: int, form: str, field: str) -> None:
    """Refuse prompt logprobs that cannot fit `limit_bytes` in `form` (INVALID_SAMPLING_PARAM naming `field`)."""
    if top is None or prompt_len < 2:
        return
    need = answer_bytes(prompt_len, top, form)
    if need <= limit_bytes:
        return
    fits = limit_bytes // max(answer_bytes(2, top, form), 1) + 1
    raise fail(
        Reason.INVALID_SAMPLING_PARAM,
        f"{field.rsplit('.', 1)[-1]} of {top} alternatives over {prompt_len} prompt tokens need at least "
        f"{need / 2**20:.0f} MB in one message, above this server's {limit_bytes / 2**20:.0f} MB limit "
        f"(--max-message-mb): ask fewer alternatives, or score at most {fits} prompt tokens per request",
        field,
    )


def asked(*requests) -> int | None:
    """The most prompt-logprob alternatives any of these requests (render's or the engine's) asks; None: none."""
    return max((r.prompt_logprobs for r in requests if r.HasField("prompt_logprobs")), default=None)


def oversized(error: ServiceError, top: int | None, field: str) -> ServiceError:
    """A hop's RESOURCE_EXHAUSTED for a message above its limit, on a request with prompt logprobs (rows the count
    let through): the same refusal as up front; any other error as it is."""
    if top is None or error.code != grpc.StatusCode.RESOURCE_EXHAUSTED or "larger than max" not in error.message:
        return error
    return fail(
        Reason.INVALID_SAMPLING_PARAM,
        f"{field.rsplit('.', 1)[-1]} ({top}) made a message above this server's limit (--max-message-mb; "
        f"{error.message[:120]}): ask fewer alternatives, or score fewer prompt tokens per request",
        field,
    )


def check_token_id_rows(
    rows: Sequence[Sequence[int]], start: int, prompt_len: int, vocab_size: int, max_ids: int, prefix: str = ""
) -> None:
    """vLLM's checks of prompt_logprob_token_ids and prompt_logprob_start against the prompt (`prefix`: their
    path in the request)."""
    field = prefix + FIELD
    if start < 0:
        raise fail(
            Reason.INVALID_SAMPLING_PARAM, "prompt_logprob_start must be non-negative.", prefix + "prompt_logprob_start"
        )
    if not rows:
        if start:
            raise fail(
                Reason.INVALID_SAMPLING_PARAM,
                "prompt_logprob_start requires prompt_logprob_token_ids.",
                prefix + "prompt_logprob_start",
            )
        return
    width = max(map(len, rows))
    if not width:
        raise fail(
            Reason.INVALID_SAMPLING_PARAM,
            f"{FIELD} must be a non-empty integer array of shape [num_rows, num_ids].",
            field,
        )
    if width > max_ids:
        raise fail(
            Reason.INVALID_SAMPLING_PARAM,
            f"Requested {width} token ids per row in {FIELD}, which is greater than max allowed: {max_ids}.",
            field,
        )
    scored = max(prompt_len - 1 - start, 0)
    if len(rows) != scored:
        raise fail(
            Reason.INVALID_SAMPLING_PARAM,
            f"{FIELD} has {len(rows)} rows, but the prompt has {scored} scored rows "
            "(prompt_len - 1 - prompt_logprob_start).",
            field,
        )
    for i, row in enumerate(rows):
        if row and (min(row) < -1 or max(row) >= vocab_size):
            raise fail(
                Reason.TOKEN_ID_OUT_OF_VOCAB,
                f"{FIELD} contain out-of-vocab token ids (-1 pads a row). Vocabulary size: {vocab_size}",
                f"{field}[{i}]",
            )
