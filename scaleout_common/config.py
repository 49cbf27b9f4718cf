"""Command-line flags with environment-variable equivalents: --max-batch-size <-> SCALEOUT_MAX_BATCH_SIZE.

A flag given on the command line wins over the environment, which wins over the default.
"""

from __future__ import annotations

import argparse
import os


class EnvArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose long options default to $SCALEOUT_<OPTION> when it is set."""

    def __init__(self, *args, env_prefix: str = "SCALEOUT_", **kwargs):
        self.env_prefix = env_prefix
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *names, **kwargs):
        long_names = [n for n in names if n.startswith("--")]
        if long_names:
            env = self.env_prefix + long_names[0][2:].upper().replace("-", "_")
            kwargs["help"] = f"{kwargs.get('help', '')} [env {env}]".strip()
            if env in os.environ:
                raw = os.environ[env]
                if kwargs.get("action") == "store_true":
                    kwargs["default"] = raw.lower() in ("1", "true", "yes", "on")
                else:
                    convert = kwargs.get("type", str)
                    kwargs["default"] = convert(raw)
        return super().add_argument(*names, **kwargs)


def server_parser(service: str, default_port: int, description: str | None) -> EnvArgumentParser:
    """Flags every service shares: where it listens, limits, drain grace, model folder."""
    parser = EnvArgumentParser(prog=f"scaleout-{service}", description=description)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=default_port, help="gRPC port (0: pick a free one)")
    parser.add_argument("--metrics-port", type=int, default=0, help="Prometheus port (0: pick a free one, -1: off)")
    parser.add_argument(
        "--model", default=None, help="local HF model folder (default: the embedded SmolLM2-135M-Instruct)"
    )
    parser.add_argument("--trust-remote-code", action="store_true", help="allow model code from the model folder")
    parser.add_argument(
        "--chat-template",
        default=None,
        help="chat template file (or inline template) overriding the model's; give every service the "
        "same one: the tokenizer fingerprint covers it",
    )
    parser.add_argument("--max-message-mb", type=int, default=64, help="largest gRPC message accepted or sent")
    parser.add_argument("--drain-grace-s", type=float, default=30.0, help="SIGTERM: time in-flight calls get to finish")
    parser.add_argument(
        "--drain-delay-s",
        type=float,
        default=2.5,
        help="SIGTERM: keep serving this long after readiness turns NOT_SERVING (the gateway's health checks "
        "take the replica out meanwhile), then refuse new calls",
    )
    parser.add_argument(
        "--tls-dir",
        default=None,
        help="mTLS: directory with tls.crt, tls.key and ca.crt; serve TLS, require client certificates from "
        "ca.crt, present tls.crt on outgoing calls",
    )
    parser.add_argument(
        "--forward-credentials",
        action="store_true",
        help="pass each caller's API key (authorization, x-api-key) on to the calls made for it: the one-hop "
        "service behind a gateway with API keys",
    )
    parser.add_argument(
        "--require-identity",
        action="store_true",
        help="refuse calls without the identity the gateway sets from an API key (x-scaleout-client): a service "
        "behind a gateway with keys, so that a call reaching it another way is never trusted as an admin's",
    )
    parser.add_argument(
        "--health-port", type=int, default=-1, help="with --tls-dir: plaintext grpc.health.v1 only, for probes"
    )
    parser.add_argument("--log-level", default="INFO", help="logging level")
    parser.add_argument(
        "--log-format",
        default="json",
        choices=["json", "text"],
        help="stderr logs: JSON lines (with trace_id/span_id inside a span) or plain text",
    )
    return parser
