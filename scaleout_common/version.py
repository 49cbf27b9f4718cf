"""scaleout's version, as the package metadata has it (pyproject.toml): what `/version` and the router faces
report (vLLM's `{"version": ...}`, SGLang's `version`)."""

from __future__ import annotations

from importlib import metadata

try:
    VERSION = metadata.version("scaleout")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    VERSION = "0.0.0+unknown"
