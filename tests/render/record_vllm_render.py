"""Record vLLM's own render server's answer to every case of `vllm_render_cases.py` (run by hand, not by CI):

    python -m tests.render.record_vllm_render [--vllm ~/.cache/scaleout/peers/vllm-0.33.0/bin/vllm] [--new-only]

starts `vllm launch render` on the default model (CPU, the served name and the tool-call parser our render
server has: `hermes`, which it detects from the template), posts each case and writes the status and JSON body
of each answer to `vllm_render_answers.json`, which `test_vllm_render.py` compares ours with. `--new-only` keeps
the answers already recorded and posts only the cases that have none (a re-recording changes every random id).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from scaleout_common.models import resolve_model
from tests.render.vllm_render_cases import CASES, MODEL

ANSWERS = Path(__file__).with_name("vllm_render_answers.json")
DEFAULT_VLLM = Path.home() / ".cache/scaleout/peers/vllm-0.33.0/bin/vllm"
# vLLM's version and the fields of its two request models (the table test holds fields.FIELDS to them)
PEER_FIELDS = """
import json, vllm
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.completion.protocol import CompletionRequest
print(json.dumps([vllm.__version__, {"chat": list(ChatCompletionRequest.model_fields),
                                     "completion": list(CompletionRequest.model_fields)}]))
"""


def post(url: str, body: dict) -> tuple[int, object]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"vllm exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return
        except OSError:
            time.sleep(1)
    raise SystemExit("vllm's render server did not become healthy")


def _dumps(header: dict, answers: dict) -> str:
    """One answer a line, so a re-recording diffs case by case."""
    lines = [f"  {json.dumps(name)}: {json.dumps(answer, ensure_ascii=False)}" for name, answer in answers.items()]
    head = json.dumps(header, ensure_ascii=False)[1:-1]
    return "{" + head + ', "answers": {\n' + ",\n".join(lines) + "\n}}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vllm", default=str(DEFAULT_VLLM), help="the vllm executable (0.33)")
    parser.add_argument("--new-only", action="store_true", help="record only the cases without an answer")
    args = parser.parse_args()
    kept = json.loads(ANSWERS.read_text())["answers"] if args.new_only else {}
    version, fields = json.loads(
        subprocess.run(
            [str(Path(args.vllm).with_name("python")), "-c", PEER_FIELDS], capture_output=True, text=True, check=True
        ).stdout
    )
    port = _free_port()
    flags = ["--served-model-name", MODEL, "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    argv = [args.vllm, "launch", "render", str(resolve_model(None)), "--port", str(port), *flags]
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}
    process = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process)
        answers = {}
        for case in CASES:
            if case.name in kept:
                answers[case.name] = kept[case.name]
                continue
            status, body = post(url + case.path, case.body)
            answers[case.name] = {"status": status, "body": body}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    ANSWERS.write_text(_dumps({"vllm": version, "flags": flags, "fields": fields}, answers))
    ok = sum(1 for a in answers.values() if a["status"] == 200)
    print(f"recorded {len(answers)} answers of vLLM {version} ({ok} answered 200) in {ANSWERS}")


if __name__ == "__main__":
    main()
