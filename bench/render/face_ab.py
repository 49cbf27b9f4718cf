"""The vLLM JSON face in process, before and after the orjson / direct-build / proto_json rework, alternating
(python -m bench.render.face_ab): CPU (time.process_time) per whole `render_chat_vllm` of the vs_vllm bodies.

"before" swaps back what the face used until 37a7436: the stdlib's JSON decoder, json_format.ParseDict for every
request and json_format.MessageToDict for the two messages under `scaleout`.
"""

from __future__ import annotations

import json
import os
import time

from google.api import httpbody_pb2
from google.protobuf import json_format

from bench.render.vs_vllm import WORKLOADS
from render_svc import flags
from render_svc.model import load_model
from render_svc.renderer import Renderer
from render_svc.vllm_render import render_chat_vllm
from render_svc.vllm_render import request as face
from scaleout.v1 import render_pb2
from scaleout_common import json_body, proto_json
from scaleout_common.openai_body_rules import parse_typed

ROUNDS = 8


def _stdlib_load(body: bytes) -> dict:
    return json.loads(body or b"{}", parse_constant=json_body._no_constant, parse_float=json_body._finite)


NOW = (face.load_object, face._typed_chat, proto_json.to_dict)
BEFORE = (
    _stdlib_load,
    lambda out: parse_typed(out, render_pb2.RenderChatRequest()),
    lambda message: json_format.MessageToDict(message, preserving_proto_field_name=True),
)


def _use(version) -> None:
    face.load_object, face._typed_chat, proto_json.to_dict = version


def main() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = flags.parser().parse_args(["--token-cache-mb", "0"])
    model = load_model(None)
    renderer = Renderer(model, flags.limits(args), flags.options(args))
    print(f"load average {os.getloadavg()[0]:.2f}")
    for workload, n in (("short", 300), ("2k", 40)):
        body = httpbody_pb2.HttpBody(data=json.dumps({"model": model.name, "messages": WORKLOADS[workload]}).encode())
        times: dict[str, list[float]] = {"before": [], "now": []}
        for round_ in range(ROUNDS):
            order = [("before", BEFORE), ("now", NOW)]
            for name, version in order if round_ % 2 == 0 else order[::-1]:
                _use(version)
                for _ in range(20):
                    render_chat_vllm(renderer, body)
                started = time.process_time()
                for _ in range(n):
                    render_chat_vllm(renderer, body)
                times[name].append((time.process_time() - started) / n * 1e3)
        _use(NOW)
        before, now = sorted(times["before"]), sorted(times["now"])
        print(
            f"{workload:6s} CPU ms/request: before min {before[0]:.3f} median {before[ROUNDS // 2]:.3f}; "
            f"now min {now[0]:.3f} median {now[ROUNDS // 2]:.3f}"
        )


if __name__ == "__main__":
    main()
