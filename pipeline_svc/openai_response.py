"""The contract's typed responses -> OpenAI's JSON, field for field as the official SDKs read it.

Null-or-absent follows OpenAI (and vLLM 0.33's additions): `finish_reason` and `logprobs` are null until
they apply, `role` is on a choice's first delta only, `content` is null when a message only calls tools (and
absent from a delta that adds no text, so a streamed tool-call message assembles to `content: null` too),
`tool_calls` is absent when there are none, a call's `id`/`type`/`name` ride on its first delta only,
`stop_reason` is the matched stop token id or string, or null (EOS); SGLang's `matched_stop` is the same but
names the EOS token id. Reasoning is printed as `reasoning`
(vLLM's name) and `reasoning_content` (its older name). With vLLM's `return_token_ids` (`token_ids=True` here)
every choice has `token_ids` (a chunk's: the ids it adds) and the prompt's ids are `prompt_token_ids`: on a chat
response, on the chunk that starts a chat choice, on each completion choice (a stream: on its first chunk). A
unary answer prints them and `prompt_logprobs` (vLLM's, when asked for) null otherwise, where vLLM's response
model has them.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from scaleout.v1 import common_pb2, derender_pb2


def usage(message: common_pb2.Usage) -> dict:
    out: dict[str, Any] = {
        "prompt_tokens": message.prompt_tokens,
        "completion_tokens": message.completion_tokens,
        "total_tokens": message.total_tokens,
    }
    # Always, as OpenAI prints it (and vLLM with --enable-prompt-tokens-details): the stack always caches prefixes.
    out["prompt_tokens_details"] = {"cached_tokens": message.cached_tokens}
    if message.HasField("completion_tokens_details"):  # with a reasoning parser, as vLLM
        out["completion_tokens_details"] = {"reasoning_tokens": message.completion_tokens_details.reasoning_tokens}
    return out


def _stop_reason(choice) -> int | str | None:
    which = choice.WhichOneof("stop_reason")
    return getattr(choice, which) if which else None


def _stops(choice) -> dict:
    """vLLM's `stop_reason` and SGLang's `matched_stop`: the same but for a "stop" no caller's stop matched, where
    SGLang names the token that ended the choice (an EOS)."""
    stop_reason = _stop_reason(choice)
    if stop_reason is None and choice.HasField("end_token_id"):
        return {"stop_reason": None, "matched_stop": choice.end_token_id}
    return {"stop_reason": stop_reason, "matched_stop": stop_reason}


def _tool_call(call: common_pb2.ToolCall, streamed: bool) -> dict:
    function: dict[str, Any] = {"arguments": call.function.arguments}
    if call.function.HasField("name"):
        function["name"] = call.function.name
    out: dict[str, Any] = {"index": call.index} if streamed else {}
    if call.HasField("id"):
        out |= {"id": call.id, "type": call.type or "function"}
    return out | {"function": function}


def logprob_entry(lp) -> dict:
    """One token's logprob as OpenAI writes it (chat's `logprobs.content`, Responses' output_text `logprobs`)."""
    top = [{"token": t.token, "logprob": t.logprob, "bytes": list(t.bytes)} for t in lp.top_logprobs]
    return {"token": lp.token, "logprob": lp.logprob, "bytes": list(lp.bytes), "top_logprobs": top}


def _logprobs(choice) -> dict | None:
    if not choice.HasField("logprobs"):
        return None
    return {"content": [logprob_entry(lp) for lp in choice.logprobs.content]}


def _message(message, streamed: bool) -> dict:
    out: dict[str, Any] = {}
    if message.HasField("role") if streamed else True:
        out["role"] = message.role or "assistant"
    if message.HasField("content") and (message.content or not streamed):
        out["content"] = message.content
    elif not streamed:
        out["content"] = None
    if message.HasField("reasoning"):
        out["reasoning"] = out["reasoning_content"] = message.reasoning
    if message.tool_calls:
        out["tool_calls"] = [_tool_call(c, streamed) for c in message.tool_calls]
    return out


def _token_ids(choice, token_ids: bool) -> dict:
    return {"token_ids": list(choice.token_ids)} if token_ids else {}


def _prompt_token_ids(message, token_ids: bool, streamed: bool) -> dict:
    """A response's `prompt_token_ids` (always, when asked); a chunk's only where it starts a choice."""
    if not token_ids or (streamed and not message.prompt_token_ids):
        return {}
    return {"prompt_token_ids": list(message.prompt_token_ids)}


def kv_transfer_params(results) -> dict:
    """A prefill step's handoff, top level as vLLM answers it (what P/D routers copy to the decode request); its
    block ids, port and counts are integers there (a Struct holds every number as a double)."""
    for result in results:
        if result.HasField("kv_transfer_params"):
            return {"kv_transfer_params": _integral(json_format.MessageToDict(result.kv_transfer_params))}
    return {}


def _integral(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return {k: _integral(v) for k, v in value.items()} if isinstance(value, dict) else value


def chat_completion(message: derender_pb2.ChatCompletion, token_ids: bool = False) -> dict:
    choices = [
        {
            "index": c.index,
            "message": _message(c.message, streamed=False),
            "logprobs": _logprobs(c),
            "finish_reason": c.finish_reason or "stop",
            **_stops(c),
            "token_ids": None,
        }
        | _token_ids(c, token_ids)
        for c in message.choices
    ]
    out = _head(message, "chat.completion") | {"choices": choices, "prompt_logprobs": _prompt_logprobs(message)}
    out["prompt_token_ids"] = None
    out |= _prompt_token_ids(message, token_ids, False)
    return out | {"usage": usage(message.usage)} if message.HasField("usage") else out


def chat_chunk(message: derender_pb2.ChatCompletionChunk, with_usage: bool, token_ids: bool = False) -> dict:
    choices = [
        {
            "index": c.index,
            "delta": _message(c.delta, streamed=True),
            "logprobs": _logprobs(c),
            "finish_reason": c.finish_reason if c.HasField("finish_reason") else None,
            **_stops(c),
        }
        | _token_ids(c, token_ids)
        for c in message.choices
    ]
    out = _head(message, "chat.completion.chunk") | {"choices": choices}
    return _chunk_usage(out | _prompt_token_ids(message, token_ids, True), with_usage)


def completion(
    message: derender_pb2.Completion, streamed: bool, with_usage: bool = False, token_ids: bool = False
) -> dict:
    choices = []
    for c in message.choices:
        choice: dict[str, Any] = {"index": c.index, "text": c.text, "logprobs": _completion_logprobs(c)}
        choice["finish_reason"] = (c.finish_reason or None) if streamed else (c.finish_reason or "stop")
        choice |= _stops(c)
        if c.HasField("reasoning_content"):
            choice["reasoning"] = choice["reasoning_content"] = c.reasoning_content
        if not streamed:  # vLLM's response choice prints these null when not asked for
            choice |= {"token_ids": None, "prompt_logprobs": _prompt_logprobs(c), "prompt_token_ids": None}
        choices.append(choice | _prompt_token_ids(c, token_ids, streamed) | _token_ids(c, token_ids))
    out = _head(message, "text_completion") | {"choices": choices}
    if streamed:
        return _chunk_usage(out, with_usage)
    return out | {"usage": usage(message.usage)} if message.HasField("usage") else out


def _completion_logprobs(choice) -> dict | None:
    if not choice.HasField("logprobs"):
        return None
    lp = choice.logprobs
    unscored = [None] * lp.unscored_tokens  # an echoed prompt's first token has no logprob: null, as OpenAI prints
    return {
        "tokens": list(lp.tokens),
        "token_logprobs": unscored + list(lp.token_logprobs[lp.unscored_tokens :]),
        "top_logprobs": unscored
        + [{e.token: e.logprob for e in t.entries} for t in lp.top_logprobs[lp.unscored_tokens :]],
        "text_offset": list(lp.text_offset),
    }


def _prompt_logprobs(answer) -> list | None:
    """vLLM's `prompt_logprobs` (a completion choice's, a chat answer's): per prompt token null (the first) or
    {token id: {logprob, rank, decoded_token}}."""
    if not answer.prompt_logprobs:
        return None
    return [
        {
            str(token_id): {"logprob": logprob, "rank": rank, "decoded_token": text}
            for token_id, logprob, rank, text in zip(p.token_ids, p.logprobs, p.ranks, p.decoded_tokens)
        }
        or None
        for p in answer.prompt_logprobs
    ]


def _head(message, kind: str) -> dict:
    return {"id": message.id, "object": kind, "created": message.created, "model": message.model}


def _chunk_usage(out: dict, with_usage: bool) -> dict:
    """Under include_usage every chunk says `"usage": null` (the stream fills it in for continuous stats)."""
    if with_usage:
        out["usage"] = None
    return out


def usage_chunk(head: dict, total: common_pb2.Usage) -> dict:
    """include_usage's last chunk: empty choices and the request's usage, as OpenAI sends it."""
    return head | {"choices": [], "usage": usage(total)}
