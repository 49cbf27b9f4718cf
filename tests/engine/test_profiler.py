"""The torch profiler over the engine's steps (engine_svc/serving/profiler.py): vLLM's --profiler-config, and
EngineControlService.StartProfile / StopProfile through the real engine server, in a thread and in a core process:
the trace is a gzipped Chrome trace of the model's steps, written where it was promised."""

from __future__ import annotations

import gzip
import json
import os

import grpc
import pytest

from engine_svc.serving.profiler import parse
from scaleout.v1 import control_pb2, control_pb2_grpc
from scaleout_common.errors import ServiceError
from tests.engine.conftest import engine_stub
from tests.engine.test_prefix_cache import SYSTEM, greedy

State = "PROFILER_STATE"


def _config(directory, **more) -> str:
    return json.dumps({"profiler": "torch", "torch_profiler_dir": str(directory), **more})


def test_the_flag_takes_vllms_torch_keys_and_refuses_the_rest_by_name(tmp_path):
    assert parse("") is None and parse('{"profiler": null}') is None
    config = parse(_config(tmp_path, torch_profiler_record_shapes=True, max_iterations=3))
    assert config is not None and config.torch_profiler_record_shapes and config.max_iterations == 3
    refused = {
        _config(tmp_path, warmup_iterations=1): "warmup_iterations",
        '{"profiler": "cuda"}': "'cuda'",
        '{"profiler": "torch", "torch_profiler_dir": "traces"}': "absolute",
        _config(tmp_path, torch_profiler_activities=["XPU"]): "'XPU'",
        _config(tmp_path, delay_iterations=-1): "delay_iterations",
        _config(tmp_path, ignore_frontend=False): "ignore_frontend",
    }
    for text, named in refused.items():
        with pytest.raises(ValueError, match=named):
            parse(text)


def _events(path: str) -> list[dict]:
    with gzip.open(path, "rt") as trace:
        return json.load(trace)["traceEvents"]


async def _expect(call, reason: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    error = ServiceError.from_rpc_error(refused.value)
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, reason), error.message


@pytest.mark.slow
@pytest.mark.parametrize("core", ["thread", "process"])
async def test_a_trace_records_the_steps_between_start_and_stop(tmp_path, core):
    async with engine_stub(None, "--engine-core", core, "--profiler-config", _config(tmp_path)) as (stub, _):
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        await _expect(control.StopProfile(control_pb2.StopProfileRequest()), State)
        started = await control.StartProfile(control_pb2.StartProfileRequest(prefix="bench"))
        await _expect(control.StartProfile(control_pb2.StartProfileRequest()), State)
        await greedy(stub, SYSTEM, max_tokens=4)
        stopped = await control.StopProfile(control_pb2.StopProfileRequest())
        # max_steps: the trace ends by itself; StopProfile then answers what it wrote
        other = tmp_path / "other"
        await control.StartProfile(control_pb2.StartProfileRequest(max_steps=2, directory=str(other)))
        await greedy(stub, SYSTEM, max_tokens=6)
        ended = await control.StopProfile(control_pb2.StopProfileRequest())
    assert stopped.trace_file == started.trace_file and os.path.basename(started.trace_file).startswith("bench-")
    assert started.trace_file.startswith(str(tmp_path)) and started.trace_file.endswith(".pt.trace.json.gz")
    assert stopped.steps >= 4  # a prefill step (or more, chunked) and a step per token after it
    assert any(event.get("name") == "ProfilerStep#1" for event in _events(stopped.trace_file))
    assert ended.steps == 2 and ended.trace_file.startswith(str(other)) and _events(ended.trace_file)


@pytest.mark.slow
async def test_an_engine_without_the_flag_says_so_and_a_keyed_caller_may_not_profile(tmp_path):
    async with engine_stub(None) as (stub, _):
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        await _expect(control.StartProfile(control_pb2.StartProfileRequest()), "PROFILER_OFF")
    keyed = (("x-scaleout-client", "a"),)
    async with engine_stub(None, "--profiler-config", _config(tmp_path)) as (stub, _):
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await control.StartProfile(control_pb2.StartProfileRequest(), metadata=keyed)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
