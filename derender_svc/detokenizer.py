"""Incremental detokenization with explicit, serializable state.

Wraps `tokenizers.decoders.DecodeStream`: it decodes a small window (the tokens of the last emitted step plus
the pending ones) and emits text only when it does not end in a broken UTF-8 character. We mirror the window
in two lists so the state can travel (stateless twin): restoring `DecodeStream(ids=emitted)` and re-feeding
`pending` with the next chunk reproduces the original stream exactly. Seeding `emitted` with the prompt tail
keeps SentencePiece/Metaspace leading spaces.

spaces_between_special_tokens=False, as vLLM's fast detokenizer does it: for tokenizers whose decoder puts a
space between added tokens, an added token that follows another one is shown as its bare content.
"""

from __future__ import annotations

import os

from tokenizers.decoders import DecodeStream


class IncrementalDetokenizer:
    def __init__(
        self,
        tokenizer,
        skip_special_tokens: bool,
        emitted: list[int],
        pending: list[int] | None = None,
        join_added: dict[int, str] | None = None,
        last_added: bool = False,
    ):
        self._tokenizer = tokenizer  # a `tokenizers.Tokenizer`
        self._skip = skip_special_tokens
        self._join_added = join_added  # added tokens to show without spaces between them (or None)
        self.last_added = last_added
        self.emitted = list(emitted)  # tokens whose text is out; DecodeStream's prefix
        self.pending = list(pending or [])  # tokens not yet turned into text
        self._stream = DecodeStream(ids=self.emitted, skip_special_tokens=skip_special_tokens)
        self._refeed = bool(self.pending)

    def step(self, token_ids: list[int]) -> str:
        """Text newly made complete by `token_ids` (possibly empty). Work is proportional to the window."""
        if self._join_added is None:
            return self._step(token_ids)
        parts = []
        for token_id in token_ids:
            text = self._step([token_id])
            added = self._join_added.get(token_id)
            parts.append(added if added is not None and self.last_added else text)
            self.last_added = added is not None
        return "".join(parts)

    def _step(self, token_ids: list[int]) -> str:
        if not token_ids:
            return ""
        feed = self.pending + token_ids if self._refeed else token_ids
        self._refeed = False
        try:
            text = self._stream.step(self._tokenizer, feed)
        except Exception:  # InvalidPrefix: the decoder rewrote text already shown (e.g. a lone byte completed)
            return self._resync(token_ids)
        if text is None:
            self.pending.extend(token_ids)
            return ""
        self.emitted = self.pending + token_ids
        self.pending = []
        return text

    def _resync(self, token_ids: list[int]) -> str:
        """Show what the new tokens add to the decoded window and restart the stream after them."""
        prefix = self._tokenizer.decode(self.emitted, skip_special_tokens=self._skip)
        self.emitted = self.emitted + self.pending + token_ids
        self.pending = []
        self._stream = DecodeStream(ids=self.emitted, skip_special_tokens=self._skip)
        full = self._tokenizer.decode(self.emitted, skip_special_tokens=self._skip)
        common = len(os.path.commonprefix([prefix, full]))  # noqa: RUF071 (a string prefix, not a path)
        return full[common:]

    def flush(self) -> str:
        """At the end of a choice: whatever the pending tokens decode to, replacement characters included."""
        if not self.pending:
            return ""
        prefix = self._tokenizer.decode(self.emitted, skip_special_tokens=self._skip)
        full = self._tokenizer.decode(self.emitted + self.pending, skip_special_tokens=self._skip)
        self.emitted, self.pending = self.emitted + self.pending, []
        self._stream = DecodeStream(ids=self.emitted, skip_special_tokens=self._skip)
        return full[len(prefix) :] if full.startswith(prefix) else full

    def state(self) -> dict:
        return {"e": self.emitted, "p": self.pending, "a": self.last_added}
