"""The rules of prompt scoring: vLLM's `prompt_logprob_token_ids` rows, and whether an answer's prompt logprobs can
fit the message that must carry them. The engine checks both on every request; render and the vLLM generate face
check the JSON answer's size before any engine work.

- prompt_logprob_token_ids (vLLM 0.33's rules and words): exactly `len(prompt) - 1 - prompt_logprob_start` rows
  ("scored rows": the last prompt row predicts the output), not all empty, each at most max_logprobs ids, each id
  in [-1, vocab) (-1 pads a row: its value is -inf); prompt_logprob_start >= 0 and only with the rows.
- Size: `prompt_logprobs` of k alternatives over a prompt of N tokens is N - 1 rows of k + 1 entries in one answer
  (the engine's first message; the REST answer's JSON). A request whose answer cannot fit the carrying message
  (--max-message-mb, the gateway's --max-body-mb alike: 64 MB) is refused up front, INVALID_SAMPLING_PARAM naming
  `prompt_logprobs` and the limit, rather than computed for minutes and dropped by gRPC as RESOURCE_EXHAUSTED (a
  429, "retry later", for a request that never fits). The engine's message is counted exactly (protobuf: a float
  and a varint id per alternative; 320 KiB a row for SmolLM2's whole vocabulary of 49,152, so 204 rows in 64 MB);
  the JSON from the fixed text of an entry (`"id": {"logprob": x, "rank": r, "decoded_token": t}, `), the ids'
  and ranks' digits, 18 characters a logprob (a float32's shortest double repr: 17-19) and 2 a token: 77 bytes an
  entry for the whole vocabulary (measured: 80 on /inference/v1/generate, 85 on /v1/completions), so 17 rows.
  vLLM has no such limit: its answer for 300 prompt tokens over the whole vocabulary is ~1.2 GB of JSON. An answer
  the estimate let through that is made above the limit after all gets the same refusal (`check_answer_made`).
"""

from __future__ import annotations

from collections.abc import Sequence

from scaleout_common.reasons import Reason, fail

FIELD = "prompt_logprob_token_ids"
JSON_ENTRY_BYTES = len('"": {"logprob": , "rank": , "decoded_token": }, ') + 18 + 2  # ids' and ranks' digits aside
PROTO_ROW_BYTES = 16  # a row's own logprob, rank and the message framing of its alternatives, at least


def _digits(count: int, base: int, first: int) -> int:
    """Bytes of the integers first..first+count-1 printed in `base` digits per byte (10: decimal; 128: varint)."""
    total, low, width = 0, 0, 1
    while low < first + count:
        high = low * base if low else base
        total += max(0, min(high, first + count) - max(low, first)) * width
        low, width = high, width + 1
    return total


def answer_bytes(prompt_len: int, top: int, json: bool) -> int:
    """At least the bytes of `top` prompt logprobs over a prompt of `prompt_len` tokens: protobuf (the engine's
    PromptInfo) or JSON (vLLM's prompt_logprobs, the token itself and its alternatives)."""
    rows = max(prompt_len - 1, 0)
    if json:
        return rows * ((top + 1) * JSON_ENTRY_BYTES + _digits(top + 1, 10, 0) + _digits(top + 1, 10, 1))
    return rows * (PROTO_ROW_BYTES + 4 * top + _digits(top, 128, 0))


def check_answer_fits(prompt_len: int, top: int | None, limit_bytes: int, json: bool, field: str) -> None:
    """Refuse prompt logprobs whose answer cannot fit `limit_bytes` (INVALID_SAMPLING_PARAM naming `field`)."""
    if top is None or prompt_len < 2:
        return
    need = answer_bytes(prompt_len, top, json)
    if need <= limit_bytes:
        return
    fits = limit_bytes // max(answer_bytes(2, top, json), 1) + 1
    raise fail(
        Reason.INVALID_SAMPLING_PARAM,
        f"{field.rsplit('.', 1)[-1]} of {top} alternatives over {prompt_len} prompt tokens need at least "
        f"{need / 2**20:.0f} MB in one answer, above this server's {limit_bytes / 2**20:.0f} MB message limit "
        f"(--max-message-mb): ask fewer alternatives, or score at most {fits} prompt tokens per request",
        field,
    )


def check_answer_made(size: int, limit_bytes: int, top: int | None, field: str) -> None:
    """An answer made and found above the limit, where the estimate let its prompt logprobs through (its tokens'
    texts were longer than the estimate's): the same refusal, instead of gRPC's RESOURCE_EXHAUSTED on sending it."""
    if size > limit_bytes and top is not None:
        raise fail(
            Reason.INVALID_SAMPLING_PARAM,
            f"{field.rsplit('.', 1)[-1]} ({top}) made a {size / 2**20:.0f} MB answer, above this "
            f"server's {limit_bytes / 2**20:.0f} MB message limit (--max-message-mb): ask fewer alternatives, or "
            "score fewer prompt tokens per request",
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
