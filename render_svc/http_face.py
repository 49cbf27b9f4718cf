"""vLLM's render routes over plain HTTP/1.1 on --http-port: `POST /v1/chat/completions/render`,
`/v1/completions/render`, `/v1/messages/render` and `/v1/responses/render`, answered by the same code as
RenderChatVllm / RenderCompletionVllm / RenderMessagesVllm / RenderResponsesVllm (render_svc/vllm_render), in this
replica's own process and event loop, without the gRPC hop and the gateway's JSON transcoding (each ~0.4-0.5 ms of
CPU a request: as much as a short chat's render).

The gateway proxies these paths here as they are (gateway/envoy.yaml.j2), keeping its edge (API keys, rate
limit, body cap, its own refusals); routers may call a replica here directly too. Answers and errors are what
the gateway gives on the transcoded route: an error is vLLM's ErrorResponse (`code` the HTTP status, `type` vLLM's
name for it) with the status details the transcoder would print (`details`), its HTTP status the gRPC code's.
Readiness follows the gRPC server's: NOT_READY until the model is loaded, DRAINING once the replica drains (503:
the gateway retries elsewhere).

render_svc/http_server.py speaks HTTP (a small asyncio.Protocol over httptools: uvicorn's ASGI cost as much as a
short render); a short render answers on the spot, a large or templated one from its pool. Plaintext only: with
--tls-dir the replica serves gRPC alone and the gateway transcodes.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Awaitable

import orjson
from google.protobuf import json_format

from render_svc.http_server import HttpServer, Request, Response
from render_svc.vllm_render import chat_json, completion_json
from render_svc.vllm_render.apis import messages_json, responses_json
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.identity import admit
from scaleout_common.openai_errors import VLLM_TYPES, error_object
from scaleout_common.openapi import method_bindings, verb_and_path
from scaleout_common.reasons import HTTP_STATUS, Reason, fail

log = logging.getLogger(__name__)

# RPC -> (the render, whether a request chat_template may come with it); each is served on its REST path (the
# gateway proxies the same ones here: gateway/rest_routes.py HTTP_FACES).
METHODS = {
    "RenderChatVllm": (chat_json, True),
    "RenderCompletionVllm": (completion_json, False),
    "RenderMessagesVllm": (messages_json, False),
    "RenderResponsesVllm": (responses_json, False),
}
_SERVICE = render_pb2.DESCRIPTOR.services_by_name["RenderService"]
ROUTES = {
    verb_and_path(rule)[1]: METHODS[method.name]
    for method in _SERVICE.methods
    if method.name in METHODS
    for rule in method_bindings(method.GetOptions())
}
HEALTH = "/health"  # vLLM's readiness probe: 200 while the gRPC health check says SERVING, else 503
JSON_HEADERS = [(b"content-type", b"application/json")]


class _Headers:
    """The request's headers as gRPC metadata, for the identity checks every gRPC call passes (`admit`)."""

    def __init__(self, headers: list[tuple[bytes, bytes]]):
        self._headers = headers

    def invocation_metadata(self):
        return tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in self._headers)


class HttpFace:
    """The handler render_svc/http_server.py calls: `service` is the RenderService (its renderer and pools)."""

    def __init__(self, service, max_body_bytes: int, serving):
        self.service = service
        self.max_body_bytes = max_body_bytes
        self.serving = serving  # the gRPC health check's readiness
        self.draining = False

    def answer(self, request: Request) -> Response | Awaitable[Response]:
        try:
            work = self._route(request)
        except Exception as error:
            return _error(error, request.path)
        return (200, JSON_HEADERS, work) if isinstance(work, bytes) else self._later(work, request.path)

    def refuse(self, why: str, message: str) -> Response:
        reason = Reason.REQUEST_BODY_TOO_LARGE if why == "too_large" else Reason.INVALID_HTTP
        return _error(fail(reason, message), "")

    async def _later(self, work: Awaitable[bytes], path: str) -> Response:
        try:
            return 200, JSON_HEADERS, await work
        except Exception as error:
            return _error(error, path)

    def _route(self, request: Request) -> bytes | Awaitable[bytes]:
        route = ROUTES.get(request.path)
        if request.path == HEALTH and request.method in ("GET", "HEAD"):
            if not self.serving():
                raise fail(Reason.NOT_READY, "not serving: loading or draining")
            return b""
        if route is None:
            raise fail(Reason.PATH_NOT_SERVED, f"this port serves POST {' and '.join(ROUTES)} and GET {HEALTH} only")
        if request.method != "POST":
            raise fail(Reason.METHOD_NOT_ALLOWED, "this path takes POST only")
        if request.query:  # never taken and ignored: the request is the JSON body alone
            raise fail(Reason.UNSUPPORTED_FIELD, "these routes take no query parameters", "query")
        if self.draining:
            raise fail(Reason.DRAINING, "server is shutting down; retry on another replica")
        if self.service.renderer is None:
            raise fail(Reason.NOT_READY, "server is still loading; retry shortly")
        admit(_Headers(request.headers))
        function, templated = route
        return self.service.call_json(function, request.body, templated and b'"chat_template"' in request.body)


def _error(error: Exception, path: str) -> tuple[int, list, bytes]:
    """The status, headers and body the gateway's transcoded route gives for `error`."""
    if not isinstance(error, ServiceError):
        incident = uuid.uuid4().hex[:12]  # a bug: the log has the traceback, the caller the id
        log.error("unhandled error on %s (incident %s)", path, incident, exc_info=error)
        error = fail(Reason.INTERNAL_ERROR, f"internal error (incident {incident})")
    status = Reason(error.reason).http if error.reason in Reason.__members__ else HTTP_STATUS.get(error.code, 500)
    shaped = error_object(error)
    shaped["error"] |= {"type": VLLM_TYPES.get(status, "InternalServerError"), "code": status}  # vLLM's ErrorResponse
    # as the gateway's transcoder prints a google.rpc.Status: proto field names, empty fields printed
    status_json = json_format.MessageToDict(
        error.to_status(), preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    shaped["error"]["details"] = status_json["details"]
    headers = JSON_HEADERS
    if error.reason == Reason.METHOD_NOT_ALLOWED:
        headers = [*headers, (b"allow", b"POST")]
    return status, headers, orjson.dumps(shaped)


class HttpFaceServer:
    """The face on its own port, in the replica's loop (the gRPC server owns the signals: SIGTERM drains both)."""

    def __init__(self, face: HttpFace, host: str, port: int, grace_s: float):
        self.face = face
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            raise SystemExit(f"cannot listen on {host}:{port} (--http-port): {error}") from None
        self.port = sock.getsockname()[1]
        # idle keep-alive connections live past the gateway's connection idle timeout: Envoy closes first
        self._server = HttpServer(face, sock, idle_s=75, grace_s=grace_s)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._server.socket.listen(1024)  # connections queue from now; accepted once the task has run
        self._task = asyncio.get_running_loop().create_task(self._server.start())

    def drain(self) -> None:
        self.face.draining = True

    async def close(self) -> None:
        if self._task is not None:
            await self._task
        await self._server.close()
