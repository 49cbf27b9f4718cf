"""Drive the derender service the three ways (unary, stateful stream, stateless twin) from token id chunks."""

from __future__ import annotations

from scaleout.v1 import common_pb2, derender_pb2, engine_pb2

STOP = common_pb2.FINISH_REASON_STOP


def engine_messages(
    chunks: list[list[int]], finish=STOP, stop_token_id: int | None = None, logprobs: bool = False, index: int = 0
) -> list[engine_pb2.GenerateResponse]:
    """A streamed engine result: one message per chunk, the last one finishing the choice."""
    messages = []
    for i, ids in enumerate(chunks):
        choice = engine_pb2.GenerateChoice(index=index, token_ids=ids)
        if logprobs:
            choice.logprobs.logprobs.extend([-0.25] * len(ids))
            for token_id in ids:
                choice.logprobs.top.add(token_ids=[token_id, 17], logprobs=[-0.25, -3.0])
        last = i == len(chunks) - 1
        if last:
            choice.finish_reason = finish
            if stop_token_id is not None:
                choice.stop_token_id = stop_token_id
        messages.append(engine_pb2.GenerateResponse(choices=[choice], finished=last))
    if messages:
        messages[0].prompt.num_tokens = 7
    return messages


def split(ids: list[int], cuts: list[int]) -> list[list[int]]:
    chunks, start = [], 0
    for size in cuts:
        if start >= len(ids):
            break
        chunks.append(ids[start : start + size])
        start += size
    if start < len(ids):
        chunks.append(ids[start:])
    return chunks


async def stream(stub, context, messages) -> list[derender_pb2.DerenderStreamResponse]:
    async def requests():
        yield derender_pb2.DerenderStreamRequest(context=context)
        for message in messages:
            yield derender_pb2.DerenderStreamRequest(engine_output=message)

    return [response async for response in stub.DerenderStream(requests())]


async def twin(stub, context, messages) -> list[derender_pb2.DerenderChunkResponse]:
    state, out = b"", []
    for message in messages:
        response = await stub.DerenderChunk(
            derender_pb2.DerenderChunkRequest(context=context, engine_output=message, state=state)
        )
        state = response.state
        out.append(response)
    return out


def chat_text(responses) -> dict[str, str]:
    """Content and reasoning of choice 0 streamed as chat chunks, concatenated."""
    content = "".join(c.delta.content for r in responses for c in r.chat.choices)
    reasoning = "".join(c.delta.reasoning_content for r in responses for c in r.chat.choices)
    return {"content": content, "reasoning": reasoning}


def finish(responses):
    """(finish_reason, stop_reason field, its value, stop_generation seen) of choice 0."""
    for response in responses:
        for choice in response.chat.choices:
            if choice.finish_reason:
                which = choice.WhichOneof("stop_reason")
                return (
                    choice.finish_reason,
                    which,
                    getattr(choice, which) if which else None,
                    any(r.stop_generation for r in responses),
                )
    return None
