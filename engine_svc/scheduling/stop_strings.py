"""Stop strings matched in the engine, as vLLM's engine matches them (its detokenizer's `check_stop_strings`).

Each watched sequence decodes its new tokens incrementally with tokenizers' `DecodeStream` (seeded with the
prompt's tail so a first token's leading space decodes as in context; ~20 us a token measured on a busy 2-core
CPU, and it never re-decodes the output) and keeps only the text tail a match can still use. After
`min_tokens`, a new piece of text is searched, together with that tail, for each stop string in the caller's
order; the first found ends the choice with the token that completed it (the tokens are not cut: trimming the
text is the caller's). Only sequences with stop strings are watched, so other requests pay nothing.
"""

from __future__ import annotations

from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

PROMPT_SEED_TOKENS = 4  # prompt tokens a DecodeStream starts from (enough context for a leading space)


class StopWatch:
    __slots__ = ("_longest", "_min_tokens", "_seen", "_stops", "_stream", "_tail", "_tokenizer")

    def __init__(
        self, tokenizer: Tokenizer, stops: tuple[str, ...], prompt_ids: list[int], min_tokens: int, keep_special: bool
    ):
        self._tokenizer = tokenizer
        self._stops = stops
        self._longest = max(len(s) for s in stops)
        self._min_tokens = min_tokens
        self._stream = DecodeStream(ids=prompt_ids[-PROMPT_SEED_TOKENS:], skip_special_tokens=not keep_special)
        self._tail = ""  # the last `longest - 1` characters of the output's text
        self._seen = 0  # output tokens fed

    def feed(self, token: int) -> str | None:
        """The stop string that `token` completes, if any."""
        piece = self._stream.step(self._tokenizer, token)
        self._seen += 1
        if not piece:
            return None
        text = self._tail + piece
        self._tail = text[len(text) - self._longest + 1 :] if self._longest > 1 else ""
        if self._seen <= self._min_tokens:
            return None
        for stop in self._stops:  # vLLM: the first of the list found, searched from where it could now end
            if text.find(stop, max(0, len(text) - len(piece) - len(stop) + 1)) >= 0:
                return stop
        return None


class StopStrings:
    """Makes the watches of an engine that has a tokenizer (`tokenizer`: a tokenizers.Tokenizer)."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer

    @classmethod
    def of(cls, hf_tokenizer) -> StopStrings | None:
        """For a transformers tokenizer; None for one without a fast (tokenizers) backend."""
        backend = getattr(hf_tokenizer, "backend_tokenizer", None)
        return cls(backend) if isinstance(backend, Tokenizer) else None

    def watch(self, prompt_ids: list[int], config) -> StopWatch:
        """A watch for a sequence whose SamplingConfig has stop strings."""
        return StopWatch(self.tokenizer, config.stop, prompt_ids, config.min_tokens, config.stop_keep_special)
