"""The engine core in a child process (--engine-core process, the CUDA default): same outputs, same cleanup,
and a dead core fails its streams in-band and turns readiness off instead of hanging them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc
from tests.engine.conftest import assert_timed, engine_stub, generate, request
from tests.engine.test_cancel import _until_idle
from tests.engine.test_generate import PROMPTS, reference


async def _rest(call) -> list[engine_pb2.GenerateResponse]:
    messages = []
    while (message := await call.read()) != grpc.aio.EOF:
        messages.append(message)
    return messages


async def test_outputs_cancellation_and_abort_through_the_core_process(tiny_model):
    async with engine_stub(
        None, "--engine-core", "process", "--max-num-batched-tokens", "16", "--block-size", "4", "--decode-steps", "3"
    ) as (stub, _service):
        results = await asyncio.gather(
            *[generate(stub, request(p, temperature=0, max_tokens=12, ignore_eos=True)) for p in PROMPTS]
        )
        unary = await stub.GenerateUnary(request(PROMPTS[0], temperature=0, max_tokens=6, ignore_eos=True, n=2))

        async def cancelled(i):
            call = stub.Generate(
                request(PROMPTS[i % len(PROMPTS)], f"c{i}", temperature=1.0, max_tokens=200, ignore_eos=True)
            )
            async for _ in call:
                if i % 3 == 0:
                    break
            call.cancel()

        await asyncio.gather(*[cancelled(i) for i in range(30)])
        long = stub.Generate(request(PROMPTS[1], "mine", temperature=1.0, max_tokens=400, ignore_eos=True))
        await long.read()
        reply = await stub.Abort(engine_pb2.AbortRequest(request_ids=["mine", "nobody"]))
        rest = await _rest(long)
        load = await _until_idle(stub)
    for prompt, (messages, tokens) in zip(PROMPTS, results):
        assert tokens[0] == reference(tiny_model, prompt, 12)
        assert messages[-1].finished and messages[-1].usage.completion_tokens == 12
        assert_timed(messages)  # the core's stamps, on the API server's clock (one per host)
    assert [list(c.token_ids) for c in unary.choices] == [reference(tiny_model, PROMPTS[0], 6)] * 2
    assert unary.timings.prefill_seconds > 0 and unary.timings.decode_seconds > 0
    assert list(reply.aborted) == ["mine"] and list(reply.not_found) == ["nobody"]
    assert rest[-1].finished and rest[-1].choices[-1].finish_reason == common_pb2.FINISH_REASON_ABORT
    assert (load.running, load.waiting, load.kv_blocks_used) == (0, 0, 0)


async def test_a_dead_core_fails_its_streams_in_band_and_turns_readiness_off():
    async with engine_stub(None, "--engine-core", "process") as (stub, service):
        call = stub.Generate(request(PROMPTS[0], temperature=1.0, max_tokens=400, ignore_eos=True))
        await call.read()
        os.kill(service.loaded.engine._process.pid, signal.SIGKILL)
        rest = await _rest(call)
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # after the core is gone: typed, not INTERNAL
            await stub.GenerateUnary(request(PROMPTS[0], max_tokens=4))
        health = health_pb2_grpc.HealthStub(stub.channel)
        readiness = health_pb2.HealthCheckRequest(service="scaleout.v1.EngineService")
        for _ in range(100):
            status = (await health.Check(readiness)).status
            if status == health_pb2.HealthCheckResponse.NOT_SERVING:
                break
            await asyncio.sleep(0.05)
    assert rest and rest[-1].error.details and "ENGINE_CORE_EXITED" in str(rest[-1].error)
    assert status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "ENGINE_CORE_EXITED" in str(refused.value.trailing_metadata())


async def test_ctrl_c_to_the_process_group_drains_in_flight_streams():
    """Ctrl-C reaches the server and its engine core alike; the core leaves shutdown to the server, which drains."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine_svc",
            "--engine-core",
            "process",
            "--port",
            "0",
            "--metrics-port",
            "-1",
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        target = next(line.split()[-1] for line in server.stdout if line.startswith("LISTENING"))
        async with grpc.aio.insecure_channel(target) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            readiness = health_pb2.HealthCheckRequest(service="scaleout.v1.EngineService")
            while (await health.Check(readiness)).status != health_pb2.HealthCheckResponse.SERVING:
                await asyncio.sleep(0.2)
            stub = engine_pb2_grpc.EngineServiceStub(channel)
            messages = []
            async for message in stub.Generate(request([1, 5, 7], temperature=0, max_tokens=64, ignore_eos=True)):
                messages.append(message)
                if len(messages) == 2:
                    os.killpg(server.pid, signal.SIGINT)
        assert server.wait(60) == 0
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
    assert messages[-1].finished and not messages[-1].HasField("error")
    assert sum(len(c.token_ids) for m in messages for c in m.choices) == 64


async def test_logprobs_stops_and_seeded_choices_cross_the_pipe_unchanged():
    message = request(
        PROMPTS[2],
        "same-id",
        temperature=0.8,
        seed=11,
        max_tokens=9,
        logprobs=3,
        prompt_logprobs=2,
        n=2,
        stop_token_ids=[PROMPTS[2][-1]],
    )
    replies = []
    for core in ("thread", "process"):
        async with engine_stub(None, "--engine-core", core) as (stub, _service):
            replies.append(await stub.GenerateUnary(message))
    for reply in replies:  # measured, so never equal: present in both, the rest compared
        assert reply.timings.prefill_seconds > 0
        reply.ClearField("timings")
    thread, process = replies
    assert process.choices[0].logprobs.top and process.prompt.logprobs.logprobs
    assert process == thread
