"""Workloads for the serving bench, as vLLM's `bench serve` has them: random fixed lengths, a ShareGPT-like
synthetic length mix, and multi-turn conversations behind one shared system prompt.

A workload is a list of conversations; a conversation is a list of turns, each a (user part, output length).
Single-turn workloads have one turn per conversation. The user part is token ids (engine target) or text
(gateway target: render tokenizes it); either way the next turn's prompt is the whole history so far: the
previous prompt, the answer the server gave, then the new user part.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

# A word list for text prompts: common English words, roughly one token each for BPE tokenizers.
_WORD_LIST = (
    "the of and to in is was that for on with as by at from his her they this which or had are but not be "
    "have one all were when we there can an your been if more their has would what will about some out so "
    "time up other into them only could new than then first any like now people my over such our made after "
    "also did many before must through back years where much your way well down should because each just "
    "those how too little state good very make world still own see men work long get here between both life "
    "being under never day same another know while last might us great old year off come since against go "
    "came right used take three"
)
WORDS = _WORD_LIST.split()


@dataclass
class Turn:
    user: list[int] | str  # token ids (engine) or text (gateway)
    output_len: int


@dataclass
class Conversation:
    turns: list[Turn]
    system: list[int] | str = field(default_factory=list)


def _ids(rng: random.Random, n: int, vocab: int) -> list[int]:
    return [rng.randrange(10, vocab - 10) for _ in range(n)]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _part(rng: random.Random, n: int, vocab: int, text: bool) -> list[int] | str:
    return _text(rng, n) if text else _ids(rng, n, vocab)


def random_lengths(
    count: int, input_len: int, output_len: int, vocab: int, text: bool, seed: int = 0
) -> list[Conversation]:
    """Fixed input and output lengths (vLLM's `random` with range ratio 0)."""
    rng = random.Random(seed)
    return [Conversation([Turn(_part(rng, input_len, vocab, text), output_len)]) for _ in range(count)]


def sharegpt_like(
    count: int, vocab: int, text: bool, seed: int = 0, max_len: int = 2048, max_output_len: int = 1024
) -> list[Conversation]:
    """Lengths drawn from log-normals fitted to ShareGPT's first turns as vLLM's bench samples them (input:
    median ~170, mean ~240 tokens; output: median ~150, mean ~210), cut to [4, max_len] and [4, max_output_len]."""
    rng = random.Random(seed)
    conversations = []
    for _ in range(count):
        input_len = min(max(int(rng.lognormvariate(math.log(170), 0.85)), 4), max_len)
        output_len = min(max(int(rng.lognormvariate(math.log(150), 0.8)), 4), max_output_len)
        conversations.append(Conversation([Turn(_part(rng, input_len, vocab, text), output_len)]))
    return conversations


def multi_turn(
    count: int,
    turns: int,
    system_len: int,
    user_len: int,
    output_len: int,
    vocab: int,
    text: bool,
    seed: int = 0,
) -> list[Conversation]:
    """`count` conversations of `turns` turns behind one shared system prompt of `system_len` tokens."""
    rng = random.Random(seed)
    system = _part(rng, system_len, vocab, text)
    return [
        Conversation([Turn(_part(rng, user_len, vocab, text), output_len) for _ in range(turns)], system)
        for _ in range(count)
    ]
