"""Run a peer project's own API test suite against our stack, and count what passes, file by file.

`python -m bench.peers.run --suite vllm-openai` copies the suite's test files out of the peer's source tree (never
committed here) into a temporary directory, puts the suite's shim in place of the peer's server launcher, runs
pytest there and prints passed / failed / skipped / errors per file (and the skip reasons). Each suite is one row
of SUITES: where its tree comes from, which files run, which of its files are replaced by our shim modules.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.peers.sglang_shim import suite as sglang_suite
from bench.peers.vllm_shim import pooling_suite as vllm_pooling
from bench.peers.vllm_shim import suite as vllm_suite

REPO = Path(__file__).resolve().parents[2]
PEERS_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scaleout" / "peers"


@dataclass(frozen=True)
class Suite:
    source: Path  # the peer's source tree (holds tests/); how to get it: `how`
    how: str
    files: tuple[str, ...]  # test files, relative to source
    support: tuple[str, ...] = ()  # the peer's own helper files the tests import, copied as they are
    shims: dict[str, str] = field(default_factory=dict)  # staged path -> our module re-exported there
    renamed: dict[str, str] = field(default_factory=dict)  # the peer's helper files staged elsewhere: path -> staged
    marker: str = "tests"  # a folder every source tree of the peer has
    # Called with the staged directory, the staged test files and the pytest run's environment, to add to either.
    prepare: Callable[[Path, list[Path], dict[str, str]], None] | None = None
    pytest_ini: str = "[pytest]\nasyncio_default_fixture_loop_scope = function\ntimeout = 900\n"


SUITES: dict[str, Suite] = {
    "vllm-openai": Suite(
        source=PEERS_CACHE / "vllm-0.33.0",
        how=vllm_suite.HOW,
        files=vllm_suite.FILES,
        support=vllm_suite.SUPPORT,
        shims=vllm_suite.SHIMS,
        prepare=vllm_suite.prepare,
    ),
    "vllm-pooling": Suite(
        source=PEERS_CACHE / "vllm-0.33.0",
        how=vllm_suite.HOW,
        files=vllm_pooling.FILES,
        support=vllm_pooling.SUPPORT,
        shims=vllm_suite.SHIMS,
        prepare=vllm_pooling.prepare,
    ),
    "sglang-srt": Suite(
        source=PEERS_CACHE / "sglang",
        how=sglang_suite.HOW,
        files=sglang_suite.FILES,
        shims=sglang_suite.SHIMS,
        renamed=sglang_suite.RENAMED,
        marker=sglang_suite.MARKER,
        pytest_ini=sglang_suite.PYTEST_INI,
    ),
}


def stage(suite: Suite, source: Path, files: list[str], into: Path) -> None:
    """Copy the chosen files with every package's __init__.py above them, then the support files and shims."""
    for rel in [*files, *suite.support]:
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, target)
        for parent in Path(rel).parents:
            init = source / parent / "__init__.py"
            if parent != Path(".") and init.is_file() and not (into / parent / "__init__.py").exists():
                shutil.copy2(init, into / parent / "__init__.py")
    for rel, staged in suite.renamed.items():
        (into / staged).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, into / staged)
    for rel, module in suite.shims.items():
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        (into / rel).write_text(f"from {module} import *  # noqa: F403 (scaleout's shim)\n")
    (into / "pytest.ini").write_text(suite.pytest_ini)


def counts(junit: Path) -> tuple[dict[str, Counter], Counter]:
    """Per file: passed / failed / error / skipped; and the skip and failure reasons' first lines."""
    per_file: dict[str, Counter] = defaultdict(Counter)
    reasons: Counter = Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("file") or case.get("classname", "?")
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                message = (child.get("message") or "").splitlines()[0][:160] if child.get("message") else ""
                reasons[f"{outcome}: {message}"] += 1
        per_file[name][outcome] += 1
    return per_file, reasons


def report(per_file: dict[str, Counter], reasons: Counter) -> None:
    total: Counter = Counter()
    print(f"\n{'file':<70} {'pass':>5} {'fail':>5} {'err':>5} {'skip':>5}")
    for name in sorted(per_file):
        c = per_file[name]
        total.update(c)
        print(f"{name:<70} {c['passed']:>5} {c['failed']:>5} {c['error']:>5} {c['skipped']:>5}")
    print(f"{'total':<70} {total['passed']:>5} {total['failed']:>5} {total['error']:>5} {total['skipped']:>5}")
    print("\nreasons (skips, failures, errors):")
    for reason, n in reasons.most_common():
        print(f"  {n:>4}  {reason}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--suite", choices=sorted(SUITES), required=True)
    parser.add_argument("--src", type=Path, default=None, help="the peer's source tree (default: the suite's)")
    parser.add_argument("--files", nargs="+", default=None, help="a subset of the suite's files (substrings)")
    parser.add_argument("--keep", action="store_true", help="keep the staged directory and the stack logs")
    parser.add_argument("--junit", type=Path, default=None, help="also keep the JUnit XML here")
    args, pytest_args = parser.parse_known_args(argv)
    suite = SUITES[args.suite]
    source = args.src or suite.source
    if not (source / suite.marker).is_dir():
        raise SystemExit(f"no peer source tree at {source}: {suite.how}")
    files = [f for f in suite.files if not args.files or any(s in f for s in args.files)]
    staged = Path(tempfile.mkdtemp(prefix=f"peers-{args.suite}-"))
    stage(suite, source, files, staged)
    junit = args.junit or staged / "junit.xml"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(staged), str(REPO)])}
    env.setdefault("SCALEOUT_PEER_LOGS", str(staged / "logs"))
    env.setdefault("HF_HUB_OFFLINE", "1")
    if suite.prepare is not None:
        suite.prepare(staged, [staged / f for f in files], env)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "junit_family=xunit1"]
    command += ["--continue-on-collection-errors"]
    command += [f"--junitxml={junit}", "-q", "-rfEs", *pytest_args, *files]
    print("staged in", staged, "\n$", " ".join(command), flush=True)
    subprocess.run(command, check=False, cwd=staged, env=env)
    report(*counts(junit))
    if not args.keep:
        shutil.rmtree(staged, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
