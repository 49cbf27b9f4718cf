"""The decode end of a KV handoff: the prompt's blocks from the prefill engine a handoff names, by the transport
the rule picks (transport.py).

- gRPC stream: PullKvBlocks sends the blocks' bytes; they wait on the host until the step thread lands them.
- CUDA IPC (same GPU, another process): the prefill engine's cache is mapped once per engine and cache generation
  (ShareKvCache); for each handoff PullKvBlocks only claims the blocks (one empty chunk), they are gathered device
  to device into a staging tensor on a side CUDA stream (the step loop keeps stepping on its own stream), and the
  call ends once the copy is done, which frees them there. Landing waits on the copy's event on the step stream.
  A cache the prefill engine allocated anew (KV_CACHE_REMAPPED) or that cannot be mapped, or no device memory for
  the staging tensor (allocated before the claim, so the blocks are still there to stream): this pull streams.
  Concurrent first pulls from one engine share one ShareKvCache and one mapping.

Never INTERNAL: device memory that runs out once the blocks are claimed is KV_PULL_NO_MEMORY, any other device
error of the copy KV_PULL_FAILED (both logged). Runs on the server's event loop, never on the step thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from dataclasses import dataclass

import grpc
import torch

from engine_svc.serving.kv_transfer import blocks, transport
from scaleout.v1 import kv_transfer_pb2, kv_transfer_pb2_grpc
from scaleout_common.channels import open_channel
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

log = logging.getLogger(__name__)
_THIS_HANDOFF = {Reason.KV_HANDOFF_EXPIRED, Reason.KV_HANDOFF_MISMATCH}
_PASSED_ON = {*_THIS_HANDOFF, Reason.KV_HANDOFF_ENGINE_GONE, Reason.KV_PULL_NO_MEMORY}


@dataclass
class Mapped:
    """A prefill engine's layer caches mapped into this process."""

    generation: int
    layers: list[torch.Tensor]


class Puller:
    def __init__(self, layout: kv_transfer_pb2.KvLayout, device: torch.device, tls_name: str | None):
        self.layout, self.device, self.tls_name = layout, device, tls_name
        self.me = transport.device_of(device)
        self.mapped: dict[str, Mapped | None] = {}  # prefill engine id -> its cache here (None: stream from it)
        self._mapping: dict[str, asyncio.Future] = {}  # prefill engine id -> the one ShareKvCache under way
        self.side = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.pulls: collections.Counter[str] = collections.Counter()  # by transport, since start

    async def pull(self, handoff: kv_transfer_pb2.KvHandoff, prompt: list[int], limit_s: float) -> blocks.Pulled:
        """The prompt's K/V from the prefill engine `handoff` names (that engine frees its copy)."""
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
        start, channel = time.perf_counter(), open_channel(where, tls_name=self.tls_name)
        try:
            stub = kv_transfer_pb2_grpc.KvTransferServiceStub(channel)
            mapped = await self._mapped(where, handoff.engine_id, limit_s)
            data, ready, way = None, None, transport.STREAM
            if mapped is not None:
                data, ready = await self._copy(stub, request, mapped, limit_s)
                way = transport.CUDA_IPC if data is not None else way
            if data is None:
                data = await self._stream(stub, request, limit_s)
        except (torch.OutOfMemoryError, MemoryError) as error:  # claimed (freed there when the call ends): no retry
            raise fail(Reason.KV_PULL_NO_MEMORY, f"no memory for the {tokens} pulled tokens' K/V: {error}") from None
        except RuntimeError as error:  # a device fault of the copy (ServiceError is not one): typed, logged
            log.exception("KV pull from %s failed", where)
            raise fail(Reason.KV_PULL_FAILED, f"the KV copy from {where} failed: {error}") from None
        except grpc.aio.AioRpcError as error:
            passed = ServiceError.from_rpc_error(error)
            if passed.reason not in _THIS_HANDOFF:  # the engine may be gone: map it again if it answers
                self.mapped.pop(handoff.engine_id, None)
            if passed.reason in _PASSED_ON:
                raise passed from None
            raise fail(
                Reason.KV_HANDOFF_ENGINE_GONE,
                f"the prefill engine at {where} did not hand the KV blocks over: {error.code().name} {error.details()}",
            ) from None
        finally:
            await channel.close()
        self.pulls[way] += 1
        log.info(
            "KV pull from %s: %d blocks (%d tokens) via %s in %.1f ms",
            where,
            len(handoff.block_ids),
            tokens,
            way,
            1e3 * (time.perf_counter() - start),
        )
        return blocks.Pulled(data, tokens, ready, way)

    async def _mapped(self, where: str, engine_id: str, limit_s: float) -> Mapped | None:
        """The prefill engine's cache mapped here, asked for once per engine (None: stream from it); pulls that
        arrive while it is asked wait for that one answer (one ShareKvCache, one mapping)."""
        if engine_id in self.mapped:
            return self.mapped[engine_id]
        if engine_id not in self._mapping:
            task = asyncio.ensure_future(self._map(where, engine_id, limit_s))
            task.add_done_callback(lambda _: self._mapping.pop(engine_id, None))
            self._mapping[engine_id] = task
        return await asyncio.shield(self._mapping[engine_id])  # one caller cancelled leaves it to the others

    async def _map(self, where: str, engine_id: str, limit_s: float) -> Mapped | None:
        """Ask and map, on a channel of its own (the pull that started it may end first)."""
        mapped = None
        if self.me.device_uuid:  # off CUDA there is nothing to map: do not ask
            share = kv_transfer_pb2.ShareKvCacheRequest(engine_id=engine_id, layout=self.layout, device=self.me)
            channel = open_channel(where, tls_name=self.tls_name)
            try:
                answer = await kv_transfer_pb2_grpc.KvTransferServiceStub(channel).ShareKvCache(share, timeout=limit_s)
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNIMPLEMENTED:  # an engine without the device path: stream
                    raise
                answer = kv_transfer_pb2.ShareKvCacheResponse()
            finally:
                await channel.close()
            if transport.choose(self.me, answer.device) == transport.CUDA_IPC and answer.layers:
                try:
                    layers = transport.open_shared(list(answer.layers), self.layout, self.device)
                    mapped = Mapped(answer.cache_generation, layers)
                except Exception as error:  # a layout it cannot hold, or the driver's refusal: either way, stream
                    log.warning("cannot map the KV cache of engine %s (%s): streaming from it", engine_id, error)
        self.mapped[engine_id] = mapped
        return mapped

    async def _copy(self, stub, request, mapped: Mapped, limit_s: float):
        """Claim the blocks, copy them device to device, then end the call (which frees them there); (None, None)
        when the prefill engine's cache was allocated anew since it was mapped, or when the staging tensor does
        not fit in device memory now (this pull streams instead: nothing is claimed yet)."""
        side = torch.cuda.stream(self.side) if self.side is not None else contextlib.nullcontext()
        try:
            with side:
                staging = blocks.empty(self.layout, len(request.block_ids), self.device)
        except torch.OutOfMemoryError:
            log.warning("no device memory to stage %d KV blocks: streaming them", len(request.block_ids))
            return None, None
        claim = kv_transfer_pb2.PullKvBlocksRequest()
        claim.CopyFrom(request)
        claim.cache_generation = mapped.generation
        call = stub.PullKvBlocks(claim, timeout=limit_s)
        try:
            # grpc.aio.EOF is missing from grpc's type stubs. The blocks are claimed: they stay until this call ends.
            if await call.read() is grpc.aio.EOF:  # pyright: ignore[reportAttributeAccessIssue]
                raise fail(Reason.KV_HANDOFF_ENGINE_GONE, "the prefill engine ended the pull without claiming")
            with side:
                blocks.gather(mapped.layers, self.layout.block_size, list(request.block_ids), out=staging)
                ready = self.side.record_event() if self.side is not None else None
            if ready is not None:
                await asyncio.to_thread(ready.synchronize)  # then the prefill engine may reuse the blocks
            return staging, ready
        except grpc.aio.AioRpcError as error:
            if ServiceError.from_rpc_error(error).reason != Reason.KV_CACHE_REMAPPED:
                raise
            if self.mapped.get(request.engine_id) is mapped:  # mapped again at the next pull
                del self.mapped[request.engine_id]
            return None, None
        finally:
            call.cancel()

    async def _stream(self, stub, request, limit_s: float) -> torch.Tensor:
        chunks = [chunk.data async for chunk in stub.PullKvBlocks(request, timeout=limit_s)]
        received, wanted = sum(map(len, chunks)), len(request.block_ids) * blocks.block_bytes(self.layout)
        if received != wanted:
            raise fail(Reason.KV_HANDOFF_MISMATCH, f"the prefill engine sent {received} bytes of K/V, not {wanted}")
        return blocks.staged(chunks, len(request.block_ids), self.layout.num_layers)
