"""A stand-in for vLLM's `tests.utils.RemoteOpenAIServer`, backed by our whole stack (devstack) behind Envoy.

vLLM's tests start `vllm serve <model> <flags>` and talk to it with the official openai SDK. Here the same
constructor starts render, engine, derender, the one-hop service and Envoy on loopback, serving our model
(SCALEOUT_PEER_MODEL, default the embedded SmolLM2-135M-Instruct) under the name the test asks for. The flags are
mapped by `serve_args`; one we do not serve skips the test, naming the flag.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from bench.peers.vllm_shim.serve_args import Unsupported, parse
from devstack.stack import Stack, StackConfig
from render_svc.model import context_length
from scaleout_common.models import resolve_model

# Model names that the running servers were asked to serve as LoRA adapters: a test case that names one is
# skipped (plugin.py), as this stack serves no adapters; the base model's cases run.
UNSERVED_ADAPTERS: set[str] = set()


def _model_len() -> int:
    """The served model's context length, as render reads it from the model's folder."""
    folder = resolve_model(os.environ.get("SCALEOUT_PEER_MODEL") or None)
    config = json.loads((folder / "config.json").read_text())
    return context_length(config, None)


class RemoteOpenAIServer:
    DUMMY_API_KEY = "token-abc123"

    def __init__(
        self,
        model: str,
        vllm_serve_args: list[str],
        *,
        env_dict: dict[str, str] | None = None,
        seed: int | None = 0,
        auto_port: bool = True,
        max_wait_seconds: float | None = None,
        override_hf_configs: dict[str, Any] | None = None,
    ) -> None:
        if override_hf_configs:
            pytest.skip("override_hf_configs (--hf-overrides): not served by scaleout")
        try:
            runner = os.environ.get("SCALEOUT_PEER_RUNNER") or "auto"  # the suite's (suite.py)
            args = parse(model, list(vllm_serve_args), _model_len(), runner)
        except Unsupported as refused:
            pytest.skip(str(refused))
        self.served_names = args.served_names
        self.show_hidden_metrics = any(a.startswith("--show-hidden-metrics-for-version") for a in vllm_serve_args)
        UNSERVED_ADAPTERS.update(args.lora_names)
        if args.not_served:
            print(f"[vllm_shim] {model}: started without {args.not_served}", file=sys.stderr)
        self.host = "127.0.0.1"
        self.uds = None  # vLLM's --uds (a unix socket): not served, the stack listens on loopback TCP
        log_dir = Path(os.environ.get("SCALEOUT_PEER_LOGS") or tempfile.mkdtemp(prefix="peer-logs-"))
        self._stack = Stack(
            StackConfig(
                port=0,
                model=os.environ.get("SCALEOUT_PEER_MODEL") or None,
                service_args=args.service_args,
                max_logprobs=args.max_logprobs,
                env=dict(env_dict or {}),
                log_dir=log_dir / "-".join(model.split("/")),
                start_timeout_s=max_wait_seconds or 480,
            )
        )
        self._stack.__enter__()  # a start that fails half-way stops what it began
        self.port = self._stack.port

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self._stack.stop()

    @property
    def url_root(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url_for(self, *parts: str) -> str:
        path = "/".join(part.strip("/") for part in parts if part)
        return f"{self.url_root}/{path}"

    def get_client(self, **kwargs) -> openai.OpenAI:
        kwargs.setdefault("timeout", 600)
        return openai.OpenAI(base_url=self.url_for("v1"), api_key=self.DUMMY_API_KEY, max_retries=0, **kwargs)

    def get_async_client(self, **kwargs) -> openai.AsyncOpenAI:
        kwargs.setdefault("timeout", 600)
        return openai.AsyncOpenAI(base_url=self.url_for("v1"), api_key=self.DUMMY_API_KEY, max_retries=0, **kwargs)

    def get_client_anthropic(self, **kwargs) -> anthropic.Anthropic:
        kwargs.setdefault("timeout", 600)
        return anthropic.Anthropic(base_url=self.url_for(), api_key=self.DUMMY_API_KEY, max_retries=0, **kwargs)

    def get_async_client_anthropic(self, **kwargs) -> anthropic.AsyncAnthropic:
        kwargs.setdefault("timeout", 600)
        return anthropic.AsyncAnthropic(base_url=self.url_for(), api_key=self.DUMMY_API_KEY, max_retries=0, **kwargs)
