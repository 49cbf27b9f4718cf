"""LiveGeneration (pipeline_svc/hops.py) when a hop fails: the failure that happened first is the outcome, typed,
and the other hop's call is cancelled (no hop is left running). Fakes on loopback (tests/pipeline/fakes.py)."""

from __future__ import annotations

import asyncio
import types

import grpc
import pytest
from grpc.aio import AioRpcError, Metadata

from pipeline_svc.hops import WRITE_RACE_DETAILS, LiveGeneration
from scaleout.v1 import engine_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail
from tests.pipeline.fakes import FINISHED, HANG, OUTPUT, Context, Derender, Engine, ended, hops_over, rendered


async def _run(engine: Engine, derender: Derender) -> tuple[int, ServiceError | None]:
    """(answers read, the failure raised) of one live generation; both fakes' calls have ended after it."""
    async with hops_over(engine, derender) as hops:
        answers, failure = 0, None
        try:
            async for _ in LiveGeneration(hops, rendered(), Context()).answers():
                answers += 1
        except ServiceError as error:
            failure = error
        await ended(engine, derender)
    return answers, failure


async def test_a_derender_refusal_wins_and_the_engine_call_is_cancelled():
    engine = Engine([0.05, OUTPUT, OUTPUT, FINISHED])  # a prefill: derender refuses long before the first output
    refusal = fail(Reason.TOO_MANY_STREAMS, "3 streams are open")
    answers, failure = await _run(engine, Derender(refuse=refusal, refuse_after=engine.running))
    assert failure is not None and (failure.code, failure.reason, failure.message) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        Reason.TOO_MANY_STREAMS,
        "3 streams are open",
    )
    assert answers == 0 and engine.ends == ["cancelled"]


async def test_an_untyped_engine_failure_is_typed_by_its_code_and_derender_is_cancelled():
    derender = Derender()
    answers, failure = await _run(Engine([derender.running, grpc.StatusCode.UNAVAILABLE]), derender)
    assert failure is not None and (failure.code, failure.reason, failure.typed) == (
        grpc.StatusCode.UNAVAILABLE,
        Reason.UPSTREAM_UNAVAILABLE,
        False,
    )
    assert answers == 0 and derender.ends == ["cancelled"]


async def test_a_typed_derender_failure_mid_stream_wins_and_the_engine_call_is_cancelled():
    engine = Engine([OUTPUT] * 20 + [FINISHED])
    answers, failure = await _run(engine, Derender(fail_after=(2, fail(Reason.TOO_MANY_TOKENS, "over the limit"))))
    assert failure is not None and failure.reason == Reason.TOO_MANY_TOKENS
    assert answers == 2 and engine.ends == ["cancelled"]


async def test_an_in_band_engine_error_wins_and_derender_is_cancelled():
    error = engine_pb2.GenerateResponse(error=fail(Reason.ENGINE_STEP_FAILED, "a model step raised").to_status())
    derender = Derender()
    answers, failure = await _run(Engine([OUTPUT, error, HANG]), derender)  # derender reads the output first
    assert failure is not None and (failure.code, failure.reason) == (
        grpc.StatusCode.INTERNAL,
        Reason.ENGINE_STEP_FAILED,
    )
    assert answers == 1 and derender.ends == ["cancelled"]


async def test_an_engine_stream_without_its_terminal_message_is_upstream_lost():
    _, failure = await _run(Engine([OUTPUT]), Derender())
    assert failure is not None and (failure.reason, failure.typed) == (Reason.UPSTREAM_LOST, True)


async def test_a_stop_string_cancels_the_engine_and_derender_closes_the_choices():
    engine, derender = Engine([OUTPUT, OUTPUT, HANG]), Derender(stop_after=2)
    answers, failure = await _run(engine, derender)
    assert failure is None and answers == 3  # two outputs (the second matched), then the closing chunk
    assert engine.ends == ["cancelled"] and derender.ends == ["done"]


async def test_a_complete_generation_ends_both_calls():
    engine, derender = Engine(), Derender()
    answers, failure = await _run(engine, derender)
    assert failure is None and answers == 3 and engine.ends == ["done"] and derender.ends == ["done"]


# --- a write that raced derender's end: grpc.aio reports INTERNAL over derender's status (grpc/grpc#36066) -------
class _EngineCall:
    def __init__(self):
        self.cancelled = False

    async def __aiter__(self):
        yield OUTPUT
        await asyncio.sleep(3600)

    def cancel(self) -> bool:
        self.cancelled = True
        return True

    def done(self) -> bool:
        return self.cancelled


class _RacedDerenderCall:
    """A derender call whose status a write overwrote, as grpc.aio does (grpc/grpc#36066)."""

    error = AioRpcError(grpc.StatusCode.INTERNAL, Metadata(), Metadata(), details=WRITE_RACE_DETAILS)

    async def write(self, request):
        raise self.error

    async def done_writing(self):
        pass

    async def __aiter__(self):
        raise self.error
        yield

    def done(self) -> bool:
        return False

    def cancel(self) -> bool:
        return False


async def test_a_write_race_is_derender_ending_never_internal():
    engine_call = _EngineCall()

    class Stub:
        def Generate(self, request, timeout=None, metadata=None):
            return engine_call

        def DerenderStream(self, timeout=None):
            return _RacedDerenderCall()

    hops = types.SimpleNamespace(engine=Stub(), derender=Stub())
    with pytest.raises(ServiceError) as raised:
        async for _ in LiveGeneration(hops, rendered(), Context()).answers():  # type: ignore[arg-type]
            pass
    assert (raised.value.code, raised.value.reason, raised.value.typed) == (
        grpc.StatusCode.UNAVAILABLE,
        Reason.UPSTREAM_UNAVAILABLE,
        False,
    )
    assert engine_call.cancelled
