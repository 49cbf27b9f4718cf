"""scaleout-engine: token-in/token-out generation with continuous batching."""

from engine_svc.serving.flags import add_engine_flags
from engine_svc.serving.service import EngineService
from engine_svc.serving.weight_transfer import add_flags as add_weight_transfer_flags
from scaleout_common.config import server_parser
from scaleout_common.server import run


def make_parser():
    parser = server_parser("engine", 50052, __doc__ or "")
    add_engine_flags(parser)
    add_weight_transfer_flags(parser)
    return parser


def main() -> None:
    args = make_parser().parse_args()
    run(EngineService(args), args)


if __name__ == "__main__":
    main()
