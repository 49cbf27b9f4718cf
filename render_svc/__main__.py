"""scaleout-render: the render service (python -m render_svc --help)."""

import os

from render_svc import flags
from render_svc.service import RenderService
from scaleout_common.server import run


def main() -> None:
    # The tokenizer's own thread pool (rayon) hands even a one-text encode to a worker and wakes its idle ones:
    # per request that costs more CPU than it saves, and render runs requests in parallel on threads of its own
    # (the Rust encode releases the GIL). Off unless the operator sets it.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = flags.parser().parse_args()
    run(RenderService(args), args)


if __name__ == "__main__":
    main()
