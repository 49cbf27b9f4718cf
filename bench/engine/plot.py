"""Plot output tok/s against concurrent streams from bench JSON files (python -m bench.engine.plot OUT.png A.json ...)."""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

LABELS = {
    "grpc": "engine via gRPC (client side)",
    "in_process": "engine in process",
    "transformers_generate": "transformers generate (static batch)",
    "transformers_cb": "transformers generate_batch (continuous batching)",
}

COLORS = {"grpc": "C0", "in_process": "C2", "transformers_generate": "C3", "transformers_cb": "C4"}


def main() -> None:
    out, files = sys.argv[1], sys.argv[2:]
    fig, axes = plt.subplots(1, len(files), figsize=(6.5 * len(files), 4.8), squeeze=False)
    for ax, path in zip(axes[0], files):
        with open(path) as f:
            result = json.load(f)
        for name, points in result["tok_s"].items():
            levels = sorted(points, key=int)
            label = LABELS.get(name, name.replace("grpc_interval", "engine via gRPC, stream_interval="))
            ax.plot(
                [int(c) for c in levels],
                [points[c] for c in levels],
                marker="o",
                label=label,
                color=COLORS.get(name, "C1"),
            )
        args = result["args"]
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="concurrent streams",
            ylabel="output tokens / s",
            title=f"{args['shape']} on {result['device_name']} ({args['prompt_len']} in / {args['new_tokens']} out)",
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
