"""ResponsesService: `/v1/responses` (stateless) as the `openai` SDK speaks it (a Response, or its SSE events).

render_svc converts the request to the chat form (RenderResponses: the field policy lives there); the answer
is derender's chat output shaped by responses_response. `user` / `safety_identifier` go on the request's span.
"""

from __future__ import annotations

from pipeline_svc import responses_response
from pipeline_svc.client_fields import RESPONSES, named
from pipeline_svc.hops import Hops
from pipeline_svc.shaped_route import serve
from scaleout.v1 import responses_pb2_grpc


def _identity(body: dict) -> dict[str, str]:
    return {f"openai.request.{name}": body[name] for name in ("user", "safety_identifier") if body.get(name)}


class ResponsesFrontDoor(responses_pb2_grpc.ResponsesServiceServicer):
    def __init__(self, hops: Hops):
        self.hops = hops

    async def CreateResponse(self, request, context):
        route = serve(
            self.hops,
            self.hops.render.RenderResponses,
            request,
            context,
            responses_response.response,
            responses_response.ResponseStream,
            _identity,
        )
        async for body in named(route, request.data, RESPONSES):
            yield body
