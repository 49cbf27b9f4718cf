"""Loaded by the copied tree's `tests/conftest.py` (in place of vLLM's, which needs a GPU build of vLLM): vLLM's
markers, its HF embedding reference (hf_runner.py), and LoRA adapters of the test's model, which offline runs
never download, kept out (their cases skipped, naming the adapter; an adapter folder that is here is served:
serve_args.py).
The model names themselves resolve offline to our model (hf_alias.py, set up by the runner)."""

from __future__ import annotations

import pytest
import vllm.transformers_utils.repo_utils
from huggingface_hub.errors import LocalEntryNotFoundError

from bench.peers.vllm_shim.hf_runner import HfRunner, hf_runner  # noqa: F401 (vLLM's conftest's, for the tests)
from bench.peers.vllm_shim.local_assets import LocalAssetServer, local_asset_server  # noqa: F401 (the same)
from bench.peers.vllm_shim.server import UNSERVED_ADAPTERS


def pytest_configure(config: pytest.Config) -> None:
    for marker in ("slow_test", "skip_global_cleanup", "core_model", "cpu_model", "cpu_test", "split", "optional"):
        config.addinivalue_line("markers", marker)


_hf_api = vllm.transformers_utils.repo_utils.hf_api


class _NoAdapters:
    """vLLM's hub client, but LoRA fixtures' downloads (offline here, not in the cache) get a path that holds nothing,
    so those adapters are not served (the cases naming them are skipped)."""

    def snapshot_download(self, repo_id: str, **kwargs) -> str:
        try:  # a model name: the offline cache's snapshot (hf_alias)
            return _hf_api().snapshot_download(repo_id, **kwargs)
        except LocalEntryNotFoundError:
            return f"/unavailable/{repo_id}"

    def __getattr__(self, name: str):
        return getattr(_hf_api(), name)


vllm.transformers_utils.repo_utils.hf_api = _NoAdapters


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    named = [v for v in params.values() if isinstance(v, str) and v in UNSERVED_ADAPTERS]
    if named:
        pytest.skip(f"LoRA adapter {named[0]}: its folder is not available offline (a hub download)")
