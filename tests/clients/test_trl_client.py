"""TRL's VLLMClient (trl 1.16, `trl/generation/vllm_client.py`), unchanged, against the gateway as against a vLLM
server: every method that runs without CUDA, its results checked against our tokenizer and the engine's own
logprobs (`/inference/v1/generate/typed`). Weight sync stops where TRL itself stops on CPU (it needs vLLM's NCCL engine on
CUDA): after the server checks it makes pass. Images are refused (a text-only model). docs/rl.md."""

from __future__ import annotations

import math
import os
import re
import warnings

import pytest
import requests
from PIL import Image

from scaleout_common.models import load_tokenizer, resolve_model

# TRL warns that vLLM 0.33 is past the versions it has tested (as it does again in VLLMClient()); vLLM's import sets inductor and NVML variables,
# which the stack's services (started later in this process's environment) must not inherit.
_environ = dict(os.environ)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from trl.generation.vllm_client import VLLMClient
os.environ.clear()
os.environ.update(_environ)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:TRL currently supports vLLM versions")]
# TRL batches its prompts in one request, the engine's own answer is for one: float32 sums in another order.
REL = 1e-4

PROMPTS = ["The capital of France is", "One, two, three,"]
CHAT = [{"role": "user", "content": "Say yes or no."}]


@pytest.fixture(scope="module")
def trl(stack) -> VLLMClient:
    return VLLMClient(base_url=stack.rest_url, connection_timeout=30)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(resolve_model(None))


def _engine(stack, token_ids: list[int], **sampling) -> dict:
    """The engine's own answer for `token_ids` (greedy), through its typed REST route."""
    body = {"token_ids": token_ids, "sampling_params": {"temperature": 0, **sampling}}
    answer = requests.post(stack.rest_url + "/inference/v1/generate/typed", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _assert_ranked(logprobs: list, token_ids: list, sampled: list[int], most: int) -> None:
    """Per token: the sampled id among at most `most` entries, sorted by descending logprob."""
    assert len(logprobs) == len(token_ids) == len(sampled)
    for values, ids, token in zip(logprobs, token_ids, sampled):
        assert token in ids and 1 <= len(ids) == len(values) <= most
        assert values == sorted(values, reverse=True)


def test_server_info_and_world_size(trl, stack):
    config = trl.get_server_info()
    assert config["weight_transfer_config"] == {"backend": "nccl"}  # what init_communicator checks
    model = requests.get(stack.rest_url + "/inference/v1/model_info", timeout=30).json()
    assert config["model_config"]["logprobs_mode"] == model["logprobs_mode"]  # GRPO's importance-sampling check
    assert config["model_config"]["dtype"] == model["dtype"]
    assert config["lora_config"] is None  # async GRPO's adapter probe: merged-weight sync
    assert config["parallel_config"]["data_parallel_size"] == trl.get_world_size() == 1
    # The same path is SGLang's server info to SMG; vLLM's default format prints the config as text.
    text = requests.get(stack.rest_url + "/server_info", timeout=30).json()
    assert text["served_model_name"] == trl.model and text["context_length"] == model["max_model_len"]
    assert isinstance(text["vllm_config"], str) and "weight_transfer_config=" in text["vllm_config"]
    refused = requests.get(stack.rest_url + "/server_info?config_format=yaml", timeout=30)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "config_format"


def test_generate_text_prompts_prompt_major_with_logprobs(trl, tokenizer):
    out = trl.generate(PROMPTS, n=2, temperature=0.0, max_tokens=4, logprobs=2)
    assert out["prompt_ids"] == [tokenizer(p).input_ids for p in PROMPTS]
    completions = out["completion_ids"]
    assert len(completions) == 4 and all(len(c) == 4 for c in completions)
    # Greedy: a prompt's n completions are alike, and differ from the other prompt's (prompt-major order).
    assert completions[0] == completions[1] and completions[2] == completions[3] != completions[0]
    for logprobs, ids, sampled in zip(out["logprobs"], out["logprob_token_ids"], completions):
        _assert_ranked(logprobs, ids, sampled, most=3)  # the top 2 and the sampled token
        assert [i[0] for i in ids] == sampled  # greedy: the sampled token leads


def test_generate_token_ids_and_logprobs_are_the_engines(trl, stack, tokenizer):
    prompts = [tokenizer(p).input_ids for p in PROMPTS]
    out = trl.generate(prompts, temperature=0.0, max_tokens=4, logprobs=0, top_k=0, min_p=0.0)
    assert out["prompt_ids"] == prompts
    for prompt, completion, logprobs, ids in zip(
        prompts, *(out[k] for k in ("completion_ids", "logprobs", "logprob_token_ids"))
    ):
        engine = _engine(stack, prompt, max_tokens=4, logprobs=0)["choices"][0]
        assert completion == engine["token_ids"] and ids == [[t] for t in completion]
        assert [v for [v] in logprobs] == pytest.approx(engine["logprobs"]["logprobs"], rel=REL)


def test_generate_honours_the_regex_and_sampling_knobs(trl, tokenizer):
    out = trl.generate(["Pick a number:"], max_tokens=6, structured_outputs_regex="[0-9]{3}", logprobs=None)
    assert re.fullmatch("[0-9]{3}", tokenizer.decode(out["completion_ids"][0], skip_special_tokens=True))
    assert out["logprobs"] is None and out["logprob_token_ids"] is None
    seeded = dict(repetition_penalty=1.3, temperature=0.8, top_p=0.9, top_k=20, min_p=0.05, max_tokens=5)
    first = trl.generate(PROMPTS[:1], generation_kwargs={"seed": 7}, **seeded)["completion_ids"]
    assert first == trl.generate(PROMPTS[:1], generation_kwargs={"seed": 7}, **seeded)["completion_ids"]


def test_chat_n_logprobs_regex_and_tools(trl, tokenizer):
    out = trl.chat([CHAT], n=2, max_tokens=4, logprobs=1, temperature=0.0)
    rendered = tokenizer.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=True)
    assert out["prompt_ids"] == [list(getattr(rendered, "input_ids", rendered))]
    assert len(out["completion_ids"]) == 2 and out["completion_ids"][0] == out["completion_ids"][1]
    for logprobs, ids, sampled in zip(out["logprobs"], out["logprob_token_ids"], out["completion_ids"]):
        _assert_ranked(logprobs, ids, sampled, most=2)
    answer = trl.chat([CHAT, CHAT], max_tokens=4, structured_outputs_regex="(yes|no)")
    assert all(tokenizer.decode(c, skip_special_tokens=True) in ("yes", "no") for c in answer["completion_ids"])
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    with_tools = trl.chat([CHAT], max_tokens=2, tools=[tool], temperature=0.0)  # tool_choice "none"
    rendered = tokenizer.apply_chat_template(CHAT, tools=[tool], add_generation_prompt=True, tokenize=True)
    assert with_tools["prompt_ids"] == [list(getattr(rendered, "input_ids", rendered))]


def test_sequence_logprobs_are_the_engines_prompt_logprobs(trl, stack, tokenizer):
    prompt = tokenizer(PROMPTS[0]).input_ids
    completion = trl.generate([prompt], temperature=0.0, max_tokens=4)["completion_ids"][0]
    sequence, top = prompt + completion, 5
    out = trl.get_sequence_logprobs([sequence, sequence[:-1]], [len(prompt), len(prompt)], top_logprobs=top)
    engine = _engine(stack, sequence, max_tokens=1, prompt_logprobs=top)["prompt"]["logprobs"]
    [logprobs, _], [ids, _] = out["logprobs"], out["logprob_token_ids"]
    assert len(logprobs) == len(completion) and len(out["logprobs"][1]) == len(completion) - 1
    for position, (values, top_ids) in enumerate(zip(logprobs, ids), start=len(prompt) - 1):
        assert top_ids == engine["top"][position]["token_ids"]
        assert values == pytest.approx(engine["top"][position]["logprobs"], rel=REL)
    actual = [v for [v] in out["actual_logprobs"][0]]
    assert actual == pytest.approx(engine["logprobs"][len(prompt) - 1 :], rel=REL)
    assert out["actual_token_ids"][0] == [[t] for t in completion]
    assert all(math.isfinite(v) for v in actual)  # greedy tokens are in the top 5
    # TRL's default 100 alternatives: the stack runs with max_logprobs=100 (vLLM's default 20 would refuse it).
    default = trl.get_sequence_logprobs([sequence], [len(prompt)])
    assert [sum(map(math.isfinite, values)) for values in default["logprobs"][0]] == [100] * len(completion)
    assert [v for [v] in default["actual_logprobs"][0]] == pytest.approx(actual, rel=REL)
    with pytest.raises(Exception, match="prompt_logprobs"):  # past the bound: a 400 naming the field
        trl.get_sequence_logprobs([sequence], [len(prompt)], top_logprobs=101)


def test_reset_prefix_cache(trl):
    assert trl.reset_prefix_cache() is None


def test_weight_sync_stops_where_trl_needs_cuda(trl):
    # The server side answers (a weight-transfer backend, a world size); TRL's trainer side is vLLM's NCCL engine.
    with pytest.raises(NotImplementedError, match="needs a CUDA device"):
        trl.init_communicator(device="cpu")
    with pytest.raises(Exception, match="WEIGHT_TRANSFER_STATE"), trl.weight_update():
        pass  # an update before the trainer's group is joined is vLLM's order error


def test_images_are_refused(trl):
    with pytest.raises(Exception, match=r"400.*INVALID_CONTENT"):
        trl.image_features([[Image.new("RGB", (8, 8))], None])


def test_generate_with_features_is_vllms_generate_route(trl, stack, tokenizer):
    # generate(features=...) posts vLLM's GenerateRequest to /inference/v1/generate, one per prompt: a prompt without
    # images (None) is served; TRL 1.16 reads vLLM 0.33's token-id logprobs as chat's (`token`), so none are asked.
    prompts = [tokenizer(p).input_ids for p in PROMPTS]
    out = trl.generate(prompts, features=[None, None], temperature=0.0, max_tokens=4, logprobs=None, n=1)
    assert out["prompt_ids"] == prompts and out["logprobs"] is None
    for prompt, completion in zip(prompts, out["completion_ids"]):
        assert completion == _engine(stack, prompt, max_tokens=4)["choices"][0]["token_ids"]
    with pytest.raises(Exception, match=r"400.*features"):
        trl.generate([prompts[0]], features=[{"mm_hashes": {}, "mm_placeholders": {}}], max_tokens=2, logprobs=None)
