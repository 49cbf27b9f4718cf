"""Our engine as a Dynamo worker: Dynamo's backend contract (`dynamo.common.backend.LLMEngine`, driven by its own
Worker, which registers the model, serves `generate`, watches for cancellation and shuts down) over a running
engine's gRPC API. fields.py holds the mapping; this module only calls.

- start: GetModelInfo and GetLoad give the registration (context length, KV block size and count, batch
  bound); the model folder's tokenizer is checked against the engine's (its fingerprint rides on every request, so an
  engine serving another tokenizer refuses it).
- generate: one `EngineService.Generate` stream per Dynamo request, its request id Dynamo's context id; a
  refusal before the first token is Dynamo's InvalidArgument (its 400) or HttpError with our reason and
  message, a failure after it an in-band "error: ..." finish.
- abort / a closed generator: the stream is cancelled, which aborts the request in the engine.
- load: GetLoad every second as Dynamo's per-worker snapshot (load_relay.py: KV blocks used of all, prefix hit
  rate), what its router and dashboards read beside the blocks it counts itself.
- KV events: the engine's SubscribeKvEvents (a snapshot, then live batches) relayed to Dynamo's publisher
  (kv_relay.py, Dynamo's `PushSource`), over the same hop as the rest.
- both relays run on a thread of their own (publishing.py), off the loop that serves `generate`, as Dynamo's
  publishers ask; cleanup stops it before returning.
- the hop: mTLS and the caller identity as the project's other hops (hop.py: --tls-dir, --client).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import AsyncGenerator
from functools import partial
from typing import Any

import grpc
from dynamo._core import Context
from dynamo.common.backend import EngineConfig, LLMEngine, LlmRegistration, WorkerConfig
from dynamo.common.backend.publisher import KvEventSource, PushSource
from dynamo.llm.exceptions import HttpError, InvalidArgument
from grpc_health.v1 import health_pb2, health_pb2_grpc

from engine_svc.faces.dynamo import fields, hop
from engine_svc.faces.dynamo.kv_relay import KvRelay
from engine_svc.faces.dynamo.load_relay import relay_load, usable_blocks
from engine_svc.faces.dynamo.publishing import PublishingThread
from scaleout.v1 import engine_pb2, engine_pb2_grpc
from scaleout_common.errors import ServiceError
from scaleout_common.models import load_tokenizer, model_name, resolve_model, tokenizer_fingerprint
from scaleout_common.reasons import HTTP_STATUS

# How a listener answers a connection from the other side of TLS (grpcio's details): plaintext to TLS, TLS to
# plaintext or a certificate of another CA.
TLS_MISMATCH = ("Socket closed", "andshake")
REFUSED_TRIES = 3
INVALID = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.FAILED_PRECONDITION}


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m engine_svc.faces.dynamo", description="Our engine as an NVIDIA Dynamo worker."
    )
    p.add_argument("--engine", default="127.0.0.1:50052", help="the engine's gRPC address (host:port)")
    p.add_argument("--engine-wait-s", type=float, default=600, help="how long to wait for the engine to serve")
    p.add_argument("--model", default=None, help="the engine's model folder (default: the default model)")
    p.add_argument("--served-model-name", default=None, help="the name clients ask for (default: the folder's)")
    p.add_argument("--namespace", default=os.environ.get("DYN_NAMESPACE", "dynamo"))
    p.add_argument("--component", default="scaleout")
    p.add_argument("--endpoint", default="generate")
    p.add_argument("--discovery-backend", default=os.environ.get("DYN_DISCOVERY_BACKEND", "etcd"))
    p.add_argument("--request-plane", default=os.environ.get("DYN_REQUEST_PLANE", "tcp"))
    p.add_argument("--event-plane", default=os.environ.get("DYN_EVENT_PLANE"))
    p.add_argument("--no-kv-events", action="store_true", help="publish no KV events (no KV-aware routing)")
    hop.add_flags(p)
    return p


class ScaleoutEngine(LLMEngine):
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.folder = resolve_model(args.model)
        self.channel, self.metadata = hop.connect(args)
        self.stub = engine_pb2_grpc.EngineServiceStub(self.channel)
        self.publishing = PublishingThread(args)
        self.calls: dict[str, Any] = {}  # Dynamo context id -> our Generate call
        self.eos: set[int] = set()
        self.fingerprint = ""

    @classmethod
    async def from_args(cls, argv: list[str] | None = None) -> tuple[ScaleoutEngine, WorkerConfig]:
        args = make_parser().parse_args(argv)
        engine = cls(args)
        config = WorkerConfig(
            namespace=args.namespace,
            component=args.component,
            endpoint=args.endpoint,
            model_name=str(engine.folder),
            served_model_name=args.served_model_name or model_name(engine.folder),
            discovery_backend=args.discovery_backend,
            request_plane=args.request_plane,
            event_plane=args.event_plane,
            enable_kv_routing=not args.no_kv_events,
        )
        return engine, config

    async def start(self, worker_id: int) -> EngineConfig:
        del worker_id
        await self._wait_serving()
        try:  # the first calls that pass the engine's identity check (health checks skip it)
            info = await self.stub.GetModelInfo(engine_pb2.GetModelInfoRequest(), timeout=30, metadata=self.metadata)
            load = await self.stub.GetLoad(engine_pb2.GetLoadRequest(), timeout=30, metadata=self.metadata)
        except grpc.aio.AioRpcError as e:
            raise SystemExit(hop.refusal(self.args.engine, e)) from None
        self.fingerprint = await asyncio.to_thread(lambda: tokenizer_fingerprint(load_tokenizer(self.folder)))
        if info.tokenizer_fingerprint and info.tokenizer_fingerprint != self.fingerprint:
            raise SystemExit(f"--model {self.folder}: not the tokenizer the engine at {self.args.engine} serves")
        self.eos = set(info.eos_token_ids)
        return EngineConfig(
            model=str(self.folder),
            served_model_name=self.args.served_model_name or model_name(self.folder),
            llm=LlmRegistration(
                context_length=info.max_model_len,
                kv_cache_block_size=info.kv_block_size or None,
                total_kv_blocks=usable_blocks(load),
                max_num_seqs=info.max_running or None,
            ),
        )

    async def _wait_serving(self) -> None:
        """Until the engine's health check says SERVING (NOT_SERVING while it loads, connections refused before it
        listens). A listener that closes the connection or fails its TLS handshake REFUSED_TRIES times in a row is
        a worker and engine on different sides of --tls-dir (or CAs): refused at once, not waited for."""
        health = health_pb2_grpc.HealthStub(self.channel)
        deadline, refused, last = time.monotonic() + self.args.engine_wait_s, 0, "no answer"
        while True:
            try:
                # typeshed's HealthStub omits the methods its __init__ sets (Check, Watch)
                answer = await health.Check(  # pyright: ignore[reportAttributeAccessIssue]
                    health_pb2.HealthCheckRequest(), timeout=5
                )
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                refused, last = 0, "NOT_SERVING"
            except grpc.aio.AioRpcError as e:
                last = (e.details() or e.code().name)[:300]
                refused = refused + 1 if any(sign in last for sign in TLS_MISMATCH) else 0
                if refused >= REFUSED_TRIES:
                    raise SystemExit(hop.mismatch(self.args, last)) from None
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"the engine at {self.args.engine} did not come up in {self.args.engine_wait_s} s ({last})"
                )
            await asyncio.sleep(0.5)

    def component_metrics_dp_ranks(self) -> list[int]:
        return [0]

    def attach_snapshot_publisher(self, publisher: Any) -> None:
        self.publishing.submit(partial(relay_load, snapshots=publisher))

    async def kv_event_sources(self) -> list[KvEventSource]:
        if self.args.no_kv_events:
            return []
        return [PushSource(on_ready=self._relay_kv_events)]

    def _relay_kv_events(self, publisher: Any) -> None:
        """PushSource's on_ready (any thread)."""
        self.publishing.submit(lambda channel, metadata: KvRelay(channel, metadata).run(publisher))

    async def generate(self, request: Any, context: Context) -> AsyncGenerator[Any, None]:
        request_id = context.id()
        try:
            ours = fields.generate_request(request, request_id, self.eos, self.fingerprint)
        except ServiceError as e:
            raise _refusal(e) from None
        call = self.stub.Generate(ours, metadata=self.metadata)
        self.calls[request_id] = call
        prompt_tokens, started = len(ours.token_ids), False
        try:
            async for message in call:
                started = True
                for chunk in fields.chunks(message, prompt_tokens):
                    yield chunk
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.CANCELLED:
                return
            if not started:
                raise _refusal(ServiceError.from_rpc_error(e)) from None
            yield {"token_ids": [], "index": 0, "finish_reason": fields.error_finish(e.details() or "")}
        finally:
            self.calls.pop(request_id, None)
            call.cancel()  # a no-op once the stream ended; else the engine aborts the request

    async def abort(self, context: Context) -> None:
        call = self.calls.pop(context.id(), None)
        if call is not None:
            call.cancel()

    async def cleanup(self) -> None:
        await self.publishing.stop()  # no publish after cleanup returns (PushSource's contract)
        await self.channel.close()


def _refusal(error: ServiceError) -> Exception:
    """A refusal before the first token as Dynamo's typed error (the frontend answers InvalidArgument with a 400
    carrying its message), its text our reason and message."""
    text = f"{error.reason}: {error.message}"
    return InvalidArgument(text) if error.code in INVALID else HttpError(HTTP_STATUS.get(error.code, 500), text)
