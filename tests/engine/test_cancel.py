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
from tests.engine.test_admission import reason_of


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
    # No queue-wait budget: 200 streams over 64 slots on loaded cores estimate waits past its default (10 s).
    flags = ("--max-num-seqs", "64", "--block-size", "4", "--decode-steps", decode_steps, "--max-queue-wait-s", "0")
    async with engine_stub(tiny_model, *flags) as (stub, _):

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


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("flags", "waiting", "refusal"),
    [
        (("--max-waiting", "4", "--max-queue-wait-s", "0"), 4, "QUEUE_FULL"),  # the waiting figures
        (("--max-queue-wait-s", "0.01"), 0, "QUEUE_WAIT_OVER_BUDGET"),  # the running ones (their steps left)
    ],
    ids=["waiting-bound", "queue-wait-budget"],
)
async def test_cancelled_streams_leave_the_admission_figures_at_once(tiny_model, flags, waiting, refusal):
    """Streams fill the slots (and the waiting bound) and the step loop is held before its next forward pass,
    so no stream can finish and no abort can reach it; new requests are refused. Every stream is cancelled: the
    server counts them out as it learns of it (`queue_budget.Leaving`), so a new request is admitted while the
    step loop still holds them all."""
    async with engine_stub(tiny_model, "--max-num-seqs", "4", "--decode-steps", "1", *flags) as (stub, service):
        engine = service.loaded.engine
        gate, held, execute = threading.Event(), threading.Event(), engine.runner.execute

        def hold_once_running(chunks):  # the step thread holds itself: no race with the streams' ends
            running = list(engine.scheduler.running)
            if len(running) == 4 and min(len(s.output_ids) for s in running) >= 2 and engine.pace.decode_step_s:
                held.set()
                gate.wait(30)
            return execute(chunks)

        engine.runner.execute = hold_once_running
        try:
            calls = [  # held: they cannot end
                stub.Generate(request([1, 5, 6, 7], f"run{i}", temperature=1.0, max_tokens=400, ignore_eos=True))
                for i in range(4)
            ]
            async with asyncio.timeout(10):
                while not held.is_set():
                    await asyncio.sleep(0.005)
            calls += [stub.Generate(request([1, 5, 6, 7], f"wait{i}", max_tokens=2)) for i in range(waiting)]
            async with asyncio.timeout(10):
                while (await stub.GetLoad(engine_pb2.GetLoadRequest())).waiting < waiting:
                    await asyncio.sleep(0.005)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GenerateUnary(request([1, 5], max_tokens=2))
            assert (refused.value.code(), reason_of(refused.value)) == (grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)

            for call in calls:
                call.cancel()
            fresh = None
            async with asyncio.timeout(5):  # the cancellations reach the server's handlers: the next is admitted
                while fresh is None or fresh.done():
                    fresh = stub.Generate(request([1, 5], "fresh", max_tokens=2))
                    while not fresh.done() and not any(key.endswith("fresh") for key in engine.requests):
                        await asyncio.sleep(0.005)
            assert len(engine.scheduler.running) == 4  # admitted while the step loop still counts them all
        finally:
            gate.set()
            engine.runner.execute = execute
        assert [m async for m in fresh][-1].finished
        load = await _until_idle(stub)
    assert (load.running, load.waiting, load.kv_blocks_used) == (0, 0, 0)
