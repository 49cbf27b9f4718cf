"""vllm-router's P/D mode (`--vllm-pd-disaggregation`, from its registry wheel) in front of the package's two stacks:
the first stack's engine runs the prefill step, the second's pulls its KV blocks and decodes. Through the official
openai SDK, unary and streamed, the answer is token for token the one engine alone gives at temperature 0, and
the decode engine computes none of the prompt. vLLM's `kv_transfer_params` on /inference/v1/generate and their
typed refusals on the OpenAI routes are checked on the same stacks (the engines' own failure cases, expiry, a lost
engine and mismatches: tests/engine/test_kv_transfer.py)."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
import requests

from devstack.routers import Router, RouterConfig
from devstack.stack import Stack
from tests.sdks import openai_sdk

MESSAGES = [{"role": "user", "content": "Name three colours of the rainbow and say why rainbows form."}]
ANSWER = {"temperature": 0, "max_tokens": 12}
# A handoff naming an engine address where nothing listens.
GONE = {"do_remote_prefill": True, "remote_engine_id": "e", "remote_host": "127.0.0.1", "remote_port": 1}
GONE |= {"remote_request_id": "r", "remote_block_ids": [1]}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pd_router(stacks, tmp_path_factory) -> Iterator[Router]:
    prefill, decode = stacks
    config = RouterConfig(
        "vllm-router",
        "round_robin",
        [prefill.rest_url, decode.rest_url],
        args=["--worker-startup-check-interval", "1"],
        log_path=tmp_path_factory.mktemp("pd") / "vllm-router-pd.log",
        pd=True,
    )
    with Router(config) as running:
        yield running


def client(url: str) -> openai.OpenAI:
    return openai_sdk(url, timeout=600)


def load(stack: Stack) -> dict:
    return requests.get(stack.rest_url + "/inference/v1/load", timeout=10).json()


def test_pd_answers_as_one_engine_and_the_decode_engine_computes_no_prompt(pd_router, stacks, model_id):
    _, decode = stacks
    before = load(decode)
    unary = client(pd_router.url).chat.completions.create(model=model_id, messages=MESSAGES, **ANSWER)
    after = load(decode)
    chunks = client(pd_router.url).chat.completions.create(model=model_id, messages=MESSAGES, stream=True, **ANSWER)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    alone = client(decode.rest_url).chat.completions.create(model=model_id, messages=MESSAGES, **ANSWER)
    assert unary.choices[0].message.content == streamed == alone.choices[0].message.content
    assert int(after["prompt_tokens_computed"]) == int(before["prompt_tokens_computed"])
    transferred = int(after["prompt_tokens_transferred"]) - int(before["prompt_tokens_transferred"])
    assert transferred == unary.usage.prompt_tokens


def test_generate_route_hands_off_in_vllms_shape(stacks):
    prefill, decode = stacks
    body = {"token_ids": list(range(300, 340)), "sampling_params": {"temperature": 0, "max_tokens": 4}}
    alone = requests.post(decode.rest_url + "/inference/v1/generate", json=body, timeout=120).json()
    asked = body | {"kv_transfer_params": {"do_remote_decode": True, "remote_host": None}}
    first = requests.post(prefill.rest_url + "/inference/v1/generate", json=asked, timeout=120).json()
    params = first["kv_transfer_params"]
    assert params["do_remote_prefill"] and params["remote_num_tokens"] == 40 and params["remote_block_ids"]
    pulled = requests.post(
        decode.rest_url + "/inference/v1/generate", json=body | {"kv_transfer_params": params}, timeout=120
    )
    assert pulled.json()["choices"][0]["token_ids"] == alone["choices"][0]["token_ids"]
    again = requests.post(
        decode.rest_url + "/inference/v1/generate", json=body | {"kv_transfer_params": params}, timeout=120
    )
    error = again.json()["error"]  # vLLM's ErrorResponse on vLLM's route: the reason in the status details
    assert again.status_code == error["code"] == 404, again.text
    assert [d.get("reason") for d in error["details"]] == ["KV_HANDOFF_EXPIRED"], again.text


@pytest.mark.parametrize(
    "params, stream, code",
    [
        ({"do_remote_decode": True, "bootstrap_room": 1}, False, "INVALID_KV_TRANSFER"),
        ({"do_remote_decode": True}, True, "UNSUPPORTED_FIELD"),
        (GONE, False, "KV_HANDOFF_ENGINE_GONE"),
    ],
    ids=["unknown-key", "streamed-prefill", "engine-gone"],
)
def test_openai_routes_refuse_what_they_cannot_honour(stacks, model_id, params, stream, code):
    with pytest.raises(openai.APIStatusError) as caught:
        client(stacks[1].rest_url).chat.completions.create(
            model=model_id, messages=MESSAGES, stream=stream, extra_body={"kv_transfer_params": params}, **ANSWER
        )
    assert caught.value.body["code"] == code  # pyright: ignore[reportIndexIssue, reportOptionalSubscript]
