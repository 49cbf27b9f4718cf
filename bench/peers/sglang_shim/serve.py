"""The process popen_launch_server starts: the whole stack on loopback (devstack), on the gateway port given,
serving our model (SCALEOUT_PEER_MODEL, default the embedded SmolLM2-135M-Instruct) under the name the test asked
for, until SIGTERM (then it stops every child). `--ready-file` is written once every piece serves: the
gateway answers some routes (render's) before the engine has loaded."""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

from devstack.stack import Stack, StackConfig


def main() -> None:
    parser = argparse.ArgumentParser(prog="sglang_shim.serve")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--log-dir", type=Path, default=None)
    parser.add_argument("--ready-file", type=Path, required=True, help="written once every piece serves")
    args = parser.parse_args()
    config = StackConfig(
        port=args.port,
        model=os.environ.get("SCALEOUT_PEER_MODEL") or None,
        service_args={"render": ["--served-model-name", args.served_model_name]},
        log_dir=args.log_dir,
    )
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with Stack(config):
            args.ready_file.write_text("ready\n")
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
