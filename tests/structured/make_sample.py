"""Writes tests/structured/data/jsonschemabench_sample.json: the fixed sample of real schemas the differential
test checks (test_differential.py), drawn from JSONSchemaBench (github.com/guidance-ai/jsonschemabench, data/).

    python -m tests.structured.make_sample --data ~/.cache/scaleout/jsonschemabench/data

Per subset, `--per-subset` schemas drawn with a fixed seed among those under `--max-bytes` whose check (lowering,
compile, walks) takes under `--max-seconds` on the tiny vocabulary: CI time stays small. Refused schemas are
kept in the draw (their refusal is checked too), in the proportion the subset has them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

from tests.structured.differential import check, tiny

OUT = Path(__file__).parent / "data" / "jsonschemabench_sample.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.path.expanduser("~/.cache/scaleout/jsonschemabench/data"))
    parser.add_argument("--per-subset", type=int, default=8)
    parser.add_argument("--max-bytes", type=int, default=6000)
    parser.add_argument("--max-seconds", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=38)
    args = parser.parse_args()
    vocab = tiny()
    sample: dict[str, dict] = {}
    for subset in sorted(os.listdir(args.data)):
        paths = sorted(Path(args.data, subset).glob("*.json"))
        random.Random(f"{args.seed}:{subset}").shuffle(paths)
        picked: dict = {}
        for path in paths:
            if len(picked) == args.per_subset:
                break
            if path.stat().st_size > args.max_bytes:
                continue
            schema = json.loads(path.read_text())
            start = time.perf_counter()
            check(vocab, schema, samples=4)
            if time.perf_counter() - start < args.max_seconds:
                picked[path.name] = schema
        sample[subset] = picked
    OUT.write_text(json.dumps(sample, indent=None, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{sum(map(len, sample.values()))} schemas -> {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
