"""Label reads: how likely a model is to begin its reply with each of a few labels (option letters, `yes`/`no`,
digits), as vLLM's decision APIs read them (vLLM 0.33, entrypoints/openai/decisions/strategies.py, its next-token
strategy). OpenAI's `/v1/decisions` (decisions.py) and vLLM's `/v1/systemone` (faces/vllm_systemone.py) ask
their questions through it.

- A read is a chat (an optional system message, one user turn), thinking off (`enable_thinking: false`): render
  renders it, the engine generates one token greedily with the labels' logprobs (`logprob_token_ids`).
- A label's token is the one the model's tokenizer makes of the chat prompt's text and the label (asked of render
  once per model and label set); where a label is not one distinct token there, the route answers 501
  DECISIONS_UNAVAILABLE naming it.
- A request's reads run concurrently, routed by their shared prefix (the system message and the input they start
  with) to one replica, whose prefix cache then holds it once.
"""

from __future__ import annotations

import asyncio
import math
import re
import string
from dataclasses import dataclass

import grpc

from scaleout.v1 import render_pb2
from scaleout_common import prefix_hash
from scaleout_common.errors import ServiceError
from scaleout_common.openai_body_rules import parse_typed
from scaleout_common.reasons import Reason, fail

THINKING_OFF = {"enable_thinking": False}
# The labels the decision routes read and the replies their prompts ask for (vLLM's and SGLang's words).
LETTERS = tuple(string.ascii_uppercase)  # one per option, in order: A to Z
DIGITS = tuple(string.digits)  # one per level, numbered from 0
YES_NO: tuple[str, ...] = ("yes", "no")
ANSWER_LETTER = "Answer with the letter of one option only."
ANSWER_NUMBER = "Answer with the number of one level only."
ANSWER_YES_NO = "Answer with yes or no only."
LABEL_IDS = re.compile(r"logprob_token_ids")
PROMPT_IDS = re.compile(r"prompt_token_ids\[(\d+)\](?:\.token_ids)?(?:\[(\d+)\])?")


@dataclass(frozen=True)
class Ask:
    content: str  # the user turn
    labels: tuple[str, ...]  # the labels scored, in option order


@dataclass(frozen=True)
class Read:
    logprobs: list[float]  # each label's, over the whole vocabulary
    argmax_is_label: bool  # the greedy token is one of the labels
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    model: str  # the served model's name
    prompt: tuple[int, ...] = ()  # the prompt's token ids as read
    label_ids: tuple[int, ...] = ()

    def probs(self, temperature: float = 1.0) -> list[float]:
        """The labels' probabilities renormalized among themselves (sharpened by `temperature`: logprobs differ
        from logits by one constant, so this is the softmax of the labels' logits / temperature)."""
        top = max(self.logprobs) / temperature
        weights = [math.exp(lp / temperature - top) for lp in self.logprobs]
        return [w / sum(weights) for w in weights]

    def label_mass(self) -> float:
        """The labels' total probability over the vocabulary."""
        return sum(math.exp(lp) for lp in self.logprobs)


class LabelTokens:
    """Each label's token as the first token of a reply, per model (each asked of render once)."""

    def __init__(self, hops):
        self._hops = hops  # its render stub, once open
        self._tasks: dict[tuple, asyncio.Task] = {}

    def _once(self, key: tuple, make) -> asyncio.Future:
        task = self._tasks.get(key)
        if task is None or (task.done() and task.exception() is not None):  # a failed ask is asked again
            task = self._tasks[key] = asyncio.ensure_future(make())
        return asyncio.shield(task)

    async def ids(self, model: str, labels: tuple[str, ...]) -> list[int]:
        found = await asyncio.gather(*(self._once((model, label), lambda label=label: self._label(model, label))
                                       for label in labels))  # fmt: skip
        if len(set(found)) != len(found):
            raise fail(Reason.DECISIONS_UNAVAILABLE, f"labels {list(labels)} are not distinct tokens for this model")
        return found

    async def _probe(self, model: str) -> tuple[list[int], str]:
        """A chat prompt's ids up to the reply, thinking off, and their text."""
        probe = render_pb2.TokenizeRequest(model=model, add_generation_prompt=True)
        probe.messages.add(role="user").content.string_value = "x"
        probe.chat_template_kwargs.update(THINKING_OFF)
        prompt = list((await self._hops.render.Tokenize(probe)).tokens)
        detokenize = render_pb2.DetokenizeRequest(model=model, tokens=prompt, skip_special_tokens=False)
        return prompt, (await self._hops.render.Detokenize(detokenize)).prompt

    async def _label(self, model: str, label: str) -> int:
        prompt, text = await self._once((model,), lambda: self._probe(model))
        tokenize = render_pb2.TokenizeRequest(model=model, prompt=text + label, add_special_tokens=False)
        tokens = list((await self._hops.render.Tokenize(tokenize)).tokens)
        if tokens[:-1] != prompt:
            raise fail(Reason.DECISIONS_UNAVAILABLE, f"label {label!r} is not one token after this model's chat prompt")
        return tokens[-1]


async def _read(hops, rendered, label_ids: list[int], context) -> Read:
    """One rendered prompt's engine read: one greedy token with `label_ids`' logprobs."""
    try:
        answer = await hops.engine.GenerateUnary(
            rendered.generate_request,
            timeout=context.time_remaining(),
            metadata=prefix_hash.routing_metadata(rendered.generate_request),
        )
    except grpc.aio.AioRpcError as error:
        raise ServiceError.from_rpc_error(error) from None
    if answer.HasField("error"):
        raise ServiceError.from_status(answer.error)
    choice = answer.choices[0]
    return Read(
        logprobs=list(choice.logprobs.top[0].logprobs),
        argmax_is_label=bool(choice.token_ids) and choice.token_ids[0] in label_ids,
        input_tokens=answer.usage.prompt_tokens,
        cached_tokens=answer.usage.cached_tokens,
        output_tokens=answer.usage.completion_tokens,
        model=rendered.derender_context.model,
        prompt=tuple(rendered.generate_request.token_ids),
        label_ids=tuple(label_ids),
    )


async def _chat_read(hops, chat: render_pb2.RenderChatRequest, label_ids: list[int], context) -> Read:
    try:
        rendered = await hops.render.RenderChat(chat, timeout=context.time_remaining())
    except grpc.aio.AioRpcError as error:
        raise ServiceError.from_rpc_error(error) from None
    return await _read(hops, rendered, label_ids, context)


async def read_all(hops, tokens: LabelTokens, asks: list[Ask], request: dict, context) -> list[Read]:
    """The reads of `asks`, concurrently. `request`: the chat fields every read shares (`model`, `request_id`, a
    `system` text, `cache_salt`, `prompt_cache_key`, `priority`, `chat_template_kwargs` merged over thinking off)."""
    request = dict(request)
    model, request_id, system = request.pop("model", ""), request.pop("request_id"), request.pop("system", "")
    kwargs = THINKING_OFF | request.pop("chat_template_kwargs", {})
    reads = []
    for i, ask in enumerate(asks):
        label_ids = await tokens.ids(model, ask.labels)
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": ask.content})
        body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0, "logprobs": True}
        body |= {"logprob_token_ids": label_ids, "chat_template_kwargs": kwargs}
        chat = parse_typed(body | request | {"request_id": f"{request_id}-{i}"}, render_pb2.RenderChatRequest())
        reads.append(_chat_read(hops, chat, label_ids, context))
    return list(await asyncio.gather(*reads))


async def read_token_prompts(
    hops, prompts: list[list[int]], labels: list[list[int]], request: dict, context
) -> list[Read]:
    """The reads of prompts given as token ids (no template), prompt i scoring `labels[i]`, concurrently;
    `request`: the completion fields they share (`model`, `request_id`, `cache_salt`, `priority`). Render checks each
    prompt (vocabulary, length); its errors name the prompt as `prompt_token_ids[i]`."""

    async def one(i: int, prompt: list[int], label_ids: list[int]) -> Read:
        body = {"prompt_token_ids": [{"token_ids": prompt}], "max_tokens": 1, "temperature": 0, "logprobs": 0}
        body |= {"logprob_token_ids": label_ids}  # logprobs 0: only those ids' logprobs, no top ones
        typed = parse_typed(
            body | request | {"request_id": f"{request['request_id']}-{i}"}, render_pb2.RenderCompletionRequest()
        )
        try:
            rendered = await hops.render.RenderCompletion(typed, timeout=context.time_remaining())
        except grpc.aio.AioRpcError as error:
            failure = ServiceError.from_rpc_error(error)
            rename = lambda text: text.replace("prompt_token_ids[0]", f"prompt_token_ids[{i}]")  # noqa: E731
            failure.message = rename(failure.message)
            failure.violations = [(rename(field), why) for field, why in failure.violations]
            raise failure from None
        return await _read(hops, rendered.prompts[0], label_ids, context)

    return list(await asyncio.gather(*(one(i, p, ids) for i, (p, ids) in enumerate(zip(prompts, labels)))))


def is_ids(value) -> bool:
    return isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value)


async def tokens_of(hops, model: str, text, special: bool, context) -> list[int]:
    """`text`'s token ids (render's tokenizer), or `text` itself where it is ids already."""
    if not isinstance(text, str):
        return text
    request = render_pb2.TokenizeRequest(model=model, prompt=text, add_special_tokens=special)
    return list((await hops.render.Tokenize(request, timeout=context.time_remaining())).tokens)


def in_client_terms(error: ServiceError, parts: list[tuple[str, int]] | None) -> ServiceError:
    """Render's `logprob_token_ids` named `label_token_ids`; its `prompt_token_ids[i][j]` named as the query's or the
    item's own position (`query[k]`, `items[i][k]`), given each prompt's first part and its length (`items[i]` if
    not known)."""

    def name(match: re.Match) -> str:
        item, j = int(match[1]), match[2]
        if j is None or parts is None:
            return f"items[{item}]"
        first, length = parts[item]
        position = int(j)
        if position < length:
            return f"{first}[{position}]" if first == "query" else f"items[{item}][{position}]"
        return f"query[{position - length}]" if first != "query" else f"items[{item}][{position - length}]"

    rename = lambda text: PROMPT_IDS.sub(name, LABEL_IDS.sub("label_token_ids", text))  # noqa: E731
    error.message = rename(error.message)
    error.violations = [(rename(field), rename(why)) for field, why in error.violations]
    return error
