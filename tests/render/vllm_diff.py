"""A broad differential run of our vLLM render routes against vLLM 0.33's own (run by hand, not by CI):

    python -m tests.render.vllm_diff [--vllm ~/.cache/scaleout/peers/vllm-0.33.0/bin/vllm] [--only WORD] [--show N]

starts `vllm launch render` (as `record_vllm_render.py` does: the default model, hermes tool calls) and our render
server (`python -m render_svc --http-port P`) once each, posts every generated case (`vllm_diff_cases.py`: every
field of vLLM's two request models at valid, edge and invalid values, crossed with message shapes, tools and
prompt forms) to both, and compares them as `vllm_compare.differences` does (status, token ids, every field vLLM
prints). A case whose difference is this deployment's on purpose (`on_purpose`: a field refused
where vLLM ignores it, a tool constraint of our own) is counted apart. Prints the counts and each other
difference, grouped by what differs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from render_svc.vllm_render.fields import FIELDS, NO_OP, REFUSED
from scaleout_common.models import resolve_model
from tests.render.record_vllm_render import DEFAULT_VLLM, _free_port, _wait_healthy, post
from tests.render.vllm_compare import differences
from tests.render.vllm_diff_cases import generate
from tests.render.vllm_render_cases import CHAT, MODEL, Case

FAMILY = re.compile(r"\[\d+\]|\.(gen|echo).*")  # a case's name less its value index and switches
ROOT = Path(__file__).resolve().parents[2]


# Differences by design (docs/render.md "Held against vLLM"): a limit vLLM's render leaves to its engine or its
# serve path, checked here at render (token ids, prompt + max_tokens, choices, logprobs counts, n), a template
# kwarg that has a field of its own, an unknown field at any depth (vLLM ignores it), up to 16 stop strings
# (vLLM's VLLM_MAX_STOP_STRINGS is 4).
ON_PURPOSE_CODES = {"UNSUPPORTED_FIELD", "TOKEN_ID_OUT_OF_VOCAB", "MAX_TOKENS_TOO_LARGE", "TOO_MANY_CHOICES"}
ON_PURPOSE_CODES |= {"RESERVED_TEMPLATE_KWARG"}
BOUNDED_AT_RENDER = {"logprobs", "prompt_logprobs", "top_logprobs", "n"}
MAX_STOP_STRINGS, VLLM_MAX_STOP_STRINGS = 16, 4


def on_purpose(case: Case, theirs: int, ours: int, error: dict) -> bool:
    """Whether this deployment answers `case` otherwise by design (`error`: our error object, {} when none)."""
    stop = case.body.get("stop")
    if theirs == 400 and ours == 200 and isinstance(stop, list):
        return VLLM_MAX_STOP_STRINGS < len(stop) <= MAX_STOP_STRINGS
    if not (theirs == 200 and ours == 400):
        return False
    code, param = error.get("code", ""), error.get("param")
    if code in ON_PURPOSE_CODES or "has no field named" in error.get("message", ""):
        return True
    if code == "INVALID_SAMPLING_PARAM" and param in BOUNDED_AT_RENDER:
        return True
    route = "chat" if case.path == CHAT else "completion"
    for key, value in case.body.items():
        field = FIELDS.get(key)
        if field is None or field.how == REFUSED or field.route not in ("both", route):
            return True
        if field.how == NO_OP and json.dumps(value) not in map(json.dumps, field.values):
            return True
    return False


def _start(argv: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd=ROOT
    )


def _stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vllm", default=str(DEFAULT_VLLM), help="the vllm executable (0.33)")
    parser.add_argument("--only", default="", help="only the cases whose name holds this")
    parser.add_argument("--show", type=int, default=3, help="cases shown per kind of difference")
    args = parser.parse_args()
    cases = [c for c in generate() if args.only in c.name]
    model = str(resolve_model(None))
    theirs_port, ours_port = _free_port(), _free_port()
    flags = ["--served-model-name", MODEL, "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    vllm = _start(
        [args.vllm, "launch", "render", model, "--port", str(theirs_port), *flags],
        {**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
    )
    ours = _start([sys.executable, "-m", "render_svc", "--port", "0", "--http-port", str(ours_port)])
    groups: dict[str, list[str]] = defaultdict(list)
    same = deliberate = 0
    try:
        _wait_healthy(f"http://127.0.0.1:{theirs_port}", vllm)
        _wait_healthy(f"http://127.0.0.1:{ours_port}", ours)
        for case in cases:
            theirs_status, theirs_body = post(f"http://127.0.0.1:{theirs_port}{case.path}", case.body)
            status, body = post(f"http://127.0.0.1:{ours_port}{case.path}", case.body)
            found = differences(case, {"status": theirs_status, "body": theirs_body}, status, body)
            error = body.get("error", {}) if status != 200 and isinstance(body, dict) else {}
            if not found:
                same += 1
            elif on_purpose(case, theirs_status, status, error):
                deliberate += 1
            else:
                theirs_why = theirs_body.get("error", {}).get("message", "") if theirs_status != 200 else ""
                key = "; ".join(sorted({f.split(":")[0] for f in found}))
                if key == "status":  # one group per field or message shape, and the direction
                    key = f"status vLLM {theirs_status} ours {status}: {FAMILY.sub('', case.name)}"
                ours_why = error.get("message", "")[:150]
                groups[key].append(f"{case.name}: {found[:3]} ours: {ours_why} vLLM: {str(theirs_why)[:150]}")
    finally:
        _stop(vllm)
        _stop(ours)
    other = sum(map(len, groups.values()))
    print(f"{len(cases)} cases: {same} the same, {deliberate} differ on purpose, {other} otherwise")
    for key, lines in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"\n[{len(lines)}] {key}")
        for line in lines[: args.show]:
            print(f"  {line}")


if __name__ == "__main__":
    main()
