"""Cancellation, abort by request id, and step-loop health."""

from __future__ import annotations

import asyncio
import random
import threading

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaleout.v1 import common_pb2, engine_pb2
from tests.engine.conftest import engine_stub, request


async def _until_idle(stub):
    for _ in range(200):
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
        if (load.running, load.waiting, load.kv_blocks_used) == (0, 0, 0):
            return load
        await asyncio.sleep(0.05)
    return load


@pytest.mark.parametrize("decode_steps", ["1", "4"])
async def test_200_streams_cancelled_at_random_points_leave_the_engine_idle(tiny_model, decode_steps):
    rng = random.Random(7)
    async with engine_stub(tiny_model, "--max-num-seqs", "64", "--block-size", "4", "--decode-steps", decode_steps) as (
        stub,
        _,
    ):

        async def one(i):
            call = stub.Generate(
                request(
                    [1] + [rng.randrange(3, 200) for _ in range(rng.randrange(1, 60))],
                    f"c{i}",
                    n=rng.choice([1, 2]),
                    temperature=1.0,
                    max_tokens=200,
                    ignore_eos=True,
                )
            )
            stop_after = rng.randrange(0, 6)
            async for _ in call:
                if stop_after == 0:
                    break
                stop_after -= 1
            call.cancel()

        await asyncio.gather(*[one(i) for i in range(200)])
        load = await _until_idle(stub)
    assert (load.running, load.waiting, load.kv_blocks_used) == (0, 0, 0)


async def test_deadline_exceeded_aborts_and_frees_the_cache(tiny_model):
    async with engine_stub(tiny_model, "--max-num-seqs", "4") as (stub, _):
        calls = [
            stub.GenerateUnary(request([1, 5, 6], temperature=1.0, max_tokens=505, ignore_eos=True), timeout=0.2)
            for _ in range(6)
        ]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        load = await _until_idle(stub)
    assert all(isinstance(o, grpc.aio.AioRpcError) and o.code() == grpc.StatusCode.DEADLINE_EXCEEDED for o in outcomes)
    assert (load.running, load.waiting, load.kv_blocks_used) == (0, 0, 0)


async def test_abort_by_request_id_ends_the_stream(tiny_model):
    async with engine_stub(tiny_model) as (stub, _):
        call = stub.Generate(request([1, 5, 6], "mine", n=2, temperature=1.0, max_tokens=400, ignore_eos=True))
        first = await call.read()
        reply = await stub.Abort(engine_pb2.AbortRequest(request_ids=["mine", "nobody"]))
        rest = []
        while (message := await call.read()) is not grpc.aio.EOF:
            rest.append(message)
        load = await _until_idle(stub)
    assert first.prompt.num_tokens == 3
    assert list(reply.aborted) == ["mine"] and list(reply.not_found) == ["nobody"]
    assert rest[-1].finished
    reasons = {c.index: c.finish_reason for m in rest for c in m.choices if c.finish_reason}
    assert reasons == {0: common_pb2.FINISH_REASON_ABORT, 1: common_pb2.FINISH_REASON_ABORT}
    assert load.kv_blocks_used == 0


async def test_readiness_goes_not_serving_while_the_step_loop_is_stuck(tiny_model):
    async with engine_stub(tiny_model, "--stall-timeout-s", "0.3") as (stub, service):
        runner = service.loaded.engine.runner
        gate, execute = threading.Event(), runner.execute
        runner.execute = lambda chunks: (gate.wait(), execute(chunks))[1]
        health = health_pb2_grpc.HealthStub(stub.channel)
        call = stub.GenerateUnary(request([1, 2, 3], max_tokens=3))
        statuses = []
        for _ in range(50):
            statuses.append(
                (await health.Check(health_pb2.HealthCheckRequest(service="scaleout.v1.EngineService"))).status
            )
            if statuses[-1] == health_pb2.HealthCheckResponse.NOT_SERVING:
                break
            await asyncio.sleep(0.1)
        gate.set()
        assert (await call).finished
        runner.execute = execute
    assert statuses[-1] == health_pb2.HealthCheckResponse.NOT_SERVING
