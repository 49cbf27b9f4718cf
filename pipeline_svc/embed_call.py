"""One embedding call through the hops, for every pooling route (/v1/embeddings, /score, /rerank, /pooling,
/v2/embed): render tokenizes and checks the inputs (RenderEmbedding), an engine started with `--runner pooling`
pools them (EngineService.Embed); a hop's error is the route's error, its field names put in the client's terms
by `rename`. A request rendered in parts (a score's queries and documents, each with its own text cut) is one
Embed call over the parts' inputs in order, a part's errors naming the inputs by their place in that order."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc

from pipeline_svc.embeddings_request import renamed
from pipeline_svc.hops import Hops
from scaleout.v1 import engine_pb2, render_pb2
from scaleout_common.errors import ServiceError


async def embed(
    hops: Hops,
    typed: render_pb2.RenderEmbeddingRequest | Sequence[render_pb2.RenderEmbeddingRequest],
    context,
    rename: Callable[[ServiceError], ServiceError] = lambda error: error,
    check: Callable[[engine_pb2.EmbedRequest], None] = lambda rendered: None,
    chat: render_pb2.RenderChatRequest | None = None,
) -> tuple[engine_pb2.EmbedResponse, str]:
    """(the engine's answer, the served model's name); `check` sees the rendered inputs before the engine does.
    `chat`: vLLM's chat form, a conversation render's RenderChat turns into the one input's token ids first."""
    parts = [typed] if isinstance(typed, render_pb2.RenderEmbeddingRequest) else list(typed)
    rendered = engine_pb2.EmbedRequest()
    try:
        if chat is not None:
            prompt = await hops.render.RenderChat(chat, timeout=context.time_remaining())
            parts[0].input_token_ids.add().token_ids.extend(prompt.generate_request.token_ids)
        for part in parts:
            offset = len(rendered.inputs)
            try:
                done = await hops.render.RenderEmbedding(part, timeout=context.time_remaining())
            except grpc.aio.AioRpcError as error:
                shifted = lambda i, offset=offset: f"inputs[{i + offset}]"  # noqa: E731
                raise renamed(ServiceError.from_rpc_error(error), shifted) from None
            inputs = list(rendered.inputs) + list(done.embed_request.inputs)
            rendered.CopyFrom(done.embed_request)
            del rendered.inputs[:]
            rendered.inputs.extend(inputs)
        check(rendered)
        answer = await hops.engine.Embed(rendered, timeout=context.time_remaining())
    except grpc.aio.AioRpcError as error:
        raise rename(ServiceError.from_rpc_error(error)) from None
    except ServiceError as error:
        raise rename(error) from None
    return answer, rendered.model
