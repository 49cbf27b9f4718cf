"""Certificates for a secure local stack: one throwaway CA, a certificate per piece, made with the openssl CLI.

Each piece gets a directory with `tls.crt`, `tls.key` and the CA as `ca.crt` (the layout of a Kubernetes TLS
Secret with its CA), valid for localhost and 127.0.0.1. `rotate()` replaces a directory's pair in place the way
Kubernetes does (new files moved over the old), which Envoy and the services pick up without a restart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CERT, KEY, CA = "tls.crt", "tls.key", "ca.crt"
SANS = "DNS:localhost,IP:127.0.0.1"
DAYS = "30"


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the secure stack makes its certificates with the openssl command; install openssl")
    subprocess.run([openssl, *args], check=True, capture_output=True)


def _key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", str(path))
    path.chmod(0o600)


class Authority:
    """A CA in `root` (ca.crt, ca.key) that issues certificate directories under it."""

    def __init__(self, root: Path, name: str = "scaleout dev CA"):
        self.root = root
        self.cert, self.key = root / CA, root / "ca.key"
        if not self.cert.exists():
            root.mkdir(parents=True, exist_ok=True)
            _key(self.key)
            _openssl(
                "req", "-x509", "-new", "-key", str(self.key), "-out", str(self.cert), "-days", DAYS,
                "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            )  # fmt: skip

    def issue(self, name: str, sans: str = SANS) -> Path:
        """`root/name/` with tls.crt, tls.key (server and client use) and ca.crt."""
        directory = self.root / name
        directory.mkdir(parents=True, exist_ok=True)
        self._write_pair(directory, name, sans)
        shutil.copyfile(self.cert, directory / CA)
        return directory

    def rotate(self, directory: Path, sans: str = SANS) -> None:
        """A new pair for `directory`, moved over the old one (as a Secret update is)."""
        with tempfile.TemporaryDirectory(dir=self.root) as staging:
            self._write_pair(Path(staging), directory.name, sans)
            for name in (KEY, CERT):
                os.replace(Path(staging) / name, directory / name)

    def _write_pair(self, directory: Path, name: str, sans: str) -> None:
        key, csr = directory / KEY, directory / "tls.csr"
        _key(key)
        _openssl("req", "-new", "-key", str(key), "-out", str(csr), "-subj", f"/CN={name}")
        extensions = directory / "ext.cnf"
        extensions.write_text(
            f"subjectAltName={sans}\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n"
        )
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self.key), "-CAcreateserial",
            "-out", str(directory / CERT), "-days", DAYS, "-extfile", str(extensions),
        )  # fmt: skip
        csr.unlink()
        extensions.unlink()
