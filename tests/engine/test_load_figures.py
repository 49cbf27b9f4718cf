"""What routers read from the engine beyond its counts (GetLoad: tokens per second, pending prefill, utilization)
and the prefix-cache reset (EngineControlService), through the real engine server in a thread and in a core
process."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from engine_svc.serving.load_figures import WINDOW_S, TokenRate, utilization
from scaleout.v1 import control_pb2, control_pb2_grpc, engine_pb2, kv_events_pb2
from tests.engine.conftest import engine_stub, generate, request
from tests.engine.test_prefix_cache import SYSTEM, greedy


def test_token_rate_counts_the_last_window_only():
    rate = TokenRate()
    for step in range(40):  # 4 s at 10 steps a second, 8 tokens a step
        rate.add(8, 100.0 + step / 10)
    assert rate.per_second(104.0) == pytest.approx(40 * 8 / WINDOW_S)
    assert rate.per_second(100.0 + WINDOW_S + 4.0) == 0.0


def test_utilization_is_the_busier_of_batch_and_cache():
    assert utilization(2, 8, 30, 10) == 0.75
    assert utilization(6, 8, 1, 99) == 0.75
    assert utilization(0, 0, 0, 0) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("core", ["thread", "process"])
async def test_load_figures_and_a_reset_that_empties_the_cache(core):
    async with engine_stub(None, "--engine-core", core, "--block-size", "4") as (stub, _):
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        await greedy(stub, SYSTEM, max_tokens=16)
        busy = await stub.GetLoad(engine_pb2.GetLoadRequest())
        dropped = await control.ResetPrefixCache(control_pb2.ResetPrefixCacheRequest())
        after = await stub.GetLoad(engine_pb2.GetLoadRequest())
        _, cached, _ = await greedy(stub, SYSTEM)
    assert busy.generated_tokens_per_s > 0 and busy.kv_blocks_cached > 0 and busy.pending_prefill_tokens == 0
    assert 0 <= busy.utilization <= 1
    assert dropped.blocks_dropped == busy.kv_blocks_cached and after.kv_blocks_cached == 0 and cached == 0


@pytest.mark.slow
async def test_pending_prefill_counts_the_queue_less_its_cached_prefix():
    # No queue-wait budget: the request must queue behind the hog's 500 steps, not be refused.
    async with engine_stub(None, "--block-size", "4", "--max-num-seqs", "1", "--max-queue-wait-s", "0") as (stub, _):
        await greedy(stub, SYSTEM, max_tokens=2)  # SYSTEM's 9 full blocks are cached now
        hog = stub.Generate(request([3, 4, 5], temperature=1.0, max_tokens=500, ignore_eos=True))
        await hog.read()
        queued = asyncio.ensure_future(generate(stub, request(SYSTEM + [7] * 10, max_tokens=1)))
        for _ in range(200):
            load = await stub.GetLoad(engine_pb2.GetLoadRequest())
            if load.pending_prefill_tokens:  # queued in the scheduler (not just posted to the step loop)
                break
            await asyncio.sleep(0.01)
        hog.cancel()
        await queued
    # 48 tokens queued behind the running one; the 36 of SYSTEM's full blocks were cached.
    assert load.waiting == 1 and load.pending_prefill_tokens == len(SYSTEM) + 10 - 36
    assert load.utilization == 1.0  # the one batch slot is taken


@pytest.mark.slow
async def test_a_keyed_caller_may_not_reset_the_cache_nor_read_its_events():
    """The cache's reset and its KV events (every tenant's prompt tokens) are an admin key's (docs/security.md)."""
    keyed, admin = (("x-scaleout-client", "a"),), (("x-scaleout-client", "ops"), ("x-scaleout-admin", "true"))
    async with engine_stub(None) as (stub, _):
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        calls = [
            lambda md: control.ResetPrefixCache(control_pb2.ResetPrefixCacheRequest(), metadata=md),
            lambda md: control.GetKvEventSources(kv_events_pb2.GetKvEventSourcesRequest(), metadata=md),
            lambda md: control.SubscribeKvEvents(kv_events_pb2.SubscribeKvEventsRequest(), metadata=md).read(),
        ]
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(keyed)
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "NOT_PERMITTED" in str(refused.value.trailing_metadata())
        await calls[0](admin)
        await calls[1](admin)
