"""What derender needs from a tokenizer, computed once at load: the Rust tokenizer, vocabulary size,
each token's raw bytes (for logprobs), the fingerprint and the default parsers it suggests."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tokenizers import Tokenizer

from scaleout_common import format_detect as detect
from scaleout_common.byte_level import byte_level_alphabet
from scaleout_common.models import tokenizer_fingerprint
from scaleout_common.reasoning_counts import COUNTED_TAGS
from scaleout_common.reasoning_ids import ReasoningIds, ReasoningTags, tokenizer_spec
from scaleout_common.response_templates import declared, load_template, reasoning_tags

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _decoder_types(tokenizer: Tokenizer) -> set[str]:
    decoder = json.loads(tokenizer.to_str()).get("decoder") or {}
    parts = decoder.get("decoders", [decoder]) if decoder.get("type") == "Sequence" else [decoder]
    return {kind for p in parts if isinstance(kind := p.get("type"), str)}


def token_bytes_table(tokenizer: Tokenizer) -> list[bytes]:
    """Raw bytes of every token id as it would appear in decoded text."""
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    added = set(tokenizer.get_added_tokens_decoder())
    kinds = _decoder_types(tokenizer)
    alphabet = byte_level_alphabet() if "ByteLevel" in kinds else None
    table = []
    for token_id in range(size):
        piece = tokenizer.id_to_token(token_id) or ""
        if (m := _BYTE_FALLBACK.match(piece)) and "ByteFallback" in kinds:
            table.append(bytes([int(m.group(1), 16)]))
        elif token_id in added:
            table.append(piece.encode())
        elif alphabet is not None and all(c in alphabet for c in piece):
            table.append(bytes(alphabet[c] for c in piece))
        elif "Metaspace" in kinds or "Replace" in kinds:
            table.append(piece.replace("▁", " ").encode())
        else:
            table.append(tokenizer.decode([token_id], skip_special_tokens=False).encode())
    return table


@dataclass
class TokenizerInfo:
    tokenizer: Tokenizer
    vocab_size: int
    token_bytes: list[bytes]
    fingerprint: str
    has_think_tokens: bool
    tool_format: str  # the tool parser the chat template's format suggests
    special_tokens: dict[int, str]  # id -> content of the special tokens (those skip_special_tokens drops)
    added_tokens: dict[int, str]  # id -> content
    spaces_added_tokens: bool  # decode puts spaces between added tokens (e.g. WordPiece, Metaspace)
    reasoning_format: str = "none"  # the reasoning parser the chat template suggests (scaleout_common/format_detect.py)
    # the tokenizer config's response_template, ready to serve (the `hf` / `beam` parsers), or why there is none
    response_template: Any = None
    template_problem: str = ""
    _specs: dict[str, ReasoningIds] = field(default_factory=dict, repr=False)

    def reasoning_spec(self, parser: str, tags) -> ReasoningIds:
        """Reasoning parser `parser`'s tags (`tags`: its class) as this tokenizer's ids, made once per parser."""
        if parser not in self._specs:
            if getattr(tags, "TEMPLATE", False):  # the model's template declares them
                template = self.response_template
                tags = reasoning_tags(template) if template is not None else ReasoningTags((), ())
            self._specs[parser] = tokenizer_spec(
                tags, lambda text: self.tokenizer.encode(text, add_special_tokens=False).ids
            )
        return self._specs[parser]

    def counting_spec(self, parser: str, tags) -> ReasoningIds:
        """The ids whose spans count as reasoning tokens (usage, CheckReasoning): the parser's tags, or a channel
        format's counted channel (reasoning_counts.COUNTED_TAGS)."""
        counted = COUNTED_TAGS.get(parser)
        return self.reasoning_spec(parser, tags) if counted is None else self.reasoning_spec(f"{parser}#count", counted)

    @classmethod
    def from_hf(cls, hf_tokenizer) -> TokenizerInfo:
        backend: Tokenizer = hf_tokenizer.backend_tokenizer
        vocab = backend.get_vocab(with_added_tokens=True)
        added = {i: token.content for i, token in backend.get_added_tokens_decoder().items()}
        pair = sorted(added)[:2]
        spaces = len(pair) == 2 and backend.decode(pair, skip_special_tokens=False) != "".join(added[i] for i in pair)
        template, problem = load_template(declared(hf_tokenizer))
        return cls(
            tokenizer=backend,
            vocab_size=backend.get_vocab_size(with_added_tokens=True),
            token_bytes=token_bytes_table(backend),
            fingerprint=tokenizer_fingerprint(hf_tokenizer),
            has_think_tokens="<think>" in vocab and "</think>" in vocab,
            tool_format=detect.tool_parser_for(getattr(hf_tokenizer, "chat_template", None)),
            reasoning_format=detect.reasoning_parser_for(getattr(hf_tokenizer, "chat_template", None)),
            special_tokens={i: t.content for i, t in backend.get_added_tokens_decoder().items() if t.special},
            added_tokens=added,
            spaces_added_tokens=spaces,
            response_template=template,
            template_problem=problem,
        )
