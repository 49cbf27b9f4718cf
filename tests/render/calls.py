"""Helpers to build requests and check typed errors over gRPC."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import json_format

from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError


def chat(messages=None, **fields) -> render_pb2.RenderChatRequest:
    messages = messages if messages is not None else [{"role": "user", "content": "hi"}]
    return json_format.ParseDict({"messages": messages, **fields}, render_pb2.RenderChatRequest())


async def error_of(call) -> ServiceError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return ServiceError.from_rpc_error(caught.value)


async def expect(call, code: str, reason: str) -> ServiceError:
    error = await error_of(call)
    assert (error.code.name, error.reason) == (code, reason), error.message
    return error
