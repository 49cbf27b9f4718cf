"""An engine's part in disaggregated serving (--kv-role): which KV step a Generate call asks for and whether this
engine takes it, the decode step's pull from the prefill engine before the request is queued, the prefill step's
answer, and KvTransferService (the blocks this engine keeps, streamed to a decode engine, then freed).

The transport is our own contract over gRPC (kv_transfer.proto): it works wherever the engines reach each other,
CPU included. The pull runs on the decode engine's event loop while its step loop keeps stepping; only the landing
(one scatter per layer into fresh blocks) runs on the step thread. Both ends need the step loop in this process
(--engine-core thread) and the paged runner: elsewhere a KV step is refused (KV_TRANSFER_UNAVAILABLE).
"""

from __future__ import annotations

import socket
import uuid

import grpc

from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.sequence import Sequence
from engine_svc.serving.engine import Engine
from engine_svc.serving.kv_transfer import blocks, vllm_params
from scaleout.v1 import engine_pb2, kv_transfer_pb2, kv_transfer_pb2_grpc
from scaleout_common.channels import open_channel
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

ROLES = ("both", "prefill", "decode")
_PASSED_ON = {Reason.KV_HANDOFF_EXPIRED, Reason.KV_HANDOFF_ENGINE_GONE, Reason.KV_HANDOFF_MISMATCH}


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
        self.peer_tls_name = args.kv_peer_tls_name or None
        host = args.kv_advertise_host or args.host
        host = socket.gethostname() if host in ("", "0.0.0.0", "::", "[::]") else host
        # One id per process: a handoff made by an engine that restarted since names an engine that is gone.
        self.address = kv_transfer_pb2.KvHandoff(engine_id=uuid.uuid4().hex, host=host, port=port, tp_size=1)
        self.engine: Engine | None = None
        self.layout = kv_transfer_pb2.KvLayout()
        if isinstance(engine, Engine) and isinstance(engine.runner, ModelRunner):
            self.engine, self.runner = engine, engine.runner
            engine.handoffs.timeout_s = args.kv_handoff_timeout_s
            self.layout = blocks.layout_of(engine.runner, model_name, tokenizer_fingerprint)

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
            raise fail(
                Reason.KV_TRANSFER_UNAVAILABLE,
                "KV handoffs need the paged runner with the step loop in the server (--engine-core thread)",
            )
        if request.HasField("n") and request.n != 1:
            raise fail(Reason.INVALID_KV_TRANSFER, "a KV handoff carries one choice: n must be 1", "n")
        return step

    async def prepare(self, step: kv_transfer_pb2.KvTransfer, seqs: list[Sequence], deadline_s: float | None) -> None:
        """Mark a prefill's sequence to keep its blocks, or pull a decode's prompt K/V for it (within the caller's
        remaining `deadline_s` too)."""
        (seq,) = seqs
        if step.WhichOneof("step") == "hand_off":
            seq.hand_off = True
        else:
            timeout = self.pull_timeout_s if deadline_s is None else min(self.pull_timeout_s, deadline_s)
            seq.pulled = await self.pull(step.pull, seq.prompt_ids, timeout)

    def answer(self, message: engine_pb2.GenerateResponse, request: engine_pb2.GenerateRequest) -> None:
        """Complete a prefill's last message: where to pull from, and vLLM's shape when it asked in vLLM's."""
        kept = message.kv_handoff
        address = kv_transfer_pb2.KvHandoff()
        address.CopyFrom(self.address)
        address.MergeFrom(kept)
        message.kv_handoff.CopyFrom(address)
        if request.HasField("kv_transfer_params"):
            message.kv_transfer_params.CopyFrom(vllm_params.answer(address))

    async def pull(self, handoff: kv_transfer_pb2.KvHandoff, prompt: list[int], limit_s: float) -> blocks.Pulled:
        """The prompt's K/V from the prefill engine `handoff` names, on the host (that engine frees its copy)."""
        layout, where = self.layout, f"{handoff.host}:{handoff.port}"
        tokens = handoff.num_tokens or min(len(prompt), len(handoff.block_ids) * layout.block_size)
        if not handoff.block_ids or tokens > min(len(prompt), len(handoff.block_ids) * layout.block_size):
            raise fail(
                Reason.KV_HANDOFF_MISMATCH,
                f"the handoff's {len(handoff.block_ids)} blocks and {tokens} tokens do not fit "
                f"a prompt of {len(prompt)} tokens in blocks of {layout.block_size}",
            )
        request = kv_transfer_pb2.PullKvBlocksRequest(
            engine_id=handoff.engine_id,
            handoff_id=handoff.handoff_id,
            block_ids=handoff.block_ids,
            layout=layout,
            token_ids=prompt,
        )
        channel = open_channel(where, tls_name=self.peer_tls_name)
        try:
            call = kv_transfer_pb2_grpc.KvTransferServiceStub(channel).PullKvBlocks(request, timeout=limit_s)
            chunks = [chunk.data async for chunk in call]
        except grpc.aio.AioRpcError as error:
            passed = ServiceError.from_rpc_error(error)
            if passed.reason in _PASSED_ON:
                raise passed from None
            raise fail(
                Reason.KV_HANDOFF_ENGINE_GONE,
                f"the prefill engine at {where} did not hand the KV blocks over: {error.code().name} {error.details()}",
            ) from None
        finally:
            await channel.close()
        received, wanted = sum(map(len, chunks)), len(handoff.block_ids) * blocks.block_bytes(layout)
        if received != wanted:
            raise fail(Reason.KV_HANDOFF_MISMATCH, f"the prefill engine sent {received} bytes of K/V, not {wanted}")
        data = blocks.staged(chunks, len(handoff.block_ids), layout.num_layers)
        return blocks.Pulled(data, tokens)

    # ---- KvTransferService (the prefill end) ----------------------------------------------------------

    async def PullKvBlocks(self, request, context):
        engine = self.engine
        if engine is None:
            raise fail(Reason.KV_TRANSFER_UNAVAILABLE, "this engine keeps no KV blocks for others")
        if request.engine_id != self.address.engine_id:
            raise fail(
                Reason.KV_HANDOFF_ENGINE_GONE,
                f"engine {request.engine_id} is gone: engine {self.address.engine_id} serves here now",
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
            layer_block = runner.kv_caches[0][: runner.block_size].nbytes
            per = max(1, blocks.CHUNK_BYTES // (layer_block * len(runner.kv_caches)))
            for first in range(0, len(kept.block_ids), per):
                data = blocks.read(runner.kv_caches, runner.block_size, kept.block_ids[first : first + per])
                yield kv_transfer_pb2.KvBlockChunk(first_block=first, data=data)
        finally:
            engine.handoffs.done(kept)
