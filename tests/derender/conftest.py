"""Fixtures: the default model's tokenizer (loaded once) and a real derender server on loopback."""

from __future__ import annotations

import grpc
import pytest
import pytest_asyncio

from derender_svc.__main__ import build_parser
from derender_svc.service import DerenderService
from derender_svc.tokenizer_info import TokenizerInfo
from scaleout.v1 import derender_pb2_grpc
from scaleout_common.models import load_tokenizer, resolve_model
from tests.serving import serving


@pytest.fixture(scope="session")
def hf_tokenizer():
    return load_tokenizer(resolve_model(None))


@pytest.fixture(scope="session")
def info(hf_tokenizer):
    return TokenizerInfo.from_hf(hf_tokenizer)


@pytest_asyncio.fixture(scope="session")
async def stub(info):
    parser = build_parser()
    service = DerenderService(parser.parse_args(["--max-state-bytes", "4096"]), info)
    async with serving(service, parser) as target, grpc.aio.insecure_channel(target) as channel:
        yield derender_pb2_grpc.DerenderServiceStub(channel)
