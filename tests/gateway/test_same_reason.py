"""The same malformed sampling input gets the same reason on every route that takes it (one owner per rule).

Render's typed and vLLM-shaped routes, the engine's generate route and the one-hop OpenAI route all check sampling knobs with
scaleout_common.sampling_rules, so a client learns one reason whichever door it came through (on vLLM's routes in
the error's details: there `code` is the HTTP status, as vLLM's).
"""

from __future__ import annotations

import pytest

from scaleout_common.openai_errors import VLLM_PATHS
from tests.gateway.rest import error_reason, post

USER = [{"role": "user", "content": "hi"}]
PROMPT_IDS = [1, 9690, 198]
# knob -> a value every route must refuse as INVALID_SAMPLING_PARAM
BAD_KNOBS = [
    ("temperature", -1),
    ("top_p", 0),
    ("top_p", 1.5),
    ("min_p", 2),
    ("repetition_penalty", 0),
    ("presence_penalty", 3),
    ("frequency_penalty", -3),
    ("top_k", -5),
    ("min_tokens", -1),
]


def _routes(knob: str, value) -> list[tuple[str, dict]]:
    return [
        ("/v1/chat/completions/render/typed", {"messages": USER, "max_tokens": 4, knob: value}),
        ("/v1/chat/completions/render", {"messages": USER, "max_tokens": 4, knob: value}),
        ("/v1/completions/render", {"prompt": "hi", "max_tokens": 4, knob: value}),
        ("/v1/chat/completions", {"messages": USER, "max_tokens": 4, knob: value}),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 4, knob: value}),
        ("/inference/v1/generate", {"token_ids": PROMPT_IDS, "sampling_params": {"max_tokens": 4, knob: value}}),
    ]


@pytest.mark.parametrize(("knob", "value"), BAD_KNOBS)
def test_a_bad_knob_gets_one_reason_on_every_route(stack, knob, value):
    for path, body in _routes(knob, value):
        answer = post(stack, path, body)
        assert answer.status_code == 400, (path, answer.text)
        error = answer.json()["error"]
        assert error_reason(answer) == "INVALID_SAMPLING_PARAM", (path, error)
        assert error["type"] == ("BadRequestError" if path in VLLM_PATHS else "invalid_request_error")
        assert error["param"].rsplit(".", 1)[-1] == knob, (path, error)


def test_an_out_of_vocab_token_gets_one_reason_on_every_route(stack):
    bias = {"10000000": 5}
    for path, body in [
        ("/v1/chat/completions/render/typed", {"messages": USER, "logit_bias": bias}),
        ("/v1/chat/completions/render", {"messages": USER, "logit_bias": bias}),
        ("/v1/chat/completions", {"messages": USER, "max_tokens": 4, "logit_bias": bias}),
        ("/inference/v1/generate", {"token_ids": PROMPT_IDS, "sampling_params": {"logit_bias": bias}}),
    ]:
        answer = post(stack, path, body)
        assert answer.status_code == 400, (path, answer.text)
        assert error_reason(answer) == "TOKEN_ID_OUT_OF_VOCAB", (path, answer.text)
