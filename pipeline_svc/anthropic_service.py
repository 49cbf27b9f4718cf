"""AnthropicService: `/v1/messages` as Anthropic's SDKs speak it (unary JSON, or Anthropic's SSE events).

render_svc converts the request to the chat form (RenderMessages: the field policy lives there); the answer is
derender's chat output shaped by anthropic_response. `metadata.user_id` goes on the request's span.
"""

from __future__ import annotations

from pipeline_svc import anthropic_response
from pipeline_svc.client_fields import ANTHROPIC, named
from pipeline_svc.hops import Hops
from pipeline_svc.shaped_route import serve
from scaleout.v1 import anthropic_pb2_grpc


def _identity(body: dict) -> dict[str, str]:
    user = (body.get("metadata") or {}).get("user_id")
    return {"anthropic.request.metadata.user_id": user} if user else {}


class AnthropicFrontDoor(anthropic_pb2_grpc.AnthropicServiceServicer):
    def __init__(self, hops: Hops):
        self.hops = hops

    async def CreateMessage(self, request, context):
        route = serve(
            self.hops,
            self.hops.render.RenderMessages,
            request,
            context,
            lambda completion, rendered, body, _outputs: anthropic_response.message(completion, rendered, body),
            anthropic_response.MessageStream,
            _identity,
        )
        async for body in named(route, request.data, ANTHROPIC):
            yield body
