"""Drain the gateway before it stops: no stream in flight is cut (python -m gateway.drain, deploy/'s preStop hook;
devstack.stack's stop path).

Envoy exits at once on SIGTERM, cutting every request in flight (9 of them, 6 SSE streams silently, when this was
measured). So before the signal, through Envoy's admin interface:
1. `/healthcheck/fail`: load balancers that probe the gateway see it failing and stop sending;
2. `/drain_listeners?graceful`: every connection is told to go once its requests are done (HTTP/1.1
   `connection: close`, HTTP/2 GOAWAY); listeners keep accepting meanwhile (Envoy runs with `ENVOY_DRAIN_ARGS`:
   every connection told at once, listeners open for longer than any wait), so a hop of the one-hop service that
   needs a new connection still gets one;
3. wait until no request is in flight on any listener, or the deadline: then the signal cuts nothing.
"""

from __future__ import annotations

import argparse
import time
import urllib.request

# Envoy's flags for this drain: every connection told at once; listeners open for an hour (the signal ends it).
ENVOY_DRAIN_ARGS = ("--drain-strategy", "immediate", "--drain-time-s", "3600")


def in_flight(admin: str) -> int:
    """Requests in flight on the gateway's listeners (Envoy's own admin listener not counted)."""
    text = urllib.request.urlopen(f"{admin}/stats?filter=downstream_rq_active$", timeout=5).read().decode()
    return sum(
        int(value)
        for name, _, value in (line.partition(": ") for line in text.splitlines())
        if name.startswith("http.") and not name.startswith("http.admin.") and value.isdigit()
    )


def drain(admin: str, timeout_s: float, poll_s: float = 0.2) -> int:
    """Steps 1-3 above; the requests still in flight when it returns (0 unless the deadline passed)."""
    for path in ("/healthcheck/fail", "/drain_listeners?graceful"):
        urllib.request.urlopen(urllib.request.Request(admin + path, method="POST"), timeout=5).read()
    deadline = time.monotonic() + timeout_s
    while (left := in_flight(admin)) and time.monotonic() < deadline:
        time.sleep(poll_s)
    return left


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--admin", default="http://127.0.0.1:9901", help="Envoy's admin interface")
    parser.add_argument("--timeout-s", type=float, default=100.0, help="longest wait for requests in flight")
    args = parser.parse_args()
    left = drain(args.admin, args.timeout_s)
    print(f"drained: {left} requests still in flight", flush=True)


if __name__ == "__main__":
    main()
