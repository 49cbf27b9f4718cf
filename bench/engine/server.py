"""The engine server for the bench: the real EngineService on a bench model (python -m bench.engine.server):
a random-weight `--shape` (bench/engine/shapes.py), or a model folder (`--model DIR`, loaded as the engine loads
it, tokenizer included)."""

from __future__ import annotations

import functools

from bench.engine.shapes import build_model
from engine_svc.__main__ import make_parser
from engine_svc.serving.loader import build_engine, load_engine, pick_device, pick_dtype
from engine_svc.serving.service import EngineService
from scaleout_common.server import run


def build(args):
    """The engine on a bench model (module level: the engine core process builds it from a pickle)."""
    if args.model is not None:
        return load_engine(args)
    device = pick_device(args.device)
    model = build_model(args.shape, str(device), pick_dtype(args.dtype, device))
    return build_engine(model, args, model_name=args.shape, owns_model=True)


def main() -> None:
    parser = make_parser()
    parser.add_argument(
        "--shape", default=None, help="default | llama-1b | llama-8b | qwen3-8b | qwen3-30b-a3b | mistral-7b | ..."
    )
    args = parser.parse_args()
    if args.model is not None and args.shape is not None:
        parser.error("--model DIR serves that folder; --shape NAME a random-weight shape: give one")
    args.shape = args.shape or "default"
    run(EngineService(args, build=functools.partial(build, args)), args)


if __name__ == "__main__":
    main()
