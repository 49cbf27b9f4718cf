"""ResponsesService: `/v1/responses` as the `openai` SDK speaks it (a Response, or its SSE events), and the stored
responses behind `GET` / `DELETE /v1/responses/{id}`, `POST /v1/responses/{id}/cancel` and
`previous_response_id`; `GET ?stream=true` replays or follows a streamed background one's events
(response_events).

render_svc converts the request to the chat form (RenderResponses: the field policy lives there) once
responses_turn has taken `store`, `background` and `previous_response_id` out; the answer is derender's chat
output shaped by responses_response, its id renamed for this replica (response_peers), and kept when `store`
says so. A background one is answered `queued` (or, streamed, with its events as they come) and generated on
(responses_background). `user` / `safety_identifier` go on the request's span. With vLLM's
`--enable-per-request-metrics` the finished Response has vLLM's `metrics` (responses_response.timed).
"""

from __future__ import annotations

from pipeline_svc import responses_response, responses_turn, shaped_route
from pipeline_svc.client_fields import RESPONSES, named
from pipeline_svc.hops import Hops
from pipeline_svc.response_events import stream_fields
from pipeline_svc.response_peers import StoredResponses
from pipeline_svc.shaped_route import json_body, serve
from scaleout.v1 import responses_pb2_grpc
from scaleout_common.identity import caller
from scaleout_common.reasons import Reason, fail


def _identity(body: dict) -> dict[str, str]:
    return {f"openai.request.{name}": body[name] for name in ("user", "safety_identifier") if body.get(name)}


class ResponsesFrontDoor(responses_pb2_grpc.ResponsesServiceServicer):
    def __init__(self, hops: Hops, stored: StoredResponses, per_request_metrics: bool = False):
        self.hops, self.stored = hops, stored
        self.metrics = per_request_metrics  # vLLM's --enable-per-request-metrics

    async def CreateResponse(self, request, context):
        async for body in named(self._create(request, context), request.data, RESPONSES):
            yield body

    async def _create(self, request, context):
        who = caller(context)
        turn = await responses_turn.begin(request.data, self.stored, who, context.time_remaining())

        async def render(body, **call):
            rendered = await self.hops.render.RenderResponses(body, **call)
            rendered.derender_context.id = self.stored.name(rendered.derender_context.id)
            return rendered

        def unary(completion, rendered, body, outputs) -> dict:
            response = responses_response.response(completion, rendered, body)
            return keep(responses_response.timed(response, outputs) if self.metrics else response)

        def keep(response: dict) -> dict:
            if turn.store:
                self.stored.store.put(response, turn.input_items, who.client)
            return response

        if turn.background:
            rendered, echo = await shaped_route.render(render, turn.render_body, context, _identity, turn.echo)
            run = self.stored.runs.start(
                self.hops, rendered, echo, turn.input_items, who.client, bool(echo.get("stream")), self.metrics
            )
            if run.events is None:
                yield json_body(run.response)
                return
            async for body in run.events.follow(None):
                yield body
            return
        route = serve(
            self.hops,
            render,
            turn.render_body,
            context,
            unary,
            lambda rendered, body: responses_response.ResponseStream(rendered, body, keep, self.metrics),
            _identity,
            turn.echo,
        )
        async for body in route:
            yield body

    async def GetResponse(self, request, context):
        if stream_fields(request):
            raise fail(Reason.UNSUPPORTED_FIELD, "`stream` = true is RetrieveResponse's (a stream)", "stream")
        stored = await self.stored.find(request.response_id, "response_id", caller(context), context.time_remaining())
        return json_body(stored.response)

    async def RetrieveResponse(self, request, context):
        """OpenAI's GET: the Response, or with `stream` a streamed background one's events (response_events)."""
        if not stream_fields(request):
            yield await self.GetResponse(request, context)
            return
        async for body in self.stored.events(request, caller(context), context.time_remaining()):
            yield body

    async def CancelResponse(self, request, context):
        """A background response's generation stopped, at the replica that runs it (response_peers)."""
        response = await self.stored.cancel(request.response_id, caller(context), context.time_remaining())
        return json_body(response)

    async def DeleteResponse(self, request, context):
        await self.stored.forget(request.response_id, caller(context), context.time_remaining())
        return json_body({"id": request.response_id, "object": "response.deleted", "deleted": True})
