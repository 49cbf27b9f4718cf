"""The worker's hop to its engine, secured as the project's other hops are (docs/security.md).

- `--tls-dir`: mTLS with the project's layout (tls.crt, tls.key, ca.crt: scaleout_common.tls), the engine
  verified against ca.crt and this worker's certificate presented, followed when the files rotate
  (scaleout_common.channels). `--engine-tls-name` is the name the engine's certificate is checked against when
  `--engine` is an address (default: its host), as the engine's own `--kv-peer-tls-name`.
- `--client NAME`: the identity the gateway sets from an admin key (`x-scaleout-client: NAME`,
  `x-scaleout-admin: true`: scaleout_common.identity), on every call. An engine behind API keys runs with
  `--require-identity` and refuses calls without it; with it the engine scopes the worker's request ids by NAME
  (engine_svc/serving/tenancy.py), apart from every other client's. Admin, because the worker reads the engine's
  load (GetLoad) and its KV events (SubscribeKvEvents), which the engine gives admins only.

Half-set flags refuse to start: a --tls-dir without one of its three files, --engine-tls-name or --client
without --tls-dir (the engine trusts the identity headers because only holders of its CA's certificates reach
it: over plaintext anyone could send them). The KV events and the load come over this hop too, on a channel
of the publishing thread's own (publishing.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import grpc

from scaleout_common import tls
from scaleout_common.channels import open_channel
from scaleout_common.identity import Caller

Metadata = tuple[tuple[str, str], ...]


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tls-dir",
        default=None,
        help="mTLS to the engine: directory with tls.crt, tls.key and ca.crt; present tls.crt, verify the engine "
        "against ca.crt",
    )
    p.add_argument(
        "--engine-tls-name", default=None, help="with --tls-dir: the name the engine's certificate is checked against"
    )
    p.add_argument(
        "--client",
        default=None,
        help="with --tls-dir: the admin identity the worker calls the engine as (x-scaleout-client, "
        "x-scaleout-admin), for an engine behind API keys (--require-identity)",
    )


def check(args: argparse.Namespace) -> None:
    """SystemExit with what is missing when the flags are half-set."""
    if args.tls_dir:
        missing = [name for name in tls.FILES if not (Path(args.tls_dir) / name).is_file()]
        if missing:
            raise SystemExit(f"--tls-dir {args.tls_dir}: no {', '.join(missing)} (it holds {', '.join(tls.FILES)})")
        return
    if args.engine_tls_name:
        raise SystemExit("--engine-tls-name needs --tls-dir (the certificates to reach the engine with)")
    if args.client:
        raise SystemExit(
            "--client needs --tls-dir: an engine trusts the identity headers only over mTLS, from a certificate of "
            "its CA (docs/security.md)"
        )


def connect(args: argparse.Namespace) -> tuple[grpc.aio.Channel, Metadata]:
    """The channel to the engine and the metadata every call on it carries."""
    check(args)
    tls.configure(args.tls_dir)  # this process's credentials: open_channel presents them
    return open_hop(args)


def open_hop(args: argparse.Namespace) -> tuple[grpc.aio.Channel, Metadata]:
    """One more channel over the hop `connect` set up, for another event loop (publishing.py)."""
    channel = open_channel(args.engine, tls_name=args.engine_tls_name)
    return channel, Caller(args.client, admin=args.client is not None).metadata()


def refusal(engine: str, error: grpc.aio.AioRpcError) -> str:
    """Why the engine at `engine` refused the worker's start, and the flag that fixes it."""
    details = (error.details() or "")[:300]
    if error.code() == grpc.StatusCode.UNAUTHENTICATED:
        return f"the engine at {engine} requires an identity (--require-identity): give --client NAME ({details})"
    return f"the engine at {engine} refused the worker: {error.code().name} {details}"


def mismatch(args: argparse.Namespace, details: str) -> str:
    """A listener at --engine that refuses this worker's connections at the TLS layer."""
    mine = f"mTLS with the certificates in --tls-dir {args.tls_dir}" if args.tls_dir else "plaintext (no --tls-dir)"
    return (
        f"the engine at {args.engine} refuses the worker's connections ({details}): the worker speaks {mine}; an "
        "engine with --tls-dir takes a certificate from its CA, one without it plaintext"
    )
