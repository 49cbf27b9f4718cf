"""Logprob rendering: each token's text with partial UTF-8 repaired from the preceding sampled tokens (or, with
vLLM's `return_tokens_as_token_ids`, `token_id:<id>` in its place), its raw bytes, and the ordered top-k
alternatives (with vLLM's `logprob_token_ids`: the token itself, then every id the caller named, once each). A
logprob is at least -9999.0, as vLLM prints it: JSON has no -inf, which a token cut by top-k or a
grammar has (the engine's processed logprobs mode)."""

from __future__ import annotations

from dataclasses import dataclass, field

FLOOR = -9999.0  # vLLM's `max(logprob, -9999.0)`


def split_incomplete_utf8(data: bytes) -> tuple[bytes, bytes]:
    """(complete part, trailing bytes of a character that is not finished yet)."""
    for back in range(1, min(3, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: keep looking for the lead byte
            continue
        need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
        return (data[:-back], data[-back:]) if need > back else (data, b"")
    return data, b""


def _show(partial: bytes, own: bytes) -> str:
    """The characters `own` completes after `partial`; a token that completes none shows its escaped bytes.

    When `own` cannot continue `partial` (an alternative "!" after the first byte of "é"), the pending bytes
    are not its text: it shows as it would alone, never as "\ufffd!" beside bytes that say "!"."""
    complete, _ = split_incomplete_utf8(partial + own)
    if complete:
        try:
            return complete.decode("utf-8")
        except UnicodeDecodeError:
            if partial:
                return _show(b"", own)
            return complete.decode("utf-8", "replace")
    return "bytes:" + "".join(f"\\x{b:02x}" for b in own)


@dataclass
class RenderedAlternative:
    token: str
    logprob: float
    bytes: bytes


@dataclass
class RenderedLogprob:
    token: str
    logprob: float
    bytes: bytes
    top: list[RenderedAlternative] = field(default_factory=list)
    offset: int = 0  # position of the token in the text (completion logprobs)


def token_id_text(token_id: int) -> str:
    """vLLM's placeholder for a token under `return_tokens_as_token_ids`."""
    return f"token_id:{token_id}"


def _with_token(token_id: int, logprob: float, named: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The token itself, then each named id once (vLLM's engine returns the sampled token with the named ids)."""
    out = {token_id: logprob}
    for alt_id, alt_logprob in named:
        out.setdefault(alt_id, alt_logprob)
    return list(out.items())


class LogprobRenderer:
    def __init__(
        self,
        token_bytes: list[bytes],
        top_k: int,
        partial: bytes = b"",
        offset: int = 0,
        as_ids: bool = False,
        named: bool = False,
    ):
        self._token_bytes = token_bytes
        self.top_k = top_k
        self.named = named  # the alternatives are named ids (logprob_token_ids): the token, then all of them
        self.as_ids = as_ids  # tokens shown as `token_id:<id>` (their bytes stay their own)
        self.partial = partial  # unfinished character carried over from earlier sampled tokens
        self.offset = offset  # characters completed by the tokens so far (completion text_offset)

    def render(self, token_ids, logprobs) -> list[RenderedLogprob]:
        """`logprobs` is an engine TokenLogprobs parallel to `token_ids`."""
        out = []
        for i, token_id in enumerate(token_ids):
            own = self._token_bytes[token_id]
            top = []
            if i < len(logprobs.top):
                pairs = list(zip(logprobs.top[i].token_ids, logprobs.top[i].logprobs))
                pairs = _with_token(token_id, logprobs.logprobs[i], pairs) if self.named else pairs[: self.top_k]
                for alt_id, alt_logprob in pairs:
                    alt = self._token_bytes[alt_id]
                    alt_shown = token_id_text(alt_id) if self.as_ids else _show(self.partial, alt)
                    top.append(RenderedAlternative(alt_shown, max(alt_logprob, FLOOR), alt))
            shown = token_id_text(token_id) if self.as_ids else _show(self.partial, own)
            complete, self.partial = split_incomplete_utf8(self.partial + own)
            out.append(RenderedLogprob(shown, max(logprobs.logprobs[i], FLOOR), own, top, self.offset))
            self.offset += len(complete.decode("utf-8", "replace"))
        return out

    def state(self) -> dict:
        return {"b": self.partial.hex(), "o": self.offset}
