"""OpenAI-shaped protos from choice deltas: chat chunks, completion chunks and their one-shot forms."""

from __future__ import annotations

from dataclasses import dataclass

from derender_svc.choice import ChoiceDelta, ToolCallOut
from derender_svc.logprobs import RenderedLogprob
from scaleout.v1 import common_pb2, derender_pb2


@dataclass(frozen=True)
class ResponseMeta:
    id: str
    created: int
    model: str
    echo: str = ""  # shown before each choice's output: a completion's prompt, chat's last message (echo: true)
    prompt_token_ids: tuple[int, ...] | None = None  # with return_token_ids


def accumulate(deltas: list[ChoiceDelta]) -> ChoiceDelta:
    """All of one choice's deltas folded into one (the one-shot result)."""
    total = ChoiceDelta(deltas[0].index, first=True, logprobs=None)
    calls: dict[int, ToolCallOut] = {}
    for delta in deltas:
        total.content += delta.content
        total.reasoning += delta.reasoning
        for call in delta.tool_calls:
            merged = calls.setdefault(call.index, ToolCallOut(call.index))
            merged.id = merged.id or call.id
            merged.name = merged.name or call.name
            merged.arguments += call.arguments
        if delta.logprobs is not None:
            total.logprobs = (total.logprobs or []) + delta.logprobs
        if delta.token_ids is not None:
            total.token_ids = (total.token_ids or []) + delta.token_ids
        if delta.finish_reason is not None:
            total.finish_reason, total.stop_token_id, total.stop_str, total.end_token_id = (
                delta.finish_reason,
                delta.stop_token_id,
                delta.stop_str,
                delta.end_token_id,
            )
    total.tool_calls = [calls[i] for i in sorted(calls)]
    return total


def _tool_call(call: ToolCallOut) -> common_pb2.ToolCall:
    message = common_pb2.ToolCall(index=call.index, function=common_pb2.FunctionCall(arguments=call.arguments))
    if call.id:
        message.id, message.type = call.id, "function"
    if call.name:
        message.function.name = call.name
    return message


def _top(alternative) -> derender_pb2.ChatTopLogprob:
    return derender_pb2.ChatTopLogprob(
        token=alternative.token, logprob=alternative.logprob, bytes=list(alternative.bytes)
    )


def chat_logprobs(rendered: list[RenderedLogprob]) -> derender_pb2.ChatLogprobs:
    return derender_pb2.ChatLogprobs(
        content=[
            derender_pb2.ChatLogprob(
                token=r.token, logprob=r.logprob, bytes=list(r.bytes), top_logprobs=[_top(a) for a in r.top]
            )
            for r in rendered
        ]
    )


def completion_logprobs(
    rendered: list[RenderedLogprob], offset: int, echoed: list[RenderedLogprob] | None = None
) -> derender_pb2.CompletionLogprobs:
    """`offset`: where the output starts in the text; `echoed`: the echoed prompt's tokens, which come first (from
    offset 0, the first of them unscored)."""
    echoed = echoed or []
    rows = echoed + rendered
    unscored = 1 if echoed else 0
    return derender_pb2.CompletionLogprobs(
        tokens=[r.token for r in rows],
        token_logprobs=[r.logprob for r in rows],
        top_logprobs=[
            derender_pb2.CompletionTopLogprobs(entries=_with_sampled(r) if i >= unscored else [])
            for i, r in enumerate(rows)
        ],
        text_offset=[r.offset for r in echoed] + [offset + r.offset for r in rendered],
        unscored_tokens=unscored,
    )


def prompt_positions(
    ids: list[int], rendered: list[RenderedLogprob], scored: common_pb2.TokenLogprobs
) -> list[derender_pb2.PromptPositionLogprobs]:
    """vLLM's prompt logprobs of prompt tokens 1..N-1: each position's own token (its rank in the distribution)
    first, then its rendered alternatives (rank = their place, most likely first) other than it."""
    out = []
    for i, (token_id, row) in enumerate(zip(ids, rendered)):
        position = derender_pb2.PromptPositionLogprobs(
            token_ids=[token_id], logprobs=[row.logprob], ranks=[scored.ranks[i]], decoded_tokens=[row.token]
        )
        alternatives = scored.top[i].token_ids if i < len(scored.top) else []
        for rank, (alt_id, alt) in enumerate(zip(alternatives, row.top), start=1):
            if alt_id != token_id:
                position.token_ids.append(alt_id)
                position.logprobs.append(alt.logprob)
                position.ranks.append(rank)
                position.decoded_tokens.append(alt.token)
        out.append(position)
    return out


def _with_sampled(row: RenderedLogprob) -> list[derender_pb2.ChatTopLogprob]:
    """A completion token's alternatives lead with the token itself: OpenAI's legacy completions always return the
    sampled token's logprob, so up to `logprobs + 1` entries (vLLM's too; chat's `top_logprobs` do not)."""
    return [_top(row)] + [_top(a) for a in row.top if a.token != row.token]


def _set_stop_reason(message, delta: ChoiceDelta) -> None:
    if delta.finish_reason:
        message.finish_reason = delta.finish_reason
    if delta.stop_token_id is not None:
        message.stop_token_id = delta.stop_token_id
    elif delta.stop_str is not None:
        message.stop_str = delta.stop_str
    if delta.end_token_id is not None:
        message.end_token_id = delta.end_token_id


def _fill_chat(choice, message, delta: ChoiceDelta, show_content: bool, echo: str) -> None:
    """One chat choice: `message` is its delta (chunk) or its message (one-shot). With `echo: true` the
    continued message's text goes before the choice's first content (vLLM's chat echo)."""
    if delta.first:
        message.role = "assistant"
    if show_content:
        message.content = (echo if delta.first else "") + delta.content
    if delta.reasoning:
        message.reasoning = message.reasoning_content = delta.reasoning
    message.tool_calls.extend(_tool_call(c) for c in delta.tool_calls)
    if delta.logprobs is not None:
        choice.logprobs.CopyFrom(chat_logprobs(delta.logprobs))
    choice.token_ids.extend(delta.token_ids or ())
    _set_stop_reason(choice, delta)


def chat_chunk(meta: ResponseMeta, deltas: list[ChoiceDelta], usage) -> derender_pb2.ChatCompletionChunk:
    chunk = derender_pb2.ChatCompletionChunk(
        id=meta.id, object="chat.completion.chunk", created=meta.created, model=meta.model, usage=usage
    )
    for delta in deltas:
        choice = chunk.choices.add(index=delta.index)
        first_empty = delta.first and not delta.reasoning and not delta.tool_calls
        echoed = delta.first and bool(meta.echo)
        _fill_chat(choice, choice.delta, delta, bool(delta.content) or first_empty or echoed, meta.echo)
        if delta.first and meta.prompt_token_ids is not None:  # vLLM: on the stream's first chunk
            chunk.prompt_token_ids[:] = meta.prompt_token_ids
    return chunk


def chat_completion(
    meta: ResponseMeta,
    totals: list[ChoiceDelta],
    usage,
    prompt_logprobs: list[derender_pb2.PromptPositionLogprobs] | None = None,
) -> derender_pb2.ChatCompletion:
    """The whole chat answer; `prompt_logprobs` (vLLM's) go on the answer itself, not on a choice."""
    completion = derender_pb2.ChatCompletion(
        id=meta.id,
        object="chat.completion",
        created=meta.created,
        model=meta.model,
        usage=usage,
        prompt_logprobs=prompt_logprobs or (),
    )
    for total in totals:
        choice = completion.choices.add(index=total.index)
        shown = bool(meta.echo) or not (total.tool_calls and not total.content.strip())
        _fill_chat(choice, choice.message, total, shown, meta.echo)
    completion.prompt_token_ids.extend(meta.prompt_token_ids or ())
    return completion


def completion(
    meta: ResponseMeta,
    deltas: list[ChoiceDelta],
    usage,
    flat_base: int = 0,
    echo_logprobs: list[RenderedLogprob] | None = None,
    prompt_logprobs: list[derender_pb2.PromptPositionLogprobs] | None = None,
) -> derender_pb2.Completion:
    """A completion chunk, or (with accumulated deltas) the whole completion; the echo goes first, and with
    `echo_logprobs` (echo with logprobs) so do its tokens' logprobs. `prompt_logprobs` (vLLM's) go on each
    choice's first answer."""
    out = derender_pb2.Completion(
        id=meta.id, object="text_completion", created=meta.created, model=meta.model, usage=usage
    )
    for delta in deltas:
        shown = meta.echo if delta.first else ""
        choice = out.choices.add(index=flat_base + delta.index, text=shown + delta.content)
        if delta.reasoning:
            choice.reasoning_content = delta.reasoning
        echoed = echo_logprobs if delta.first else None
        if delta.logprobs is not None or echoed is not None:
            choice.logprobs.CopyFrom(completion_logprobs(delta.logprobs or [], len(meta.echo), echoed))
        _set_stop_reason(choice, delta)
        if delta.first and meta.prompt_token_ids is not None:  # vLLM: on each choice, a stream's first chunk of it
            choice.prompt_token_ids.extend(meta.prompt_token_ids)
        if delta.first and prompt_logprobs is not None:
            choice.prompt_logprobs.extend(prompt_logprobs)
        choice.token_ids.extend(delta.token_ids or ())
    return out
