"""mTLS between the hops: a service's certificate, key and CA from one directory (--tls-dir), rotated live.

With --tls-dir set, a service serves gRPC over TLS and requires a client certificate issued by `ca.crt`
(only the gateway and the one-hop service hold one), and every channel it opens (the one-hop service's calls
through the gateway) presents the same certificate and verifies the peer against the same CA. The directory
holds `tls.crt`, `tls.key` and `ca.crt`: a Kubernetes TLS Secret with its CA.

Replacing the files rotates them without a restart (a Secret update swaps all three at once; by hand, `mv` the
new files in, the key before the certificate). A change is seen by a stat of each file (inode, mtime, size):
- the server's credentials are grpcio's `dynamic_ssl_server_credentials`, whose fetcher gRPC calls before
  every TLS handshake: a changed directory is read again there, so the next connection is served the new
  certificate and its client verified against the new `ca.crt`. Connections already open keep theirs.
  A key that does not match its certificate (the key moved in, its certificate not yet) is refused by gRPC,
  which keeps serving the last good pair until the next change.
- grpcio has no reloadable channel credentials, so a channel is rebuilt instead (scaleout_common.channels):
  a call that starts after a change goes over a fresh channel made from the new files.

Kubelet's gRPC probes cannot speak TLS, so with TLS on, `--health-port` serves grpc.health.v1 alone in
plaintext (it says SERVING or NOT_SERVING and nothing else).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import grpc

CERT, KEY, CA = "tls.crt", "tls.key", "ca.crt"
FILES = (CERT, KEY, CA)

# (inode, mtime in ns, size) of each file: any change means new contents.
Version = tuple[tuple[int, int, int], ...]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pem:
    cert: bytes
    key: bytes
    ca: bytes


class Credentials:
    """This process's certificate directory, read again whenever its files change."""

    def __init__(self, directory: str):
        self.root = Path(directory)
        self._served: Version | None = None  # what the server's fetcher last handed to gRPC

    def version(self) -> Version:
        """Cheap (a stat per file): compare two to learn whether the files changed in between."""
        stats = [(self.root / name).stat() for name in FILES]
        return tuple((s.st_ino, s.st_mtime_ns, s.st_size) for s in stats)

    def read(self) -> tuple[Version, Pem]:
        version = self.version()  # before reading: a change while reading is seen again at the next check
        cert, key, ca = ((self.root / name).read_bytes() for name in FILES)
        return version, Pem(cert, key, ca)

    def server(self) -> grpc.ServerCredentials:
        """TLS that requires a client certificate from `ca.crt`, both read again when the files change."""
        self._served, pem = self.read()
        # grpcio documents a fetcher's None as "keep the current configuration"; its stubs leave None out.
        fetcher = cast(Callable[[], grpc.ServerCertificateConfiguration], self._fetch)
        return grpc.dynamic_ssl_server_credentials(
            _server_configuration(pem), fetcher, require_client_authentication=True
        )

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's fetcher, called before each handshake: new files, or None to keep the current ones."""
        try:
            if self.version() == self._served:
                return None
            self._served, pem = self.read()
        except OSError as error:  # a file missing in the middle of a swap: keep serving the current ones
            log.warning("certificates in %s unreadable (%s); serving the previous ones", self.root, error)
            return None
        log.info("certificates in %s changed: new connections get them", self.root)
        return _server_configuration(pem)

    def channel(self) -> tuple[Version, grpc.ChannelCredentials]:
        """Channel credentials from the files as they are now, with the version they were read at."""
        version, pem = self.read()
        credentials = grpc.ssl_channel_credentials(
            root_certificates=pem.ca, private_key=pem.key, certificate_chain=pem.cert
        )
        return version, credentials


def _server_configuration(pem: Pem) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration([(pem.key, pem.cert)], root_certificates=pem.ca)


_process: Credentials | None = None


def configure(directory: str | None) -> Credentials | None:
    """This process's credentials (None: plaintext), for its server and every channel it opens."""
    global _process
    _process = Credentials(directory) if directory else None
    return _process


def current() -> Credentials | None:
    return _process
