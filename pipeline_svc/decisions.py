"""The answers to `/v1/decisions` (decisions_request.py reads the body): one engine read per question, as vLLM's
next-token strategy reads them (vLLM 0.33, entrypoints/openai/decisions), on any chat model whose prompt takes
each option letter as one token.

- A read is a chat: the input (and a system message from the input's system / developer messages), then the
  question: `Question: <instructions>`, a line per option (`A: <option> - <description>`; a predicate's options
  are `false` and `true`, a choice's its values as JSON, a score's its level labels), then
  `Answer with the letter of one option only.`; thinking off (`enable_thinking: false`).
- Render renders it, the engine generates one token greedily with the letters' logprobs
  (`logprob_token_ids`). A letter's token is the one the model's tokenizer makes of the prompt's text and the
  letter (asked of render once per model); a model where a letter is not one distinct token answers 501
  DECISIONS_UNAVAILABLE.
- The answer: the letters' probabilities renormalized among themselves; a predicate's `probability` is
  `true`'s, a choice's `choice` and a score's expected `score` (levels numbered from 0) follow from them, and
  `confidence` is the top option's share times the letters' total probability (low where the model wanted
  another token), as vLLM computes them.
- Reads run concurrently, routed by their shared prefix (every read starts with the input) to one replica,
  whose prefix cache then holds the input once. Usage sums the reads: `input_tokens` the prompts, `output_tokens`
  one a read, `cached_tokens` what the cache held, `cache_write_tokens` the prompt tokens computed (the cache
  keeps them).
"""

from __future__ import annotations

import asyncio
import math

import grpc

from pipeline_svc.decisions_request import LABELS, DecisionRequest, Question
from scaleout.v1 import render_pb2
from scaleout_common import prefix_hash
from scaleout_common.errors import ServiceError
from scaleout_common.openai_body_rules import parse_typed
from scaleout_common.reasons import Reason, fail

REPLY = "Answer with the letter of one option only."
THINKING_OFF = {"enable_thinking": False}


def question_text(question: Question) -> str:
    lines = [f"{label}: {name} - {about}" if about else f"{label}: {name}" for label, (name, about) in
             zip(LABELS, question.options)]  # fmt: skip
    body = "\n".join([*lines, REPLY])
    return f"Question: {question.instructions}\n{body}" if question.instructions else body


class LabelTokens:
    """Each letter's token as the first token of a reply, per model (asked of render once)."""

    def __init__(self, hops):
        self._hops = hops  # its render stub, once open
        self._ids: dict[str, asyncio.Task] = {}

    async def ids(self, model: str) -> list[int]:
        task = self._ids.get(model)
        if task is None or (task.done() and task.exception() is not None):
            task = self._ids[model] = asyncio.ensure_future(self._ask(model))
        return await asyncio.shield(task)

    async def _ask(self, model: str) -> list[int]:
        probe = render_pb2.TokenizeRequest(model=model, add_generation_prompt=True)
        probe.messages.add(role="user").content.string_value = "x"
        probe.chat_template_kwargs.update(THINKING_OFF)
        prompt = list((await self._hops.render.Tokenize(probe)).tokens)
        text = await self._hops.render.Detokenize(
            render_pb2.DetokenizeRequest(model=model, tokens=prompt, skip_special_tokens=False)
        )
        replies = await asyncio.gather(
            *(
                self._hops.render.Tokenize(
                    render_pb2.TokenizeRequest(model=model, prompt=text.prompt + label, add_special_tokens=False)
                )
                for label in LABELS
            )
        )
        ids = []
        for label, reply in zip(LABELS, replies):
            tokens = list(reply.tokens)
            if tokens[:-1] != prompt or tokens[-1] in ids:
                raise fail(
                    Reason.DECISIONS_UNAVAILABLE,
                    f"label {label!r} is not one distinct token after this model's chat prompt",
                )
            ids.append(tokens[-1])
        return ids


def _chat(request: DecisionRequest, question: Question, label_ids: list[int], request_id: str):
    messages = [{"role": "user", "content": f"{request.input}\n\n{question_text(question)}"}]
    if request.system:
        messages.insert(0, {"role": "system", "content": request.system})
    body = {
        "model": request.model,
        "messages": messages,
        "max_tokens": 1,
        "temperature": 0,
        "logprobs": True,
        "logprob_token_ids": label_ids[: len(question.options)],
        "chat_template_kwargs": THINKING_OFF,
        "request_id": request_id,
        **request.routing,
    }
    return parse_typed(body, render_pb2.RenderChatRequest())


async def read(hops, request: DecisionRequest, question: Question, label_ids, request_id: str, context):
    """One question's engine answer (a GenerateResponse) and the served model's name."""
    try:
        rendered = await hops.render.RenderChat(
            _chat(request, question, label_ids, request_id), timeout=context.time_remaining()
        )
        answer = await hops.engine.GenerateUnary(
            rendered.generate_request,
            timeout=context.time_remaining(),
            metadata=prefix_hash.routing_metadata(rendered.generate_request),
        )
    except grpc.aio.AioRpcError as error:
        raise ServiceError.from_rpc_error(error) from None
    if answer.HasField("error"):
        raise ServiceError.from_status(answer.error)
    return answer, rendered.derender_context.model


def answer_of(question: Question, logprobs: list[float]) -> dict:
    top_logprob = max(logprobs)
    weights = [math.exp(lp - top_logprob) for lp in logprobs]
    probs = [w / sum(weights) for w in weights]
    mass = sum(math.exp(lp) for lp in logprobs)
    if question.kind == "predicate":
        return {"type": "predicate", "name": question.name, "probability": probs[1]}
    top = max(range(len(probs)), key=probs.__getitem__)
    out = {"type": question.kind, "name": question.name}
    if question.kind == "choice":
        out["choice"] = question.values[top]
        out["probabilities"] = [{"value": v, "probability": p} for v, p in zip(question.values, probs)]
    else:
        out["score"] = sum(i * p for i, p in enumerate(probs))
        out["probabilities"] = [
            {"value": i, "label": label, "probability": p} for i, (label, p) in enumerate(zip(question.values, probs))
        ]
    return out | {"confidence": probs[top] * mass}


async def decide(hops, labels: LabelTokens, request: DecisionRequest, request_id: str, context) -> dict:
    """The API's answer: every question read concurrently, answered in order."""
    label_ids = await labels.ids(request.model)
    reads = await asyncio.gather(
        *(read(hops, request, q, label_ids, f"{request_id}-{i}", context) for i, q in enumerate(request.questions))
    )
    answers, prompt, cached = [], 0, 0
    for question, (answer, _) in zip(request.questions, reads):
        top = answer.choices[0].logprobs.top[0]
        answers.append(answer_of(question, list(top.logprobs)))
        prompt += answer.usage.prompt_tokens
        cached += answer.usage.cached_tokens
    output = sum(a.usage.completion_tokens for a, _ in reads)
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": prompt - cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + output,
    }
    return {"model": reads[0][1], "answers": answers, "usage": usage}
