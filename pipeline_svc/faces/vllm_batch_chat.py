"""vLLM's `POST /v1/chat/completions/batch` (0.33: OpenAIServingChatBatch) as a face over the one-hop chat route.

The body is a chat request whose `messages` is a list of conversations. Each conversation is the request's other
fields with its own `messages`, read by the chat route's own field policy (pipeline_svc/openai_request.py) and
served as a unary chat completion, all of them concurrently; the answer is one ChatCompletionResponse whose choice
i is conversation i's, with the usages summed. What vLLM's BatchChatCompletionRequest refuses is refused here with
its words (`n` other than 1, beam search); what it leaves out (streaming, tools) is refused rather than ignored,
and so is a P/D handoff: one `kv_transfer_params` cannot serve several conversations. An error names the client's
path: `messages[i][j]` for message j of conversation i. Every conversation is read before any is generated.
"""

from __future__ import annotations

import asyncio
import json
import re

from pipeline_svc import openai_request
from pipeline_svc.openai_service import OpenAIFrontDoor
from scaleout_common.errors import ServiceError
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

# field -> (the values batching takes, vLLM's refusal or ours)
LIMITS: dict[str, tuple[tuple, str]] = {
    "n": ((1,), "Batch chat completions do not support `n > 1`. Please set `n` to 1."),
    "use_beam_search": (
        (False,),
        "Batch chat completions do not support beam search. Please set `use_beam_search` to False.",
    ),
    "stream": ((False,), "Batch chat completions do not stream: one answer holds every conversation's choice."),
    "stream_options": ((), "Batch chat completions do not stream."),
    "tools": ((), "Batch chat completions do not support tool use."),
    "tool_choice": (("none",), 'Batch chat completions do not support tool use: `tool_choice` is "none".'),
    "kv_transfer_params": ((), "Batch chat completions take no P/D handoff: one cannot serve several conversations."),
}
# Where a conversation's own error names `messages[j]`, the client wrote `messages[i][j]`.
MESSAGE_PATH = re.compile(r"(?<![\w\]])messages(?=\[)")


def conversations(data: bytes) -> tuple[list[openai_request.OpenAIRequest], str]:
    """(each conversation's chat request, the client's `request_id` or "")."""
    body = {key: value for key, value in load_object(data).items() if value is not None}
    for name, (taken, why) in LIMITS.items():
        if name in body and body[name] not in taken:
            raise fail(Reason.UNSUPPORTED_FIELD, why, name)
    batch = body.pop("messages", None)
    if not isinstance(batch, list) or not batch:
        raise fail(Reason.INVALID_REQUEST, "`messages` must be a non-empty list of conversations", "messages")
    parsed = []
    for i, messages in enumerate(batch):
        if not isinstance(messages, list) or not messages:
            raise fail(
                Reason.INVALID_REQUEST, f"`messages[{i}]` must be a non-empty list of messages", f"messages[{i}]"
            )
        one = body | {"messages": messages}
        if isinstance(body.get("request_id"), str):  # vLLM's sub-request ids: one live id per conversation
            one["request_id"] = f"{body['request_id']}_{i}"
        try:
            parsed.append(openai_request.chat_request(json.dumps(one).encode()))
        except ServiceError as error:
            raise _in_batch(error, i) from None
    request_id = body.get("request_id")
    return parsed, request_id if isinstance(request_id, str) else ""


def _in_batch(error: ServiceError, i: int) -> ServiceError:
    rename = lambda text: MESSAGE_PATH.sub(f"messages[{i}]", text)  # noqa: E731
    error.message = rename(error.message)
    error.violations = [(rename(field), rename(why)) for field, why in error.violations]
    return error


async def _answer(front: OpenAIFrontDoor, i: int, parsed: openai_request.OpenAIRequest, context) -> dict:
    try:
        return await front.chat_completion(parsed, context)
    except ServiceError as error:
        raise _in_batch(error, i) from None


def merged(answers: list[dict], request_id: str = "") -> dict:
    """vLLM's one ChatCompletionResponse: the first answer's head (its id `chatcmpl-<request_id>` when the client
    named one), choice i from answer i, the usages summed."""
    head = answers[0] | ({"id": f"chatcmpl-{request_id}"} if request_id else {})
    choices = [answer["choices"][0] | {"index": i} for i, answer in enumerate(answers)]
    usage = {
        name: sum(answer["usage"][name] for answer in answers)
        for name in ("prompt_tokens", "total_tokens", "completion_tokens")
    }
    return head | {"choices": choices, "usage": usage | {"prompt_tokens_details": None}, "prompt_token_ids": None}


async def batch_chat(front: OpenAIFrontDoor, data: bytes, context) -> dict:
    parsed, request_id = conversations(data)
    tasks = [asyncio.ensure_future(_answer(front, i, p, context)) for i, p in enumerate(parsed)]
    try:
        return merged(list(await asyncio.gather(*tasks)), request_id)
    finally:
        for task in tasks:
            task.cancel()
