"""vLLM 0.33 server routes beyond OpenAI's, through the real gateway and services, in vLLM's shapes: `/tokenize`
(`token_strs` null unless asked), `/tokenizer_info` (render runs with --enable-tokenizer-info-endpoint here),
`/load`, SageMaker's `/invocations` and `/v1/chat/completions/batch`; unknown fields refused naming them."""

from __future__ import annotations

import pytest
import requests

from tests.gateway.rest import error_reason, post, sse_events

pytestmark = pytest.mark.slow

HI = [{"role": "user", "content": "hi"}]
GREEDY = {"max_tokens": 3, "temperature": 0}
# vLLM 0.33's own answer for this model (`vllm launch render <model> --enable-tokenizer-info-endpoint`,
# GET /tokenizer_info), less its folder and the long values.
VLLM_TOKENIZER_INFO = {
    "tokenizer_class": "TokenizerPoolCachedTokenizersBackend",
    "backend": "tokenizers",
    "bos_token": "<|im_start|>",
    "eos_token": "<|im_end|>",
    "is_local": True,
    "local_files_only": False,
    "model_max_length": 1000000000000000019884624838656,
    "pad_token": "<|im_end|>",
    "unk_token": "<|endoftext|>",
    "truncation_side": "left",
}
LONG_KEYS = ("chat_template", "added_tokens_decoder")


def test_tokenize_prints_vllms_nulls_and_refuses_unknown_fields(stack):
    # vLLM 0.33's own answers for this model (`vllm launch render <model>`, POST /tokenize), key order included.
    plain = post(stack, "/tokenize", {"prompt": "hello world"})
    assert plain.text == '{"count": 2, "max_model_len": 8192, "tokens": [28120, 905], "token_strs": null}'
    strs = post(stack, "/tokenize", {"prompt": "hello world", "return_token_strs": True}).json()
    assert strs["token_strs"] == ["hello", "Ġworld"]
    asked = post(stack, "/tokenize", {"messages": HI, "return_token_strs": True, "return_token_offsets": True}).json()
    assert len(asked["token_strs"]) == len(asked["tokens"]) == len(asked["token_offsets"])
    typed = post(stack, "/tokenize/typed", {"prompt": "hello world"}).json()
    assert typed["tokens"] == [28120, 905] and typed["token_strs"] == []
    refused = post(stack, "/tokenize", {"prompt": "hi", "bogus": 1})
    assert refused.status_code == 400 and error_reason(refused) == "UNSUPPORTED_FIELD"
    assert refused.json()["error"]["param"] == "bogus"
    wrong = post(stack, "/tokenize", {"prompt": 5})
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "prompt"


def test_tokenizer_info_is_vllms_answer(stack):
    answer = requests.get(stack.rest_url + "/tokenizer_info", timeout=30)
    assert answer.status_code == 200, answer.text
    info = answer.json()
    assert next(iter(info)) == "tokenizer_class" and set(info) == {*VLLM_TOKENIZER_INFO, *LONG_KEYS, "name_or_path"}
    assert {key: info[key] for key in VLLM_TOKENIZER_INFO} == VLLM_TOKENIZER_INFO
    assert info["added_tokens_decoder"]["2"] == "<|im_end|>" and "<|im_start|>" in info["chat_template"]
    assert info["name_or_path"] == "SmolLM2-135M-Instruct"  # vLLM prints its folder; never the server's path


def test_load_counts_requests_in_flight(stack):
    assert requests.get(stack.rest_url + "/load", timeout=30).json() == {"server_load": 0}
    seen: list[int] = []
    with requests.post(
        stack.rest_url + "/v1/completions",
        json={"prompt": "count", "max_tokens": 1000, "ignore_eos": True, "stream": True},
        stream=True,
        timeout=120,
    ) as streaming:
        next(streaming.iter_lines())  # generating now, for long after the load is read (the stream is closed after)
        seen.append(requests.get(stack.rest_url + "/load", timeout=30).json()["server_load"])
        streaming.close()
    assert seen == [1]


def test_invocations_dispatch_on_the_body(stack):
    chat = post(stack, "/invocations", {"messages": HI, **GREEDY}).json()
    assert chat["object"] == "chat.completion" and chat["choices"][0]["finish_reason"] == "length"
    completion = post(stack, "/invocations", {"prompt": "The sky", **GREEDY}).json()
    assert completion["object"] == "text_completion"
    streamed = requests.post(
        stack.rest_url + "/invocations", json={"prompt": "x", "stream": True, **GREEDY}, timeout=60
    )
    assert sse_events(streamed)[-1]["choices"][0]["finish_reason"] == "length"
    neither = post(stack, "/invocations", {"input": "hi"})
    assert neither.status_code == 400 and error_reason(neither) == "INVALID_REQUEST"
    assert "Expected one of: ['ChatCompletionRequest', 'CompletionRequest']" in neither.json()["error"]["message"]
    unknown = post(stack, "/invocations", {"messages": HI, "bogus": 1})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "bogus"


def test_batch_chat_answers_one_choice_per_conversation(stack):
    other = [{"role": "user", "content": "name a colour"}]
    body = {"messages": [HI, other], "request_id": "batch-1", **GREEDY}  # one live engine id per conversation
    answer = post(stack, "/v1/chat/completions/batch", body)
    assert answer.status_code == 200, answer.text
    batch = answer.json()
    assert batch["object"] == "chat.completion" and [c["index"] for c in batch["choices"]] == [0, 1]
    assert batch["id"] == "chatcmpl-batch-1"
    alone = post(stack, "/v1/chat/completions", {"messages": other, **GREEDY}).json()
    assert batch["choices"][1]["message"] == alone["choices"][0]["message"]
    usage = batch["usage"]
    assert usage["completion_tokens"] == 6 and usage["total_tokens"] == usage["prompt_tokens"] + 6


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [HI], "n": 2}, "n"),
        ({"messages": [HI], "stream": True}, "stream"),
        ({"messages": [HI], "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"messages": [HI], "bogus": 1}, "bogus"),
        ({"messages": [HI, [{"role": "wiz ard", "content": "hi"}]]}, "messages[1][0].role"),
        ({"messages": []}, "messages"),
        ({"messages": [HI, []]}, "messages[1]"),
    ],
)
def test_batch_chat_refusals_name_the_clients_field(stack, body, param):
    refused = post(stack, "/v1/chat/completions/batch", body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == param, refused.text
