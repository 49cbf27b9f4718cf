"""A step's prompt scoring: the logprob rows of the prompt positions its chunks owe (Chunk.prompt_logprob_positions).

Each owed row gets one log_scores (the sampler's: log-softmax, or the logits in a *_logits mode; a prompt's tokens
are not sampled, so raw and processed agree, vLLM's rule), whatever it is asked for: its next prompt token's
logprob, rank and top-k (prompt_logprobs), and/or the values of the ids vLLM's prompt_logprob_token_ids names for
it (-1 pads: -inf). A sequence's score_from then moves past its chunk: a prompt preempted mid-prefill resumes
its rows where they stopped, its earlier positions served from the prefix cache (block_pool.hit_blocks).
"""

from __future__ import annotations

import torch

from engine_svc.model.sampler import RowLogprobs, gather_named, log_scores, logprob_rows, named_ids, ranked
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from engine_svc.serving.requests import RequestState


def score_prompts(chunks: list[Chunk], logits: torch.Tensor, requests: dict[str, RequestState], as_logits: bool):
    """Append the rows `chunks` owe (`logits`: one row each, in their order) to their requests."""
    wanted = [(c.seq, p) for c in chunks for p in c.prompt_logprob_positions]
    if wanted:
        logp = log_scores(logits, as_logits)  # once per row, for both kinds of answer
        _top_k(wanted, logp, requests)
        names = [_names(seq.config, p) for seq, p in wanted]
        if any(names):
            values = gather_named(logp, named_ids(names, logp.device)).tolist()
            for (seq, _), ids, row in zip(wanted, names, values):
                if ids:
                    requests[seq.request_id].prompt_token_id_logprobs.append(row[: len(ids)])
    for c in chunks:
        seq = c.seq
        if seq.want_prompt_logprobs:
            seq.score_from = max(seq.score_from, c.start + c.num_tokens)
            seq.want_prompt_logprobs = seq.score_from < len(seq.prompt_ids) - 1


def _top_k(wanted: list[tuple[Sequence, int]], logp: torch.Tensor, requests: dict[str, RequestState]) -> None:
    """prompt_logprobs: each row's next prompt token's value and rank, and its request's top k."""
    topped = [(row, seq, p) for row, (seq, p) in enumerate(wanted) if seq.config.prompt_logprobs is not None]
    if not topped:
        return
    device = logp.device
    picked = logp if len(topped) == len(wanted) else logp[torch.tensor([r for r, _, _ in topped], device=device)]
    targets = torch.tensor([seq.prompt_ids[p + 1] for _, seq, p in topped], device=device)
    top = max(seq.config.prompt_logprobs or 0 for _, seq, _ in topped)
    for (_, seq, _), row in zip(topped, logprob_rows(*ranked(picked, targets, top))):
        k = seq.config.prompt_logprobs
        requests[seq.request_id].prompt_logprobs.append(
            RowLogprobs(row.logprob, row.rank, row.top_ids[:k], row.top_logprobs[:k])
        )


def _names(config: SamplingConfig, position: int) -> tuple[int, ...]:
    """The ids prompt_logprob_token_ids names at `position` (none before prompt_logprob_start)."""
    start = config.prompt_logprob_start
    return (
        config.prompt_logprob_token_ids[position - start]
        if config.prompt_logprob_token_ids and position >= start
        else ()
    )
