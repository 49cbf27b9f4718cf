"""Turns a request's step outputs into GenerateResponse messages.

Tokens of a choice are held until `stream_interval` of them are ready (or the choice finished). Outputs
that queued up while the client was slow are merged into one message, so a busy server sends fewer,
larger messages instead of falling behind. Prompt info rides on the first message; the last one has
`finished` and usage; a failure after the start is an in-band terminal message with `error`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from engine_svc.model.sampler import RowLogprobs
from engine_svc.serving.engine_api import EngineAPI
from engine_svc.serving.requests import ChoiceDelta, RequestState
from scaleout.v1 import common_pb2, engine_pb2


def token_logprobs_pb(rows: list[RowLogprobs]) -> common_pb2.TokenLogprobs:
    return common_pb2.TokenLogprobs(
        logprobs=[r.logprob for r in rows],
        ranks=[r.rank for r in rows],
        top=[common_pb2.TopLogprobs(token_ids=r.top_ids, logprobs=r.top_logprobs) for r in rows],
    )


def choice_pb(delta: ChoiceDelta, with_logprobs: bool) -> engine_pb2.GenerateChoice:
    choice = engine_pb2.GenerateChoice(index=delta.index, token_ids=delta.token_ids, finish_reason=delta.finish_reason)
    if with_logprobs:
        choice.logprobs.CopyFrom(token_logprobs_pb(delta.logprobs))
    if delta.stop_token_id is not None:
        choice.stop_token_id = delta.stop_token_id
    return choice


async def stream_responses(
    engine: EngineAPI, state: RequestState, interval: int
) -> AsyncIterator[engine_pb2.GenerateResponse]:
    config = state.seqs[0].config
    with_logprobs = config.logprobs is not None
    prompt = engine_pb2.PromptInfo(num_tokens=state.num_prompt_tokens)
    pending: dict[int, ChoiceDelta] = {}
    unfinished, completion, first = len(state.seqs), 0, True
    state.outbox.wake_tokens = interval
    try:
        while True:
            for out in await state.outbox.take():
                if out.error is not None:
                    yield engine_pb2.GenerateResponse(request_id=state.request_id, error=out.error.to_status())
                    return
                if out.prompt_logprobs:
                    prompt.logprobs.CopyFrom(token_logprobs_pb(out.prompt_logprobs))
                if out.cached_tokens is not None:
                    prompt.cached_tokens = out.cached_tokens
                for delta in out.deltas:
                    completion += len(delta.token_ids)
                    unfinished -= bool(delta.finish_reason)
                    held = pending.get(delta.index)
                    if held is None:
                        pending[delta.index] = delta  # the step thread hands each delta over once: reuse it
                        continue
                    held.token_ids += delta.token_ids
                    held.logprobs += delta.logprobs
                    held.finish_reason, held.stop_token_id = delta.finish_reason, delta.stop_token_id
            ready = [d for d in pending.values() if d.finish_reason or len(d.token_ids) >= interval]
            if len(ready) > 1:
                ready.sort(key=lambda d: d.index)
            if not ready:
                continue
            message = engine_pb2.GenerateResponse(
                request_id=state.request_id, choices=[choice_pb(d, with_logprobs) for d in ready]
            )
            for d in ready:
                del pending[d.index]
            if first:
                message.prompt.CopyFrom(prompt)
                first = False
            if unfinished == 0:
                message.finished = True
                message.usage.CopyFrom(
                    common_pb2.Usage(
                        prompt_tokens=state.num_prompt_tokens,
                        completion_tokens=completion,
                        total_tokens=state.num_prompt_tokens + completion,
                        cached_tokens=prompt.cached_tokens,
                    )
                )
            yield message
            if unfinished == 0:
                return
    finally:
        if not state.done:
            engine.abort([state.request_id])


async def collect(engine: EngineAPI, state: RequestState) -> engine_pb2.GenerateResponse:
    """The whole output of every choice in one message (GenerateUnary)."""
    whole = engine_pb2.GenerateResponse(request_id=state.request_id)
    choices: dict[int, engine_pb2.GenerateChoice] = {}
    async for message in stream_responses(engine, state, interval=1 << 30):
        if message.HasField("error"):
            return message
        if message.HasField("prompt"):
            whole.prompt.CopyFrom(message.prompt)
        for part in message.choices:
            choices.setdefault(part.index, engine_pb2.GenerateChoice(index=part.index)).MergeFrom(part)
        if message.finished:
            whole.finished = True
            whole.usage.CopyFrom(message.usage)
    whole.choices.extend(choices[i] for i in sorted(choices))
    return whole
