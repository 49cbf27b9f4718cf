"""vLLM's render routes over plain HTTP/1.1 on --http-port: `POST /v1/chat/completions/render` and
`POST /v1/completions/render`, answered by the same code as RenderChatVllm / RenderCompletionVllm
(render_svc/vllm_render), in this replica's own process and event loop, without the gRPC hop and the gateway's
JSON transcoding (each ~0.4-0.5 ms of CPU a request: as much as a short chat's render).

The gateway proxies these two paths here as they are (gateway/envoy.yaml.j2), keeping its edge (API keys, rate
limit, body cap, its own refusals); routers may call a replica here directly too. Answers and errors are what
the gateway gives on the transcoded route: an error is OpenAI's error object with the status details the
transcoder would print (`details`), its HTTP status the gRPC code's. Readiness follows the gRPC server's:
NOT_READY until the model is loaded, DRAINING once the replica drains (503: the gateway retries elsewhere).

uvicorn with httptools (llhttp) speaks HTTP; the app is a bare ASGI callable. Plaintext only: with --tls-dir
the replica serves gRPC alone and the gateway transcodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid

import orjson
import uvicorn
from google.protobuf import json_format

from render_svc.vllm_render import chat_json, completion_json
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.identity import admit
from scaleout_common.openai_errors import error_object, error_type
from scaleout_common.openapi import method_bindings, verb_and_path
from scaleout_common.reasons import HTTP_STATUS, Reason, fail

log = logging.getLogger(__name__)

# RPC -> (the render, whether a request chat_template may come with it); each is served on its REST path (the
# gateway proxies the same ones here: gateway/rest_routes.py HTTP_FACES).
METHODS = {"RenderChatVllm": (chat_json, True), "RenderCompletionVllm": (completion_json, False)}
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
    """The ASGI app: `service` is the RenderService (its renderer and thread pools)."""

    def __init__(self, service, max_body_bytes: int, serving):
        self.service = service
        self.max_body_bytes = max_body_bytes
        self.serving = serving  # the gRPC health check's readiness
        self.draining = False

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        try:
            body = await self._answer(scope, receive)
            status, headers = 200, JSON_HEADERS
        except Exception as error:
            status, headers, body = _error(error, scope["path"])
        headers = [*headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _answer(self, scope, receive) -> bytes:
        route = ROUTES.get(scope["path"])
        if scope["path"] == HEALTH and scope["method"] in ("GET", "HEAD"):
            if not self.serving():
                raise fail(Reason.NOT_READY, "not serving: loading or draining")
            return b""
        if route is None:
            raise fail(Reason.PATH_NOT_SERVED, f"this port serves POST {' and '.join(ROUTES)} and GET {HEALTH} only")
        if scope["method"] != "POST":
            raise fail(Reason.METHOD_NOT_ALLOWED, "this path takes POST only")
        if self.draining:
            raise fail(Reason.DRAINING, "server is shutting down; retry on another replica")
        if self.service.renderer is None:
            raise fail(Reason.NOT_READY, "server is still loading; retry shortly")
        admit(_Headers(scope["headers"]))
        data = await self._body(receive)
        function, templated = route
        return await self.service.call_json(function, data, templated and b'"chat_template"' in data)

    async def _body(self, receive) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise fail(Reason.REQUEST_BODY_TOO_LARGE, f"the body is larger than {self.max_body_bytes} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _error(error: Exception, path: str) -> tuple[int, list, bytes]:
    """The status, headers and body the gateway's transcoded route gives for `error`."""
    if not isinstance(error, ServiceError):
        incident = uuid.uuid4().hex[:12]  # a bug: the log has the traceback, the caller the id
        log.error("unhandled error on %s (incident %s)", path, incident, exc_info=error)
        error = fail(Reason.INTERNAL_ERROR, f"internal error (incident {incident})")
    status = Reason(error.reason).http if error.reason in Reason.__members__ else HTTP_STATUS.get(error.code, 500)
    shaped = error_object(error)
    shaped["error"]["type"] = error_type(status)
    # as the gateway's transcoder prints a google.rpc.Status: proto field names, empty fields printed
    status_json = json_format.MessageToDict(
        error.to_status(), preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    shaped["error"]["details"] = status_json["details"]
    headers = JSON_HEADERS
    if error.reason == Reason.METHOD_NOT_ALLOWED:
        headers = [*headers, (b"allow", b"POST")]
    return status, headers, orjson.dumps(shaped)


class _Server(uvicorn.Server):
    """uvicorn inside the replica's loop: the gRPC server owns the signals (SIGTERM drains both)."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


class HttpServer:
    def __init__(self, app: HttpFace, host: str, port: int, grace_s: float):
        self.app = app
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind((host, port))
        except OSError as error:
            raise SystemExit(f"cannot listen on {host}:{port} (--http-port): {error}") from None
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(
            app,
            http="httptools",
            lifespan="off",
            access_log=False,
            log_config=None,
            server_header=False,
            date_header=False,
            timeout_graceful_shutdown=int(grace_s),
            timeout_keep_alive=75,  # past the gateway's connection idle timeout: Envoy closes first
        )
        self._server = _Server(config)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self.socket]))

    def drain(self) -> None:
        self.app.draining = True

    async def close(self) -> None:
        if self._task is not None:
            self._server.should_exit = True
            await self._task
