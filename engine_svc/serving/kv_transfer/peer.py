"""An engine's part in disaggregated serving (--kv-role): which KV step a Generate call asks for and whether this
engine takes it, the decode step's pull from the prefill engine before the request is queued, the prefill step's
answer, and KvTransferService (the blocks this engine keeps, streamed to a decode engine, then freed).

The transport is our own contract (kv_transfer.proto): the blocks' bytes over a gRPC stream wherever the engines
reach each other, CPU included, or device to device through CUDA IPC between processes on one GPU (transport.py
picks, pull.py pulls). The pull runs on the decode engine's event loop while its step loop keeps stepping; only
the landing (one scatter per layer into fresh blocks) runs on the step thread. Both ends need the step loop and
the KV cache in this process (--engine-core thread) and the paged runner: elsewhere a KV step is refused
(KV_TRANSFER_UNAVAILABLE).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid

import torch

from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.sequence import Sequence
from engine_svc.serving.engine import Engine
from engine_svc.serving.kv_transfer import blocks, transport, vllm_params
from engine_svc.serving.kv_transfer.pull import Puller
from scaleout.v1 import engine_pb2, kv_transfer_pb2, kv_transfer_pb2_grpc
from scaleout_common.reasons import Reason, fail

log = logging.getLogger(__name__)
ROLES = ("both", "prefill", "decode")


def add_flags(parser) -> None:
    parser.add_argument(
        "--kv-role",
        default="both",
        choices=ROLES,
        help="disaggregated serving: the KV steps this engine takes (prefill: hand a prompt's KV blocks off; "
        "decode: pull them from a prefill engine; both); plain requests are served whatever the role",
    )
    parser.add_argument(
        "--kv-handoff-timeout-s",
        type=float,
        default=30.0,
        help="how long a prefill's KV blocks wait for a decode engine to pull them before they are freed",
    )
    parser.add_argument(
        "--kv-pull-timeout-s", type=float, default=30.0, help="longest a decode engine waits for a pull of KV blocks"
    )
    parser.add_argument(
        "--kv-peer-tls-name",
        default="",
        help="with --tls-dir: the name a prefill engine's certificate is checked against when pulling from its "
        "address (e.g. its headless Service's name; default: the address itself)",
    )
    parser.add_argument(
        "--kv-advertise-host",
        default="",
        help="the host decode engines reach this engine at, in its handoffs (default: --host, or the machine's "
        "name for a wildcard host)",
    )


class KvPeer(kv_transfer_pb2_grpc.KvTransferServiceServicer):
    def __init__(self, args, port: int, engine, model_name: str, tokenizer_fingerprint: str):
        self.role = args.kv_role
        self.pull_timeout_s = args.kv_pull_timeout_s
        host = args.kv_advertise_host or args.host
        host = socket.gethostname() if host in ("", "0.0.0.0", "::", "[::]") else host
        # One id per process: a handoff made by an engine that restarted since names an engine that is gone.
        self.address = kv_transfer_pb2.KvHandoff(engine_id=uuid.uuid4().hex, host=host, port=port, tp_size=1)
        self.engine: Engine | None = None
        self.layout = kv_transfer_pb2.KvLayout()
        # Why this engine takes no KV step, when it cannot ("": it can).
        self.unavailable = "KV handoffs need the paged runner with the step loop in the server (--engine-core thread)"
        if isinstance(engine, Engine) and isinstance(engine.runner, ModelRunner) and engine.runner.window_group:
            # Its sliding-window layers' blocks live in a pool of their own (scheduling/window_pool.py), most of
            # them freed: a handoff's one block list would carry the full-attention layers' only.
            self.unavailable = (
                "this model's sliding-window layers keep their own KV blocks (a window's worth): P/D handoffs "
                "carry one block list, so they are not offered for it"
            )
        elif isinstance(engine, Engine) and isinstance(engine.runner, ModelRunner):
            self.unavailable = ""
            self.engine, self.runner = engine, engine.runner
            engine.handoffs.timeout_s = args.kv_handoff_timeout_s
            self.layout = blocks.layout_of(engine.runner, model_name, tokenizer_fingerprint)
            self.puller = Puller(self.layout, engine.runner.device, args.kv_peer_tls_name or None)

    # ---- a Generate call's KV step ------------------------------------------------------------------

    def step(self, request: engine_pb2.GenerateRequest) -> kv_transfer_pb2.KvTransfer | None:
        """The KV step the request asks for, in our terms (None: a plain request); refused when this engine does
        not take it."""
        ours, theirs = request.HasField("kv_transfer"), request.HasField("kv_transfer_params")
        if ours and theirs:
            raise fail(Reason.INVALID_KV_TRANSFER, "send kv_transfer or kv_transfer_params, not both", "kv_transfer")
        step = request.kv_transfer if ours else vllm_params.parse(request.kv_transfer_params) if theirs else None
        if step is None or not (kind := step.WhichOneof("step")) or (kind == "hand_off" and not step.hand_off):
            return None
        role = "prefill" if kind == "hand_off" else "decode"
        if self.role not in (role, "both"):
            raise fail(
                Reason.KV_TRANSFER_UNAVAILABLE, f"this engine's --kv-role is {self.role}: it takes no {role} step"
            )
        if self.engine is None:
            raise fail(Reason.KV_TRANSFER_UNAVAILABLE, self.unavailable)
        if request.HasField("n") and request.n != 1:
            raise fail(Reason.INVALID_KV_TRANSFER, "a KV handoff carries one choice: n must be 1", "n")
        return step

    async def prepare(self, step: kv_transfer_pb2.KvTransfer, seqs: list[Sequence], deadline_s: float | None) -> str:
        """Mark a prefill's sequence to keep its blocks, or pull a decode's prompt K/V for it (within the caller's
        remaining `deadline_s` too); the transport the pull took ("" for a prefill)."""
        (seq,) = seqs
        if step.WhichOneof("step") == "hand_off":
            seq.hand_off = True
            return ""
        timeout = self.pull_timeout_s if deadline_s is None else min(self.pull_timeout_s, deadline_s)
        seq.pulled = pulled = await self.puller.pull(step.pull, seq.prompt_ids, timeout)
        return pulled.transport

    def answer(self, message: engine_pb2.GenerateResponse, request: engine_pb2.GenerateRequest) -> None:
        """Complete a prefill's last message: where to pull from, and vLLM's shape when it asked in vLLM's."""
        kept = message.kv_handoff
        address = kv_transfer_pb2.KvHandoff()
        address.CopyFrom(self.address)
        address.MergeFrom(kept)
        message.kv_handoff.CopyFrom(address)
        if request.HasField("kv_transfer_params"):
            message.kv_transfer_params.CopyFrom(vllm_params.answer(address))

    # ---- KvTransferService (the prefill end) ----------------------------------------------------------

    def _serving(self, engine_id: str) -> Engine:
        """This engine, when it is the one a caller names."""
        if self.engine is None:
            raise fail(Reason.KV_TRANSFER_UNAVAILABLE, f"this engine keeps no KV blocks for others: {self.unavailable}")
        if engine_id != self.address.engine_id:
            raise fail(
                Reason.KV_HANDOFF_ENGINE_GONE,
                f"engine {engine_id} is gone: engine {self.address.engine_id} serves here now",
            )
        return self.engine

    async def ShareKvCache(self, request, context):
        self._serving(request.engine_id)
        if why := blocks.mismatch(self.layout, request.layout):
            raise fail(Reason.KV_HANDOFF_MISMATCH, f"KV cache layouts differ: {why}")
        runner = self.runner
        me = transport.device_of(runner.device)
        # The generation before the tensors: a cache allocated between the two reads is refused at its first pull.
        answer = kv_transfer_pb2.ShareKvCacheResponse(device=me, cache_generation=runner.kv_generation)
        caches = runner.kv_caches
        if transport.choose(me, request.device) == transport.CUDA_IPC and caches:
            try:
                answer.layers.extend(transport.share(caches))
            except RuntimeError as error:  # the driver's refusal: without handles the caller streams
                log.warning("cannot share the KV cache over CUDA IPC (%s): the caller streams", error)
        return answer

    async def PullKvBlocks(self, request, context):
        engine = self._serving(request.engine_id)
        if request.cache_generation and request.cache_generation != self.runner.kv_generation:
            raise fail(
                Reason.KV_CACHE_REMAPPED,
                f"the KV cache mapped at generation {request.cache_generation} is at {self.runner.kv_generation} now",
            )
        kept = engine.handoffs.peek(request.handoff_id)
        if kept is None:
            raise fail(Reason.KV_HANDOFF_EXPIRED, f"no KV blocks kept under handoff {request.handoff_id} (expired?)")
        why = blocks.mismatch(self.layout, request.layout)
        if not why and list(request.token_ids[: len(kept.token_ids)]) != kept.token_ids:
            why = "the prompt differs from the one these blocks were computed for"
        if not why and list(request.block_ids) != kept.block_ids:
            why = "block_ids differ from the handoff's"
        if why:
            raise fail(Reason.KV_HANDOFF_MISMATCH, f"KV handoff {request.handoff_id}: {why}")
        kept = engine.handoffs.claim(request.handoff_id)
        if kept is None:
            raise fail(Reason.KV_HANDOFF_EXPIRED, f"KV handoff {request.handoff_id} expired or was pulled meanwhile")
        runner = self.runner
        try:
            if request.cache_generation:  # the caller copies them itself: keep them until it ends the call
                yield kv_transfer_pb2.KvBlockChunk()
                await asyncio.Event().wait()
            layer_block = runner.kv_caches[0][: runner.block_size].nbytes
            per = max(1, blocks.CHUNK_BYTES // (layer_block * len(runner.kv_caches)))
            for first in range(0, len(kept.block_ids), per):
                try:
                    data = blocks.read(runner.kv_caches, runner.block_size, kept.block_ids[first : first + per])
                except torch.OutOfMemoryError as error:  # a chunk's gather on the device, beside the steps
                    raise fail(Reason.KV_PULL_NO_MEMORY, f"no device memory to read KV blocks: {error}") from None
                yield kv_transfer_pb2.KvBlockChunk(first_block=first, data=data)
        finally:
            engine.handoffs.done(kept)
