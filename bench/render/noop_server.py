"""The transport floor for bench_render.py: a bare grpc.aio server whose one method answers at once.

No interceptors, health, reflection or telemetry; the same event loop as scaleout_common.server.run (uvloop).
Prints `LISTENING noop HOST:PORT` like the services.

    python bench/render/noop_server.py
"""

from __future__ import annotations

import grpc
import uvloop

SERVICE, METHOD = "bench.Noop", "Call"


async def answer(request: bytes, context) -> bytes:
    return b""


async def main() -> None:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    handlers = {METHOD: grpc.unary_unary_rpc_method_handler(answer)}  # raw bytes in and out
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
    server.add_registered_method_handlers(SERVICE, handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"LISTENING noop 127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    uvloop.run(main())
