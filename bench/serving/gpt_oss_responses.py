"""gpt-oss through the pipeline's Responses route without Envoy: render, engine, derender and the one-hop service
as processes on loopback, called on `ResponsesService.CreateResponse` (the gRPC method Envoy transcodes
`POST /v1/responses` into: the Responses JSON in, the Response or its SSE events out) plainly, streamed and
with a function tool. Counts errors (a gRPC error, an `error` or `response.failed` event, a malformed item).

    python -m bench.serving.gpt_oss_responses --folder DIR --shape gpt-oss-20b --device cuda

DIR is a gpt-oss serving folder (tokenizer, chat template, config.json: `python -m tests.models.gpt_oss DIR`);
the engine serves `--shape` with random weights (bench/engine/server.py), or DIR itself with `--shape folder`
(a folder with weights: the CPU check of this script). No devstack here: the GPU image has no Envoy."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from google.api import httpbody_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaleout.v1 import responses_pb2_grpc

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
ASK = {"input": "What is the weather in Paris?", "max_output_tokens": 64}
ITEM_KINDS = {"message", "reasoning", "function_call"}
_LISTENING = re.compile(r"^LISTENING \S+ (\S+)$", re.M)


def start(name: str, argv: list[str], logs: Path) -> tuple[subprocess.Popen, Path]:
    log = logs / f"{name}.log"
    with log.open("w") as out:
        command = [sys.executable, "-m", *argv, "--port", "0", "--metrics-port", "-1"]
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT), log


def address(process: subprocess.Popen, log: Path, deadline: float) -> str:
    """The process's gRPC address once it reports it and its health check says SERVING."""
    target = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{log.name}: exited with {process.returncode}\n{log.read_text()[-3000:]}")
        found = target or _LISTENING.search(log.read_text())
        if found:
            target = found if isinstance(found, str) else found.group(1)
            with grpc.insecure_channel(target) as channel:
                try:
                    check = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
                    if check.status == health_pb2.HealthCheckResponse.SERVING:
                        return target
                except grpc.RpcError:
                    pass
        time.sleep(0.5)
    raise SystemExit(f"{log.name}: not serving in time\n{log.read_text()[-3000:]}")


def call(stub, body: dict) -> tuple[dict | None, list[dict], str]:
    """(the final Response, the events, an error or "")."""
    request = httpbody_pb2.HttpBody(content_type="application/json", data=json.dumps(body).encode())
    try:
        data = b"".join(chunk.data for chunk in stub.CreateResponse(request, timeout=300))
    except grpc.RpcError as error:
        return None, [], f"gRPC {error.code().name}: {error.details()}"  # pyright: ignore[reportAttributeAccessIssue]
    if not body.get("stream"):
        response = json.loads(data)
        return response, [], "" if response.get("status") in ("completed", "incomplete") else json.dumps(response)
    events = [json.loads(line[5:]) for line in data.decode().splitlines() if line.startswith("data:")]
    bad = [e for e in events if e.get("type") in ("error", "response.failed")]
    last = events[-1] if events else {}
    if bad or last.get("type") not in ("response.completed", "response.incomplete"):
        return None, events, json.dumps(bad or last)[:2000]
    return last["response"], events, ""


def malformed(response: dict) -> str:
    """What is wrong with the Response's output items ("" when nothing)."""
    for item in response.get("output") or []:
        kind = item.get("type")
        if kind not in ITEM_KINDS:
            return f"output item of type {kind!r}"
        if kind == "message" and [part.get("type") for part in item["content"]] != ["output_text"]:
            return f"message content {item['content']!r}"
        if kind == "function_call" and not (item.get("name") and item.get("call_id")):
            return f"function call {item!r}"
    usage = response.get("usage") or {}
    if usage.get("total_tokens") != usage.get("input_tokens", 0) + usage.get("output_tokens", 0):
        return f"usage {usage!r}"
    return ""


def run_calls(target: str, model: str, rounds: int) -> dict:
    asks = {"plain": {}, "streamed": {"stream": True}, "tool": {"tools": [TOOL]}, "tool_streamed": {"tools": [TOOL]}}
    asks["tool_streamed"]["stream"] = True
    results = {"calls": 0, "errors": 0, "items": {}, "first_errors": [], "seconds": 0.0}
    begin = time.monotonic()
    with grpc.insecure_channel(target) as channel:
        stub = responses_pb2_grpc.ResponsesServiceStub(channel)
        for round_ in range(rounds):
            for name, extra in asks.items():
                body = {"model": model, **ASK, **extra, "temperature": 0 if round_ == 0 else 1.0}
                response, _, error = call(stub, body)
                error = error or malformed(response or {})
                results["calls"] += 1
                if error:
                    results["errors"] += 1
                    results["first_errors"] = (results["first_errors"] + [f"{name}: {error}"])[:5]
                for item in (response or {}).get("output") or []:
                    results["items"][item["type"]] = results["items"].get(item["type"], 0) + 1
    results["seconds"] = round(time.monotonic() - begin, 1)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", required=True, help="the serving folder (tokenizer, template, config.json)")
    parser.add_argument("--shape", default="gpt-oss-20b", help="the engine's random-weight shape, or `folder`")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--engine-flags", default="--max-model-len 2048", help="more engine flags")
    parser.add_argument("--rounds", type=int, default=3, help="each of the 4 calls this many times")
    parser.add_argument("--start-timeout-s", type=float, default=420.0)
    parser.add_argument("--json", default="", help="write the results here")
    args = parser.parse_args()
    folder = str(Path(args.folder).resolve())
    served = ["--model", folder] if args.shape == "folder" else ["--shape", args.shape]
    logs = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpt-oss-responses-"))
    logs.mkdir(parents=True, exist_ok=True)
    length = ["--max-model-len", "2048"]
    processes = {
        "engine": start(
            "engine", ["bench.engine.server", *served, "--device", args.device, *args.engine_flags.split()], logs
        ),
        "render": start("render", ["render_svc", "--model", folder, *length], logs),
        "derender": start("derender", ["derender_svc", "--model", folder], logs),
    }
    try:
        deadline = time.monotonic() + args.start_timeout_s
        targets = {role: address(*processes[role], deadline) for role in processes}
        hops = [f"--{role}-target={targets[role]}" for role in targets]
        processes["chat"] = start("chat", ["pipeline_svc", *hops, f"--engines={targets['engine']}"], logs)
        chat = address(*processes["chat"], deadline)
        results = run_calls(chat, Path(folder).name, args.rounds)
    finally:
        for process, _ in processes.values():
            process.terminate()
        for process, _ in processes.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    sys.exit(1 if results["errors"] else 0)


if __name__ == "__main__":
    main()
