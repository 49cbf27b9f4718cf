"""mTLS certificates rotate without a restart (scaleout_common.tls, scaleout_common.channels): real servers on
loopback with the production bootstrap and certificates from a throwaway CA (devstack/certs.py).

A service serves a replaced certificate, and trusts a CA added to `ca.crt`, on the next connection; a channel
presents its replaced certificate on the next call while calls already running finish on the old one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from pathlib import Path

import grpc
import pytest

from devstack.certs import CA, CERT, KEY, Authority
from scaleout_common import channels, tls
from scaleout_common.config import server_parser
from scaleout_common.server import serve
from tests.serving import NoLifecycle

SERVICE = "test.Peer"
WHO = f"/{SERVICE}/Who"


def _identity(payload: bytes) -> bytes:
    return payload


class Peer(NoLifecycle):
    """Answers with the certificate its caller presented (PEM); b"slow" answers after a while."""

    service_names = (SERVICE,)

    def register(self, server):
        async def who(request: bytes, context) -> bytes:
            if request == b"slow":
                await asyncio.sleep(1.5)
            return context.auth_context()["x509_pem_cert"][0]

        handler = grpc.unary_unary_rpc_method_handler(
            who, request_deserializer=_identity, response_serializer=_identity
        )
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Who": handler})])


@pytest.fixture(autouse=True)
def _plaintext_after():
    yield
    tls.configure(None)  # serve() and the channel test set this process's credentials


@contextlib.asynccontextmanager
async def serving_tls(directory: Path):
    """Peer served by the production bootstrap with --tls-dir `directory`; yields its port."""
    flags = ["--port", "0", "--metrics-port", "-1", "--drain-grace-s", "1", "--tls-dir", str(directory)]
    args = server_parser("peer", 0, "peer").parse_args(flags)
    stop, bound = asyncio.Event(), asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(Peer(), args, stop=stop, listening=bound.set_result))
    port = await asyncio.wait_for(asyncio.shield(bound), 30)
    try:
        yield port
    finally:
        stop.set()
        await task


def _secure(port: int, client: Path) -> grpc.aio.Channel:
    """A fresh channel (its own connection) presenting `client`'s certificate and trusting its ca.crt."""
    credentials = grpc.ssl_channel_credentials(
        (client / CA).read_bytes(), (client / KEY).read_bytes(), (client / CERT).read_bytes()
    )
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=[("grpc.use_local_subchannel_pool", 1)])


async def _who(port: int, client: Path) -> bytes:
    async with _secure(port, client) as channel:
        return await channel.unary_unary(WHO)(b"", timeout=10, wait_for_ready=False)


def _served_certificate(port: int, client: Path) -> bytes:
    """The certificate a new TLS connection is served (DER)."""
    context = ssl.create_default_context(cafile=str(client / CA))
    context.load_cert_chain(str(client / CERT), str(client / KEY))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as connection,
    ):
        served = connection.getpeercert(binary_form=True)
    assert served is not None
    return served


def _der(directory: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert((directory / CERT).read_text())


def _trust(directory: Path, *authorities: Authority) -> None:
    """Replace `directory`'s ca.crt with these CAs (one bundle), as a Secret update does."""
    staged = directory / "ca.crt.new"
    staged.write_bytes(b"".join(authority.cert.read_bytes() for authority in authorities))
    os.replace(staged, directory / CA)


async def test_a_service_serves_its_replaced_certificate_on_the_next_connection(tmp_path):
    authority = Authority(tmp_path / "ca")
    served, client = authority.issue("peer-0"), authority.issue("client")
    async with serving_tls(served) as port:
        first = await asyncio.to_thread(_served_certificate, port, client)
        assert first == _der(served)

        authority.rotate(served)
        assert await asyncio.to_thread(_served_certificate, port, client) == _der(served) != first
        assert await _who(port, client) == (client / CERT).read_bytes()

        # A key moved in before its certificate: gRPC refuses the mismatched pair and keeps the last good one.
        before = _der(served)
        staging = authority.issue("staging")
        os.replace(staging / KEY, served / KEY)
        assert await asyncio.to_thread(_served_certificate, port, client) == before
        os.replace(staging / CERT, served / CERT)
        assert await asyncio.to_thread(_served_certificate, port, client) == _der(served) != before


async def test_a_client_certificate_from_a_new_ca_is_trusted_once_ca_crt_holds_it(tmp_path):
    old, new = Authority(tmp_path / "old"), Authority(tmp_path / "new", name="next CA")
    served, client = old.issue("peer-0"), old.issue("client")
    newcomer = new.issue("newcomer")
    _trust(newcomer, old)  # it verifies the service, whose certificate is still the old CA's
    async with serving_tls(served) as port:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _who(port, newcomer)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

        _trust(served, old, new)
        assert await _who(port, newcomer) == (newcomer / CERT).read_bytes()
        assert await _who(port, client) == (client / CERT).read_bytes(), "the old CA's certificates still work"

        _trust(served, new)
        with pytest.raises(grpc.aio.AioRpcError):
            await _who(port, client)


async def test_a_channel_presents_its_replaced_certificate_on_the_next_call(tmp_path, monkeypatch):
    monkeypatch.setattr(channels, "CHECK_S", 0.0)
    old, new = Authority(tmp_path / "old"), Authority(tmp_path / "new", name="next CA")
    served, front = old.issue("peer-0"), old.issue("front")
    _trust(served, old, new)
    async with serving_tls(served) as port:
        tls.configure(str(front))  # the calling process's own directory (serve() configured the service's)
        channel = channels.open_channel(f"127.0.0.1:{port}")
        who = channel.unary_unary(WHO)  # held, as a stub holds it
        first = (front / CERT).read_bytes()
        assert await who(b"", timeout=10) == first
        running = asyncio.ensure_future(who(b"slow", timeout=10))
        await asyncio.sleep(0.2)

        new.rotate(front)  # a new pair from another CA: only a new connection can present it
        assert await who(b"", timeout=10) == (front / CERT).read_bytes() != first
        assert await running == first, "a call in flight finishes on the channel it started on"
        await channel.close()
