"""A Node project for the official JS SDKs' tests: `npm install` of one package into a temp dir, through an npm
cache under ~/.cache/scaleout/npm, so later runs install from the cache (and work offline). Skipped, saying why,
without node and npm or when the install fails (offline with a cold cache)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

NPM_CACHE = Path.home() / ".cache" / "scaleout" / "npm"


def node_major() -> int:
    """Node's major version; skips the test without node and npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not (node and npm):
        pytest.skip("node and npm are not installed")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return int(version.lstrip("v").split(".")[0])


def npm_project(folder: Path, spec: str, scripts: dict[str, str]) -> Path:
    """`folder` as an ES-module project with `spec` installed and `scripts` (name -> source) written in it."""
    node_major()
    (folder / "package.json").write_text('{"name": "scaleout-js-test", "private": true, "type": "module"}')
    NPM_CACHE.mkdir(parents=True, exist_ok=True)
    install = ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "--cache", str(NPM_CACHE), spec]
    try:
        done = subprocess.run(install, check=False, cwd=folder, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip(f"`npm install {spec}` took over 300 s (offline?)")
    if done.returncode != 0:
        pytest.skip(f"`npm install {spec}` failed (offline with a cold cache?): {done.stderr.strip()[-500:]}")
    for name, source in scripts.items():
        (folder / name).write_text(source)
    return folder
