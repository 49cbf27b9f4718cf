"""Fixtures: renderers for three template families on the default model's tokenizer, and real render servers."""

from __future__ import annotations

import contextlib

import grpc
import pytest
import pytest_asyncio

from render_svc import flags
from render_svc.model import load_model
from render_svc.renderer import Renderer
from render_svc.service import RenderService
from scaleout.v1 import render_pb2_grpc
from scaleout_common.models import load_tokenizer, resolve_model
from tests.render.fixtures import FAMILIES
from tests.serving import serving


@pytest.fixture(scope="session")
def reference_tokenizer():
    """A tokenizer of its own for apply_chat_template, so the server's instance is never touched."""
    return load_tokenizer(resolve_model(None))


@pytest.fixture(scope="session")
def renderers():
    """family -> Renderer (the core, no gRPC), each with its template as the server template."""
    return {
        family: Renderer(load_model(None, chat_template=str(path) if path else None))
        for family, path in FAMILIES.items()
    }


@contextlib.asynccontextmanager
async def render_channel(*argv: str):
    """A real render server on loopback started with `argv`; yields a channel to it."""
    parser = flags.parser()
    service = RenderService(parser.parse_args(list(argv)))
    async with serving(service, parser, *argv) as target, grpc.aio.insecure_channel(target) as channel:
        yield channel


@contextlib.asynccontextmanager
async def render_server(*argv: str):
    """A real render server on loopback started with `argv`; yields its stub."""
    async with render_channel(*argv) as channel:
        yield render_pb2_grpc.RenderServiceStub(channel)


@pytest_asyncio.fixture(scope="session")
async def stub():
    """The default server, with small limits so each is easy to reach."""
    async with render_server(
        "--served-model-name",
        "smol",
        "other-name",
        "--max-messages",
        "64",
        "--max-template-output-chars",
        "200000",
        "--template-timeout-s",
        "0.5",
        "--max-request-bytes",
        "65536",
        "--max-batch-size",
        "64",
        "--default-chat-template-kwargs",
        '{"enable_thinking": true, "flavor": "server"}',
    ) as render_stub:
        yield render_stub


@pytest_asyncio.fixture(scope="session")
async def trusting_stub():
    async with render_server(
        "--trust-request-chat-template", "--template-timeout-s", "0.5", "--template-memory-mb", "64"
    ) as render_stub:
        yield render_stub
