"""vLLM's beam search on the one hop's unary completions and chat (`use_beam_search`, `length_penalty`; vLLM 0.33's
entrypoints/generate/beam_search/online.py), run over the engine as vLLM's server runs it over its own:

- the beam width is `n`; every step asks the engine for one token of each live beam (its prompt plus the beam's
  tokens, the prefix cache holding what they share) with the `2 * width` most likely next tokens' logprobs;
- each beam's candidates score its cumulative logprob plus theirs; an end-of-sequence candidate (the model's EOS
  ids, unless `ignore_eos`) completes that beam, the `width` best others live on;
- after `max_tokens` steps the completed and live beams are ranked by cumulative logprob / length **
  `length_penalty` (the length counts the EOS), and the `width` best are the answer's choices, best first:
  `finish_reason` "stop" (the EOS as `stop_reason`; it ends the choice's token ids, its text shown only with
  `include_stop_str_in_output`, as any generation's) or "length".

Derender turns the choices into the API's answer as for any generation. What beam search does not use is refused
with it, naming the field (vLLM ignores most of these): sampling knobs, stops, logprobs, structured outputs and
forced tools, streaming; `temperature` is passed to the one-token calls as vLLM passes it (it shapes the scores only
under a processed --logprobs-mode).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

import grpc

from scaleout.v1 import common_pb2, engine_pb2
from scaleout_common import prefix_hash
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

# Client fields beam search goes with (the route's prompt, rendering and output options); any other is refused.
BEAM_FIELDS = frozenset(
    {
        "model", "prompt", "messages", "n", "best_of", "max_tokens", "max_completion_tokens", "temperature",
        "ignore_eos", "include_stop_str_in_output", "skip_special_tokens", "spaces_between_special_tokens", "echo",
        "request_id", "priority", "cache_salt", "add_special_tokens", "return_token_ids", "truncate_prompt_tokens",
        "truncation_side", "user", "safety_identifier", "metadata", "tools", "parallel_tool_calls",
        "chat_template", "chat_template_kwargs", "add_generation_prompt", "continue_final_message", "documents",
        "reasoning_effort", "include_reasoning", "store", "service_tier", "modalities", "length_penalty",
    }
)  # fmt: skip
NEUTRAL = {"stream": (False,), "tool_choice": ("auto", "none"), "repetition_penalty": (1, 1.0)}


@dataclass(frozen=True)
class Beam:
    width: int
    length_penalty: float


def beam_request(data: dict) -> Beam | None:
    """Pops vLLM's beam fields from the client's JSON body (nulls dropped); refuses what beam search does not use."""
    use = data.pop("use_beam_search", False)
    if not isinstance(use, bool):
        raise fail(Reason.INVALID_REQUEST, "`use_beam_search` must be a boolean", "use_beam_search")
    penalty = data.get("length_penalty", 1.0)
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not math.isfinite(penalty):
        raise fail(Reason.INVALID_REQUEST, "`length_penalty` must be a number", "length_penalty")
    if not use:
        if "length_penalty" in data and penalty != 1.0:  # it shapes beam search only: not asked, not honoured
            raise fail(Reason.UNSUPPORTED_FIELD, "`length_penalty` needs `use_beam_search: true`", "length_penalty")
        data.pop("length_penalty", None)
        return None
    data.pop("length_penalty", None)
    for name, value in data.items():
        if name not in BEAM_FIELDS and value not in NEUTRAL.get(name, ()):
            raise fail(Reason.UNSUPPORTED_FIELD, f"`{name}` is not supported with `use_beam_search`", name)
    width = data.get("n", 1)
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise fail(Reason.INVALID_REQUEST, "`n` (the beam width) must be a positive integer", "n")
    return Beam(width, float(penalty))


@dataclass
class _Sequence:
    tokens: list[int]  # generated so far
    score: float = 0.0  # cumulative logprob
    length: int = 0  # tokens taken, the EOS too
    eos: int | None = None


def _rank(beam: _Sequence, penalty: float) -> float:
    return beam.score / (max(beam.length, 1) ** penalty)


async def generate(engine, rendered, beam: Beam, eos_ids: frozenset[int], context) -> list:
    """The beams as one engine answer (GenerateResponse, a choice per beam) for derender; `engine`: the engine
    stub, `rendered`: render's answer, its `derender_context.n` set to the beams answered here."""
    request = rendered.generate_request
    params = request.sampling_params
    steps = params.max_tokens
    one = common_pb2.SamplingParams(max_tokens=1, logprobs=2 * beam.width, ignore_eos=True)
    one.temperature = params.temperature if params.HasField("temperature") else 1.0
    stop_at = frozenset() if params.ignore_eos else eos_ids
    routing = prefix_hash.routing_metadata(request)  # every beam to the replica whose cache holds the prompt
    live, done = [_Sequence([])], []
    for step in range(steps):
        answers = await asyncio.gather(
            *(_next(engine, request, one, s, f"{step}-{i}", routing, context) for i, s in enumerate(live))
        )
        candidates = []
        for sequence, top in zip(live, answers):
            for token, logprob in top:
                score, length = sequence.score + logprob, sequence.length + 1
                if token in stop_at:  # its text shown with include_stop_str_in_output only (derender's rule)
                    done.append(_Sequence(sequence.tokens + [token], score, length, eos=token))
                else:
                    candidates.append(_Sequence(sequence.tokens + [token], score, length))
        live = sorted(candidates, key=lambda s: s.score, reverse=True)[: beam.width]
        if not live:
            break
    best = sorted(done + live, key=lambda s: _rank(s, beam.length_penalty), reverse=True)[: beam.width]
    rendered.derender_context.n = len(best)
    return [_answer(request, best)]


async def _next(engine, request, one, sequence: _Sequence, tag: str, routing, context) -> list[tuple[int, float]]:
    """The `2 * width` most likely next tokens of `sequence` and their logprobs."""
    call = engine_pb2.GenerateRequest()
    call.CopyFrom(request)
    call.request_id = f"{request.request_id}-beam-{tag}"
    call.token_ids.extend(sequence.tokens)
    call.sampling_params.CopyFrom(one)
    call.n = 1
    try:
        answer = await engine.GenerateUnary(call, timeout=context.time_remaining(), metadata=routing)
    except grpc.aio.AioRpcError as refused:
        raise _in_beam_terms(ServiceError.from_rpc_error(refused), one.logprobs) from None
    if answer.HasField("error"):
        raise _in_beam_terms(ServiceError.from_status(answer.error), one.logprobs)
    top = answer.choices[0].logprobs.top[0]
    return list(zip(top.token_ids, top.logprobs))


def _in_beam_terms(error: ServiceError, logprobs: int) -> ServiceError:
    """The engine's refusal of the step's logprobs (past its --max-logprobs) is the beam width's."""
    if not any(field.endswith("logprobs") for field, _ in error.violations):
        return error
    return fail(
        Reason.UNSUPPORTED_FIELD,
        f"`n` {logprobs // 2} is too wide for beam search here: each step reads 2 x n logprobs ({error.message})",
        "n",
    )


def _answer(request, beams: list[_Sequence]) -> engine_pb2.GenerateResponse:
    out = engine_pb2.GenerateResponse(request_id=request.request_id, finished=True)
    for index, beam in enumerate(beams):
        choice = out.choices.add(index=index, token_ids=beam.tokens)
        if beam.eos is None:
            choice.finish_reason = common_pb2.FINISH_REASON_LENGTH
        else:
            choice.finish_reason = common_pb2.FINISH_REASON_STOP
            choice.stop_token_id = beam.eos
    out.prompt.num_tokens = out.usage.prompt_tokens = len(request.token_ids)
    out.usage.completion_tokens = sum(len(beam.tokens) for beam in beams)
    out.usage.total_tokens = out.usage.prompt_tokens + out.usage.completion_tokens
    return out
