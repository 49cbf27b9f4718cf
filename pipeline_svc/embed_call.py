"""One embedding call through the hops, for every pooling route (/v1/embeddings, /score, /rerank, /pooling,
/v2/embed): render tokenizes and checks the inputs (RenderEmbedding), an engine started with `--runner pooling`
pools them (EngineService.Embed); a hop's error is the route's error, its field names put in the client's terms
by `rename`."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from pipeline_svc.hops import Hops
from scaleout.v1 import engine_pb2, render_pb2
from scaleout_common.errors import ServiceError


async def embed(
    hops: Hops,
    typed: render_pb2.RenderEmbeddingRequest,
    context,
    rename: Callable[[ServiceError], ServiceError] = lambda error: error,
    check: Callable[[engine_pb2.EmbedRequest], None] = lambda rendered: None,
) -> tuple[engine_pb2.EmbedResponse, str]:
    """(the engine's answer, the served model's name); `check` sees the rendered inputs before the engine does."""
    try:
        rendered = await hops.render.RenderEmbedding(typed, timeout=context.time_remaining())
        check(rendered.embed_request)
        answer = await hops.engine.Embed(rendered.embed_request, timeout=context.time_remaining())
    except grpc.aio.AioRpcError as error:
        raise rename(ServiceError.from_rpc_error(error)) from None
    return answer, rendered.embed_request.model
