"""A started stream's failed call as its in-band error (pipeline_svc.hops.broken_off): a status a service typed
with a reason of the table passes on as it is; an untyped one (Envoy resetting a stream whose replica died) is
UPSTREAM_LOST, never a reason outside the table."""

from __future__ import annotations

import grpc
from grpc.aio import AioRpcError, Metadata

from pipeline_svc.hops import broken_off
from scaleout_common.reasons import Reason, fail


def test_an_untyped_failure_is_upstream_lost():
    for code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.CANCELLED):
        error = AioRpcError(code, Metadata(), Metadata(), details="Received RST_STREAM with error code 2")
        failure = broken_off(error)
        assert (failure.code, failure.reason) == (Reason.UPSTREAM_LOST.code, Reason.UPSTREAM_LOST)
        assert code.name in failure.message and "RST_STREAM" in failure.message


def test_a_typed_failure_passes_on_as_it_is():
    typed = fail(Reason.ENGINE_CORE_EXITED, "the engine core process exited").to_rpc_status()
    error = AioRpcError(typed.code, Metadata(), Metadata(*typed.trailing_metadata), details=typed.details)
    failure = broken_off(error)
    assert (failure.code, failure.reason, failure.message) == (
        grpc.StatusCode.UNAVAILABLE,
        Reason.ENGINE_CORE_EXITED,
        "the engine core process exited",
    )
