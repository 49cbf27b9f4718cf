"""One choice of one request as the scheduler sees it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from engine_svc.scheduling.sampling import SamplingConfig

_ids = itertools.count()


def next_arrival() -> int:
    """The waiting queue's order among equal priorities (one count per process)."""
    return next(_ids)


@dataclass(eq=False)
class Sequence:
    request_id: str
    index: int  # choice index within its request
    prompt_ids: list[int]
    config: SamplingConfig
    priority: int = 0
    cache_salt: str = ""  # isolates this request's prefix-cache entries
    lora_id: int = 0  # the LoRA adapter it runs with (0: the base model); its prefix-cache entries are its own
    lora_name: str = ""  # ... by the name it is served under (KV events and vllm:lora_requests_info name it)
    arrival: int = field(default_factory=next_arrival)
    output_ids: list[int] = field(default_factory=list)
    block_ids: list[int] = field(default_factory=list)
    # A model whose sliding-window layers have blocks of their own (window_pool.py): their table, as long as
    # block_ids, 0 where a block left the window (or was never needed after a prefix-cache hit).
    window_block_ids: list[int] = field(default_factory=list)
    num_computed: int = 0  # tokens whose K/V are in the cache
    want_prompt_logprobs: bool = False  # owes prompt logprob rows (prompt_scores.py)
    score_from: int = 0  # ... from this prompt position on (those before were scored, or not asked for)
    finished: bool = False
    # Prefix cache: the hashes of this sequence's full blocks so far (prompt + output; they stay valid across a
    # preemption), how many of its blocks are in the cache's table, and the prompt tokens it found cached the
    # first time it was scheduled (None until then).
    block_hashes: list[bytes] = field(default_factory=list)
    num_committed_blocks: int = 0
    num_cached_tokens: int | None = None
    num_uncached_queued: int = 0  # while waiting: its tokens the prefix cache did not hold when it was queued
    num_preemptions: int = 0  # times sent back to the queue, its blocks freed
    speculation: object | None = None  # its verify steps (speculation.RequestCounts), per request when asked
    # Disaggregated serving (kv_handoffs.py): keep the prompt's blocks for a decode engine once finished; or the
    # prompt's K/V pulled from a prefill engine, to land in this sequence's blocks when it is queued, and how many
    # prompt tokens came that way (not computed here).
    hand_off: bool = False
    pulled: object | None = None  # a kv_handoffs.Pulled until it lands
    num_transferred: int = 0
    num_tokens: int = field(init=False)  # prompt + output, kept up to date by append()

    def __post_init__(self) -> None:
        self.num_tokens = len(self.prompt_ids) + len(self.output_ids)

    def append(self, token: int) -> None:
        self.output_ids.append(token)
        self.num_tokens += 1

    def token_at(self, position: int) -> int:
        prompt = len(self.prompt_ids)
        return self.prompt_ids[position] if position < prompt else self.output_ids[position - prompt]

    def tokens(self, start: int, end: int) -> list[int]:
        prompt = len(self.prompt_ids)
        if end <= prompt:
            return self.prompt_ids[start:end]
        if start >= prompt:
            return self.output_ids[start - prompt : end - prompt]
        return self.prompt_ids[start:] + self.output_ids[: end - prompt]

    @property
    def remaining(self) -> int:
        """Tokens still to run through the model before the next sample (1 while decoding)."""
        return self.num_tokens - self.num_computed


@dataclass
class Chunk:
    """The part of a sequence scheduled in one step."""

    seq: Sequence
    start: int
    num_tokens: int
    num_draft: int = 0  # speculative tokens at its end (speculation.py): each gets a logits row too
    samples: bool = field(init=False)  # reaches the end of the sequence: its last row is sampled

    def __post_init__(self) -> None:
        self.samples = self.start + self.num_tokens == self.seq.num_tokens

    @property
    def prompt_logprob_positions(self) -> range:
        """Positions in this chunk whose next prompt token's logprob is owed (from score_from on: every one for
        prompt_logprobs, else, prompt_logprob_token_ids alone, those from prompt_logprob_start on; none scored
        before a preemption)."""
        seq = self.seq
        if not seq.want_prompt_logprobs:
            return range(0)
        return range(max(self.start, seq.score_from), min(self.start + self.num_tokens, len(seq.prompt_ids) - 1))
