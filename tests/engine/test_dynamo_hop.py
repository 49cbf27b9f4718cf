"""The Dynamo worker's hop to a secure engine (engine_svc/faces/dynamo/hop.py): a tiny engine in-process with the
secure stack's flags (--tls-dir, --require-identity; certificates from a throwaway CA, devstack/certs.py) and the
worker's own start (`ScaleoutEngine.start`: the engine's health, model info and load), a generation, and the KV
events' and load's relays through it on the worker's publishing thread, without Dynamo's runtime: the frontend
plays no part in the hop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from pathlib import Path
from typing import Any, cast

import pytest

from devstack.certs import KEY, Authority
from engine_svc.serving.service import EngineService
from scaleout_common import identity, tls
from scaleout_common.server import serve
from tests.engine.conftest import build_tiny, engine_args
from tests.engine.test_dynamo_fields import Recorder

pytest.importorskip("dynamo.common.backend", reason="ai-dynamo is not installed (make setup installs it)")
from dynamo._core import Context
from dynamo.common.backend.publisher import ComponentSnapshot, PushSource

from engine_svc.faces.dynamo import hop
from engine_svc.faces.dynamo.worker import ScaleoutEngine, make_parser

PROMPT = list(range(3, 43))  # 40 tokens of the tiny model: full blocks at its default block size


@pytest.fixture(autouse=True)
def _plaintext_after():
    yield
    tls.configure(None)  # the engine's serve() and each worker set this process's credentials
    identity.configure_required(False)  # and its --require-identity, which an engine served after would keep


@contextlib.asynccontextmanager
async def secure_engine(directory: Path):
    """The tiny engine served as the secure stack serves one; yields its address."""
    args = engine_args("--drain-delay-s", "0", "--tls-dir", str(directory), "--require-identity", "--kv-events")
    stop, bound = asyncio.Event(), asyncio.get_running_loop().create_future()
    service = EngineService(args, build=functools.partial(build_tiny, args))
    task = asyncio.create_task(serve(service, args, stop=stop, listening=bound.set_result))
    port = await asyncio.wait_for(asyncio.shield(bound), 60)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop.set()
        await task


class Snapshots:
    """Dynamo's SnapshotPublisher's one call, recorded with its thread."""

    def __init__(self):
        self.calls: list[tuple[int, ComponentSnapshot, str]] = []

    def publish(self, rank: int, snapshot: ComponentSnapshot) -> None:
        self.calls.append((rank, snapshot, threading.current_thread().name))


async def _start(engine: str, *flags: str) -> tuple[list[int], Recorder, Snapshots]:
    """The worker's start, one generation through it (its tokens), then its relays: the KV events (the blocks of
    that prompt, from the snapshot the subscription starts with) and the load."""
    worker, _ = await ScaleoutEngine.from_args(["--engine", engine, "--engine-wait-s", "60", *flags])
    publisher, snapshots = Recorder(), Snapshots()
    try:
        config = await worker.start(0)
        assert config.llm is not None and config.llm.total_kv_blocks and config.llm.context_length
        request = {"token_ids": PROMPT, "stop_conditions": {"max_tokens": 4, "ignore_eos": True}}
        chunks = [chunk async for chunk in worker.generate(request, Context())]
        (source,) = await worker.kv_event_sources()
        assert isinstance(source, PushSource)
        source.on_ready(cast(Any, publisher))  # in place of Dynamo's KvEventPublisher: its two calls recorded
        worker.attach_snapshot_publisher(snapshots)
        for _ in range(60):
            if publisher.calls and snapshots.calls:
                break
            await asyncio.sleep(0.05)
        return [token for chunk in chunks for token in chunk["token_ids"]], publisher, snapshots
    finally:
        await worker.cleanup()
        assert worker.publishing.thread is None or not worker.publishing.thread.is_alive()


async def test_worker_with_certificates_and_identity_starts_others_are_refused(tmp_path):
    authority = Authority(tmp_path / "certs")
    async with secure_engine(authority.issue("engine")) as engine:
        tokens, publisher, snapshots = await _start(
            engine, "--tls-dir", str(authority.issue("dynamo")), "--client", "dynamo"
        )
        assert len(tokens) == 4
        assert publisher.calls and publisher.calls[0][0] == "stored" and publisher.calls[0][1][:16] == PROMPT[:16]
        (rank, snapshot, _), *_ = snapshots.calls
        assert rank == 0 and snapshot.kv_total_blocks > 0 and snapshot.kv_cache_hit_rate is not None
        # Dynamo's publishers are driven from the worker's publishing thread, never the loop serving generate
        assert publisher.threads == {t for *_, t in snapshots.calls} == {"dynamo-publishing"}
        published = len(snapshots.calls)
        await asyncio.sleep(1.2)  # longer than the load relay's interval: nothing publishes after cleanup
        assert len(snapshots.calls) == published

        with pytest.raises(SystemExit, match=r"refuses the worker's connections .* plaintext \(no --tls-dir\)"):
            await _start(engine)
        stranger = Authority(tmp_path / "other", "another CA").issue("dynamo")
        with pytest.raises(SystemExit, match=r"refuses the worker's connections .*andshake"):
            await _start(engine, "--tls-dir", str(stranger), "--client", "dynamo")
        with pytest.raises(SystemExit, match=r"requires an identity \(--require-identity\): give --client"):
            await _start(engine, "--tls-dir", str(authority.issue("dynamo")))


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (["--client", "dynamo"], "--client needs --tls-dir"),
        (["--engine-tls-name", "engine"], "--engine-tls-name needs --tls-dir"),
        (["--tls-dir", "{half}"], f"no {KEY}"),
    ],
)
def test_half_set_flags_refuse_to_start(tmp_path, flags, refusal):
    half = Authority(tmp_path / "certs").issue("dynamo")
    (half / KEY).unlink()
    args = make_parser().parse_args([flag.format(half=half) for flag in flags])
    with pytest.raises(SystemExit, match=refusal):
        hop.check(args)
