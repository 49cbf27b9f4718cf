"""`sglang.test.test_utils` for SGLang's server tests, backed by scaleout.

popen_launch_server starts the whole stack (bench/peers/sglang_shim/serve.py: render, engine, derender, the
one-hop service and Envoy) on the test's URL, serving our model under the name the test asks for, and returns
its Popen, which kill_process_tree stops. A launch flag we do not serve skips the test class naming it
(launch_args.py). `api_key`: the stack checks API keys only with TLS (`--secure`), which an `http://` URL cannot
reach, so the key is not checked here (the tests send it; nothing else changes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from urllib.parse import urlparse

import requests

from bench.peers.sglang_shim.launch_args import Unsupported, check
from devstack.stack import free_port

DEFAULT_MODEL_NAME_FOR_TEST = "meta-llama/Llama-3.1-8B-Instruct"
MODEL_NAME_FOR_TEST = DEFAULT_MODEL_NAME_FOR_TEST
DEFAULT_SMALL_MODEL_NAME_FOR_TEST = "meta-llama/Llama-3.2-1B-Instruct"
DEFAULT_SMALL_CROSS_ENCODER_MODEL_NAME_FOR_TEST = "cross-encoder/ms-marco-MiniLM-L6-v2"
DEFAULT_TIMEOUT_FOR_SERVER_LAUNCH = 600
DEFAULT_PORT_FOR_SRT_TEST_RUNNER = int(os.environ.get("SGLANG_SHIM_PORT") or free_port())
DEFAULT_URL_FOR_TEST = f"http://127.0.0.1:{DEFAULT_PORT_FOR_SRT_TEST_RUNNER}"


def is_in_ci() -> bool:
    return False


def popen_launch_server(
    model: str,
    base_url: str,
    timeout: float = DEFAULT_TIMEOUT_FOR_SERVER_LAUNCH,
    api_key: str | None = None,
    other_args: list[str] | tuple[str, ...] = (),
    env: dict | None = None,
    return_stdout_stderr=None,
    **unused_launch_options,
) -> subprocess.Popen:
    try:
        check(other_args)
    except Unsupported as flag:
        raise unittest.SkipTest(f"not served by scaleout: {flag}") from None
    url = urlparse(base_url)
    logs = Path(os.environ.get("SCALEOUT_PEER_LOGS") or tempfile.mkdtemp(prefix="sglang-shim-"))
    log_dir = logs / f"stack-{url.port}-{time.time_ns()}"  # one per launch: a file's classes launch in turn
    command = [sys.executable, "-m", "bench.peers.sglang_shim.serve", "--port", str(url.port)]
    ready = log_dir / "ready"
    command += ["--served-model-name", model, "--log-dir", str(log_dir), "--ready-file", str(ready)]
    process = subprocess.Popen(command, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the stack exited ({process.returncode}) while starting; logs in {log_dir}")
        if ready.exists():
            return process
        time.sleep(0.5)
    process.terminate()
    raise TimeoutError(f"the stack did not answer within {timeout} s; logs in {log_dir}")


class CustomTestCase(unittest.TestCase):
    def setUp(self):
        print(f"[Test Method] {self._testMethodName}", flush=True)


def run_logprob_check(self: unittest.TestCase, arg: tuple) -> None:
    """One /generate of `input_len` ids (0, 1, ...) and the logprob counts SGLang promises for it: a prompt
    logprob for each prompt position from logprob_start_len, one per output token, top_logprobs_num alternatives
    each, and with temperature 0 the sampled token first among them (or tied with the first)."""
    input_len, output_len, temperature, start, return_logprob, top_n = arg
    body = {
        "input_ids": list(range(input_len)),
        "sampling_params": {"temperature": temperature, "max_new_tokens": output_len, "ignore_eos": True},
        "return_logprob": return_logprob,
        "logprob_start_len": start,
        "top_logprobs_num": top_n,
    }
    meta = requests.post(self.base_url + "/generate", json=body).json()["meta_info"]
    self.assertEqual(meta["prompt_tokens"], input_len)
    self.assertEqual(meta["completion_tokens"], output_len)
    if not return_logprob:
        return
    self.assertEqual(start + len(meta["input_token_logprobs"]), input_len)
    self.assertEqual(len(meta["output_token_logprobs"]), output_len)
    if not top_n:
        return
    self.assertEqual(start + len(meta["input_top_logprobs"]), input_len)
    self.assertEqual(len(meta["output_top_logprobs"]), output_len)
    for sampled, tops in zip(meta["output_token_logprobs"], meta["output_top_logprobs"]):
        self.assertEqual(len(tops), top_n)
        if temperature == 0:
            ties = [list(t) for t in tops if t[0] == tops[0][0]]
            self.assertIn(list(sampled), ties)
