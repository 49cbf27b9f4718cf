"""scaleout-render: the render service (python -m render_svc --help)."""

from render_svc import flags
from render_svc.service import RenderService
from scaleout_common.server import run


def main() -> None:
    args = flags.parser().parse_args()
    run(RenderService(args), args)


if __name__ == "__main__":
    main()
