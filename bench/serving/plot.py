"""Output tok/s of every run as a share of its roofline, from bench/serving JSON files (one panel per file).

python -m bench.serving.plot OUT.png results/a.json results/b.json ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def run_label(run: dict) -> str:
    """Two lines of the run's label (`target | dataset | caching | load | shape on device`)."""
    parts = [p.strip() for p in run["label"].split("|")]
    return f"{parts[1]}, {parts[3]}\n{parts[4]}, {parts[2]}"


def main() -> None:
    out, files = sys.argv[1], sys.argv[2:]
    results = [json.loads(Path(f).read_text())["runs"] for f in files]
    height = sum(1.4 + 0.9 * len(runs) for runs in results)
    fig, axes = plt.subplots(len(files), 1, figsize=(9, height), squeeze=False)
    for ax, path, runs in zip(axes[:, 0], files, results):
        labels = [run_label(r) for r in runs]
        measured = [r["output_tok_per_s"] for r in runs]
        bound = [r["roofline"]["output_tok_per_s"] for r in runs]
        rows = range(len(runs))
        ax.barh(list(rows), [m / b for m, b in zip(measured, bound)], height=0.6, color="C0")
        for y, value, best in zip(rows, measured, bound):
            ax.text(value / best, y, f" {value:,.0f} of {best:,.0f} tok/s", va="center", fontsize=8)
        ax.set_yticks(list(rows), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.25)
        ax.axvline(1.0, color="0.5", linewidth=0.8)
        ax.set_xlabel("output tok/s through gRPC (client side), as a share of the roofline")
        ax.set_title(Path(path).name, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
