"""The gateway's edge security: TLS at the listener, mTLS to the services, API keys.

- TLS: the listener's certificate and key are files (`tls.crt`, `tls.key`) in a directory. Envoy reads them
  through SDS from a file it watches, so replacing them (Kubernetes swaps a Secret's files atomically; by
  hand, `mv` the new pair in) rotates the certificate without a restart. With a clients' CA (`ca.crt` in
  `--client-ca-dir`, by default the TLS directory), a client certificate is verified when one is presented;
  clients without one are still served (they authenticate with an API key). The clients' CA is never the hops'
  (the CA of `--mtls-dir`): a certificate given to a client must not pass as a hop at the internal listener or at
  a service, so a config naming one CA for both is refused, and devstack makes two.
- mTLS to the services (`Mtls`): Envoy presents its client certificate to every replica and verifies the
  replica's against the CA; the services refuse any peer without a certificate from that CA.
- The internal listener (`internal_socket`), where the one-hop service sends its hops: the gateway's
  certificate, and a client certificate from the hops' CA required, so that only a hop reaches the listener
  that charges no rate limit.
- API keys (`ApiKeys`): gateway/api_keys.lua, keys re-read from their file while running.

`sds_files()` are the small files Envoy watches for each certificate; whoever writes the config writes them
(devstack does; `python -m gateway.edge` prints them for deploy/).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from gateway.limits import CLIENT_HEADER
from scaleout_common.identity import ADMIN_HEADER
from scaleout_common.reasons import Reason

API_KEYS_LUA = Path(__file__).with_name("api_keys.lua")
# Anyone may reach these without a key: health checks (load balancers, kubelet), the API document and the version
# (`/health` and `/ping` are answered before the key is checked: gateway/envoy_config.py, PROBES).
OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/openapi.json", "/version")
CERT, KEY, CA = "tls.crt", "tls.key", "ca.crt"
SDS_TYPE = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
TLS_SOCKET = "envoy.transport_sockets.tls"


@dataclass
class Tls:
    """TLS at the gateway's listener from `cert_dir` (tls.crt, tls.key; ca.crt to verify client certificates)."""

    cert_dir: str
    verify_clients: bool = False  # the clients' ca.crt is there: verify a client certificate when one is presented
    client_ca_dir: str = ""  # where the clients' ca.crt is ("": cert_dir)

    @property
    def clients_ca(self) -> str:
        return self.client_ca_dir or self.cert_dir


@dataclass
class Mtls:
    """mTLS from Envoy to every replica: Envoy's client certificate and the CA in `cert_dir`."""

    cert_dir: str


@dataclass
class ApiKeys:
    """API keys from `path` ("client_name key [admin]" per line), re-read every `reload_s` seconds."""

    path: str
    reload_s: int = 5

    def lua(self) -> str:
        lua_list = "{" + ", ".join(json.dumps(p) for p in OPEN_PREFIXES) + "}"
        values = {
            "keys_file": self.path,
            "reload_s": str(self.reload_s),
            "client_header": CLIENT_HEADER,
            "admin_header": ADMIN_HEADER,
            "reason": Reason.INVALID_API_KEY.value,
            "open_prefixes": lua_list,
        }
        text = API_KEYS_LUA.read_text()
        for name, value in values.items():
            text = text.replace("{{ " + name + " }}", value)
        return text


@dataclass
class Edge:
    """Everything the gateway's edge needs; `sds_dir` is where the SDS files live (see `sds_files`)."""

    tls: Tls | None = None
    mtls: Mtls | None = None
    api_keys: ApiKeys | None = None
    sds_dir: str = "/etc/envoy/sds"

    def __post_init__(self) -> None:
        if self.tls and self.tls.verify_clients and self.mtls and _same_ca(self.tls.clients_ca, self.mtls.cert_dir):
            raise ValueError(
                "client certificates and hops need separate CAs: a client's certificate would pass as a hop "
                f"({self.tls.clients_ca}/{CA} is the CA of --mtls-dir); give --client-ca-dir a clients' CA"
            )

    def _sds(self, name: str) -> dict:
        return {
            "name": name,
            "sds_config": {
                "path_config_source": {
                    "path": f"{self.sds_dir}/{name}.yaml",
                    "watched_directory": {"path": self.sds_dir},
                },
                "resource_api_version": "V3",
            },
        }

    def downstream_socket(self) -> dict | None:
        if self.tls is None:
            return None
        common = {
            "alpn_protocols": ["h2", "http/1.1"],
            "tls_certificate_sds_secret_configs": [self._sds("gateway_cert")],
        }
        if self.tls.verify_clients:
            common["validation_context_sds_secret_config"] = self._sds("gateway_client_ca")
        return {
            "name": TLS_SOCKET,
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                "require_client_certificate": False,
                "common_tls_context": common,
            },
        }

    def internal_socket(self) -> dict | None:
        """The internal listener's TLS: the gateway's certificate; a client certificate from the hops' CA required."""
        if self.tls is None:
            return None
        if self.mtls is None:
            raise ValueError("behind TLS, the internal listener verifies hops against the hops' CA: set --mtls-dir")
        return {
            "name": TLS_SOCKET,
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                "require_client_certificate": True,
                "common_tls_context": {
                    "alpn_protocols": ["h2"],
                    "tls_certificate_sds_secret_configs": [self._sds("gateway_cert")],
                    "validation_context_sds_secret_config": self._sds("upstream_ca"),
                },
            },
        }

    def upstream_socket(self) -> dict | None:
        if self.mtls is None:
            return None
        return {
            "name": TLS_SOCKET,
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "common_tls_context": {
                    "alpn_protocols": ["h2"],
                    "tls_certificate_sds_secret_configs": [self._sds("upstream_cert")],
                    "validation_context_sds_secret_config": self._sds("upstream_ca"),
                },
            },
        }

    def sds_files(self) -> dict[str, str]:
        """SDS file name -> content: one secret each, pointing at the certificate files (which Envoy watches)."""
        secrets = {}
        if self.tls is not None:
            secrets["gateway_cert"] = _certificate(self.tls.cert_dir)
            if self.tls.verify_clients:
                secrets["gateway_client_ca"] = _validation(self.tls.clients_ca)
        if self.mtls is not None:
            secrets["upstream_cert"] = _certificate(self.mtls.cert_dir)
            secrets["upstream_ca"] = _validation(self.mtls.cert_dir)
        return {
            f"{name}.yaml": json.dumps({"resources": [{"@type": SDS_TYPE, "name": name, **secret}]}, indent=1) + "\n"
            for name, secret in secrets.items()
        }

    def write_sds(self) -> None:
        files = self.sds_files()
        if files:
            Path(self.sds_dir).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (Path(self.sds_dir) / name).write_text(text)

    @classmethod
    def add_arguments(cls, parser) -> None:
        parser.add_argument("--tls-dir", default="", help="gateway TLS: directory with tls.crt, tls.key (ca.crt)")
        parser.add_argument(
            "--client-ca-dir", default="", help="the clients' CA (ca.crt) for client certificates: not the hops' CA"
        )
        parser.add_argument("--mtls-dir", default="", help="mTLS to the services: Envoy's tls.crt, tls.key, ca.crt")
        parser.add_argument("--api-keys", default="", help="API keys file: 'client_name key [admin]' per line")
        parser.add_argument("--sds-dir", default="/etc/envoy/sds", help="where the SDS files for the certificates are")

    @classmethod
    def from_args(cls, args) -> Edge:
        clients_ca = args.client_ca_dir or args.tls_dir
        tls = Tls(args.tls_dir, (Path(clients_ca) / CA).exists(), args.client_ca_dir) if args.tls_dir else None
        return cls(
            tls=tls,
            mtls=Mtls(args.mtls_dir) if args.mtls_dir else None,
            api_keys=ApiKeys(args.api_keys) if args.api_keys else None,
            sds_dir=args.sds_dir,
        )


def _same_ca(one: str, other: str) -> bool:
    """The same directory, or two CA files with the same bytes."""
    if Path(one).resolve() == Path(other).resolve():
        return True
    files = (Path(one) / CA, Path(other) / CA)
    return all(f.is_file() for f in files) and files[0].read_bytes() == files[1].read_bytes()


def _certificate(cert_dir: str) -> dict:
    return {
        "tls_certificate": {
            "certificate_chain": {"filename": f"{cert_dir}/{CERT}"},
            "private_key": {"filename": f"{cert_dir}/{KEY}"},
            "watched_directory": {"path": cert_dir},
        }
    }


def _validation(cert_dir: str) -> dict:
    return {
        "validation_context": {
            "trusted_ca": {"filename": f"{cert_dir}/{CA}"},
            "watched_directory": {"path": cert_dir},
        }
    }


def main() -> None:
    """Write (or print) the SDS files for the given certificate directories, e.g. for deploy/sds/."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    Edge.add_arguments(parser)
    parser.add_argument("--verify-clients", action="store_true", help="the TLS directory has ca.crt")
    parser.add_argument("--write", default="", help="directory to write the files to (default: print them)")
    args = parser.parse_args()
    edge = Edge.from_args(args)
    if edge.tls is not None:
        edge.tls.verify_clients = args.verify_clients
    for name, text in edge.sds_files().items():
        if args.write:
            Path(args.write).mkdir(parents=True, exist_ok=True)
            (Path(args.write) / name).write_text(text)
        else:
            print(f"# {name}\n{text}", end="")


if __name__ == "__main__":
    main()
