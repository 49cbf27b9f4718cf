"""`scaleout-stack`: the whole stack on loopback with the default model, until Ctrl-C or SIGTERM.

`scaleout-stack --secure` adds TLS at the gateway, mTLS between every hop and API keys (a generated admin key
is printed, or give --api-keys FILE). A child that dies is logged and restarted with backoff.

`scaleout-stack --dynamo-port 8000` also starts NVIDIA Dynamo's frontend on that port, with one Dynamo worker per
engine replica (devstack/dynamo.py, docs/dynamo.md); the engines then run with --kv-events for its KV router.
"""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path

from devstack.dynamo import beside
from devstack.stack import Stack, StackConfig
from gateway.envoy_config import Cors, PrefixRouting
from gateway.limits import Limits
from scaleout_common.config import EnvArgumentParser


def main() -> None:
    parser = EnvArgumentParser(prog="scaleout-stack", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address every piece listens on")
    parser.add_argument("--port", type=int, default=8080, help="gateway port: REST and gRPC")
    parser.add_argument("--admin-port", type=int, default=9901, help="Envoy admin port")
    parser.add_argument(
        "--cors-origins", default="", help="comma-separated origins browsers may call the gateway from; * for any"
    )
    parser.add_argument("--model", default=None, help="local HF model folder (default: embedded SmolLM2-135M-Instruct)")
    for role in ("render", "engine", "derender"):
        parser.add_argument(f"--{role}-replicas", type=int, default=1, help=f"{role}_svc processes behind the gateway")
    parser.add_argument(
        "--max-logprobs",
        type=int,
        default=None,
        help="most top alternatives a request's logprobs or prompt_logprobs may ask for (vLLM's flag; default its 20)",
    )
    parser.add_argument("--secure", action="store_true", help="TLS at the gateway, mTLS between hops, API keys")
    parser.add_argument("--api-keys", default=None, help="with --secure: keys file, 'client key [admin]' per line")
    parser.add_argument(
        "--dynamo-port",
        type=int,
        default=None,
        help="also start NVIDIA Dynamo's frontend on this port (0: a free one), one Dynamo worker per engine replica",
    )
    parser.add_argument(
        "--lora-modules",
        nargs="+",
        default=[],
        help="LoRA adapters to serve (vLLM's name=path or JSON forms): --enable-lora on render and the engines, which "
        "load them; the OpenAI `model` selects one. VLLM_ALLOW_RUNTIME_LORA_UPDATING=true: vLLM's load/unload routes",
    )
    parser.add_argument("--enable-lora", action="store_true", help="LoRA on render and the engines, no adapter yet")
    Limits.add_arguments(parser)
    PrefixRouting.add_arguments(parser)
    args = parser.parse_args()
    service_args: dict[str, list[str]] = {"engine": ["--kv-events"]} if args.dynamo_port is not None else {}
    if args.enable_lora or args.lora_modules:
        for role in ("render", "engine"):
            modules = ["--lora-modules", *args.lora_modules] if args.lora_modules else []
            service_args.setdefault(role, []).extend(["--enable-lora", *modules])
    config = StackConfig(
        host=args.host,
        port=args.port,
        admin_port=args.admin_port,
        cors=Cors.from_list(args.cors_origins),
        model=args.model,
        replicas={
            "render": args.render_replicas,
            "engine": args.engine_replicas,
            "derender": args.derender_replicas,
            "chat": 1,
        },
        limits=Limits.from_args(args),
        prefix_routing=PrefixRouting.from_args(args),
        secure=args.secure,
        api_keys=Path(args.api_keys) if args.api_keys else None,
        supervise=True,
        max_logprobs=args.max_logprobs,
        service_args=service_args,
    )
    # Ctrl-C and SIGTERM stop everything cleanly, even during start-up (and even where a shell started this
    # in the background with SIGINT ignored).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt)
    stack = Stack(config)
    try:
        with (
            stack,
            beside(stack, args.dynamo_port) if args.dynamo_port is not None else contextlib.nullcontext() as dynamo,
        ):
            described = stack.describe() + ("\n" + dynamo.describe() if dynamo else "")
            print("\nscaleout is up:\n" + described + "\nCtrl-C stops everything.", flush=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        if stack.failed:  # the supervisor gave up on a child that kept dying: stop loudly
            raise SystemExit(f"scaleout-stack: {stack.failed}") from None
        print("stopped", flush=True)


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
