"""Our render answers held against vLLM 0.33's recorded ones (`vllm_render_answers.json`).

A case matches when both refuse it with the same HTTP status, or both answer it and every field vLLM prints
has the same value here (a case's `paths` left out; `status` among them: it may answer where vLLM refuses) (JSON objects compared without order), token ids included. Two things are not
compared: the random part of `request_id` when the request gave none, and `parse_context.chat_template_kwargs`
`cohere_format` (vLLM's CLI default for Cohere's renderer: this server's templates never see it). `scaleout`
is ours alone.

    python -m tests.render.vllm_compare    # every case rendered in process; prints the match count
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ANSWERS = Path(__file__).with_name("vllm_render_answers.json")
_RANDOM_ID = re.compile(r"^(chatcmpl-|cmpl-|resp_)[0-9a-f]+")
NOT_COMPARED_KWARGS = ("cohere_format",)


def recorded() -> dict:
    return json.loads(ANSWERS.read_text())


def _normal(answer, body: dict):
    if isinstance(answer, list):
        return [_normal(item, body) for item in answer]
    answer = {k: v for k, v in answer.items() if k != "scaleout"}
    if "request_id" not in body:
        answer["request_id"] = _RANDOM_ID.sub(r"\1*", answer["request_id"])
    if answer.get("parse_context"):
        context = dict(answer["parse_context"])
        kwargs = context["chat_template_kwargs"] or {}
        context["chat_template_kwargs"] = {k: v for k, v in kwargs.items() if k not in NOT_COMPARED_KWARGS}
        answer["parse_context"] = context
    return answer


def _differences(theirs, ours, path: str) -> list[str]:
    if isinstance(theirs, dict) and isinstance(ours, dict):
        out = []
        for key in {**theirs, **ours}:
            where = f"{path}.{key}" if path else key
            if key not in ours or key not in theirs:
                out.append(f"{where}: only {'vLLM' if key in theirs else 'ours'} has it")
            else:
                out += _differences(theirs[key], ours[key], where)
        return out
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        return [d for i, (a, b) in enumerate(zip(theirs, ours)) for d in _differences(a, b, f"{path}[{i}]")]
    return [] if theirs == ours else [f"{path}: vLLM {json.dumps(theirs)[:120]}, ours {json.dumps(ours)[:120]}"]


def differences(case, vllm: dict, status: int, ours) -> list[str]:
    """Where our answer (`status`, `ours`: the JSON body, or None when refused) differs from vLLM's."""
    if vllm["status"] != 200 or status != 200:
        found = [] if vllm["status"] == status else [f"status: vLLM {vllm['status']}, ours {status}"]
    else:
        found = _differences(_normal(vllm["body"], case.body), _normal(ours, case.body), "")
    return [d for d in found if not any(re.match(rf"^(\[\d+\]\.)?{re.escape(p)}\b", d) for p in case.paths)]


def main() -> None:
    from google.api import httpbody_pb2

    from render_svc.model import load_model
    from render_svc.renderer import Renderer
    from render_svc.vllm_render import render_chat_vllm, render_completion_vllm
    from render_svc.vllm_render.apis import render_messages_vllm, render_responses_vllm
    from scaleout_common.errors import ServiceError
    from scaleout_common.reasons import Reason
    from tests.render.vllm_render_cases import CASES, CHAT, COMPLETION, MESSAGES, RESPONSES

    renders = {
        CHAT: render_chat_vllm,
        COMPLETION: render_completion_vllm,
        MESSAGES: render_messages_vllm,
        RESPONSES: render_responses_vllm,
    }
    renderer, answers = Renderer(load_model(None)), recorded()["answers"]
    same, refused_on_purpose, partly, other = 0, [], [], []
    for case in (c for c in CASES if c.name in answers):  # a request added since its answer was recorded: not yet
        render = renders[case.path]
        try:
            status, ours = (
                200,
                json.loads(render(renderer, httpbody_pb2.HttpBody(data=json.dumps(case.body).encode())).data),
            )
        except ServiceError as error:
            status, ours = Reason(error.reason).http, None
        found = differences(case, answers[case.name], status, ours)
        if not found and not (case.paths and status == 200):
            same += 1
        elif case.differs and not found:
            partly.append(case.name)
        elif case.differs and status != 200:
            refused_on_purpose.append(case.name)
        else:
            other.append(f"{case.name}: {found}")
    served = sum(1 for a in answers.values() if a["status"] == 200)
    print(f"{same} of {len(CASES)} cases answered as vLLM 0.33 answers them ({served} of them vLLM answers 200)")
    print(f"{len(partly)} the same but at their listed paths: {', '.join(partly)}")
    print(f"{len(refused_on_purpose)} refused on purpose: {', '.join(refused_on_purpose)}")
    print(f"{len(other)} otherwise:" + "".join(f"\n  {line}" for line in other))


if __name__ == "__main__":
    main()
