"""mTLS between the hops: a service's certificate, key and CA from one directory (--tls-dir).

With --tls-dir set, a service serves gRPC over TLS and requires a client certificate issued by `ca.crt`
(only the gateway and the one-hop service hold one), and every channel it opens (the one-hop service's calls
through the gateway) presents the same certificate and verifies the peer against the same CA. The directory
holds `tls.crt`, `tls.key` and `ca.crt`: a Kubernetes TLS Secret with its CA. Certificates are read at start-up;
a rotated Secret takes effect on the rolling restart that follows it (the gateway's own certificate, which
faces clients, is reloaded live: gateway/edge.py).

Kubelet's gRPC probes cannot speak TLS, so with TLS on, `--health-port` serves grpc.health.v1 alone in
plaintext (it says SERVING or NOT_SERVING and nothing else).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

CERT, KEY, CA = "tls.crt", "tls.key", "ca.crt"


@dataclass(frozen=True)
class Credentials:
    cert: bytes
    key: bytes
    ca: bytes

    @classmethod
    def load(cls, directory: str) -> Credentials:
        root = Path(directory)
        return cls((root / CERT).read_bytes(), (root / KEY).read_bytes(), (root / CA).read_bytes())

    def server(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key, self.cert)], root_certificates=self.ca, require_client_auth=True)

    def channel(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert
        )


_process: Credentials | None = None


def configure(directory: str | None) -> Credentials | None:
    """This process's credentials (None: plaintext), for its server and every channel it opens."""
    global _process
    _process = Credentials.load(directory) if directory else None
    return _process


def current() -> Credentials | None:
    return _process
