"""scaleout-derender: token ids -> text, reasoning, tool calls and OpenAI-shaped responses."""

from __future__ import annotations

from derender_svc.limits import Limits
from derender_svc.parsers import NONE, REASONING_PARSERS, TOOL_PARSERS
from scaleout_common.config import server_parser
from scaleout_common.server import run


def build_parser():
    parser = server_parser("derender", 50053, __doc__)
    parser.add_argument(
        "--reasoning-parser",
        default="auto",
        choices=["auto", NONE, *REASONING_PARSERS],
        help="default reasoning parser (auto: from the chat template's format, else think when the tokenizer "
        "has <think> tokens)",
    )
    parser.add_argument(
        "--tool-parser",
        default="auto",
        choices=["auto", NONE, *TOOL_PARSERS],
        help="default tool-call parser, used when a request gives tools (auto: from the chat "
        "template's format, hermes when it shows none)",
    )
    defaults = Limits()
    for name in Limits.__dataclass_fields__:
        parser.add_argument(
            "--" + name.replace("_", "-"), type=int, default=getattr(defaults, name), help=name.replace("_", " ")
        )
    return parser


def main() -> None:
    from derender_svc.service import DerenderService

    args = build_parser().parse_args()
    run(DerenderService(args), args)


if __name__ == "__main__":
    main()
