"""LoRA adapters through the real stack (Envoy, pipeline, render, an engine with --enable-lora on the default model)
with the official `openai` SDK: the `model` naming an adapter runs it (greedy tokens as transformers' over the
adapter merged into the weights), /v1/models lists it with its parent, unknown names are 404; vLLM's runtime
routes load and unload one (VLLM_ALLOW_RUNTIME_LORA_UPDATING)."""

from __future__ import annotations

import httpx
import openai
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from scaleout_common.models import resolve_model
from tests.engine.test_lora import merged, write_adapter
from tests.sdks import openai_sdk

pytestmark = pytest.mark.slow
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def base():
    folder = resolve_model(None)
    return AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)


@pytest.fixture(scope="module")
def folders(tmp_path_factory, base):
    root = tmp_path_factory.mktemp("smol-loras")
    targets = ["q_proj", "v_proj", "o_proj", "down_proj"]
    return {
        "sql": write_adapter(root / "sql", base[1], targets, rank=8, alpha=16.0, seed=3),
        "late": write_adapter(root / "late", base[1], ["q_proj", "up_proj"], rank=4, alpha=8.0, seed=4),
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory, folders):
    from devstack.stack import Stack, StackConfig

    lora = ["--enable-lora", "--lora-modules", f"sql={folders['sql']}"]
    config = StackConfig(
        port=0,
        log_dir=tmp_path_factory.mktemp("lora-stack"),
        service_args={"engine": [*lora, "--max-loras", "2", "--max-cpu-loras", "2"], "render": lora},
        env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true"},
    )
    with Stack(config) as running:
        yield running


@pytest.fixture(scope="module")
def client(stack):
    with openai_sdk(stack.rest_url) as sdk:
        yield sdk


def reference(base, folder, new_tokens: int) -> str:
    tokenizer, model = base
    ids = tokenizer(PROMPT)["input_ids"]
    model = merged(model, folder) if folder is not None else model
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    return tokenizer.decode(out[0, len(ids) :], skip_special_tokens=True)


def test_the_model_field_selects_the_adapter(client, base, folders):
    served = client.models.list().data
    names = {m.id: m for m in served}
    base_name = served[0].id
    answers = {
        name: client.completions.create(model=name, prompt=PROMPT, max_tokens=8, temperature=0)
        for name in (base_name, "sql")
    }
    chat = client.chat.completions.create(
        model="sql", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, temperature=0
    )
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no-such-adapter", prompt=PROMPT, max_tokens=2)
    ids = base[0](PROMPT)["input_ids"]
    sampling = {"max_tokens": 8, "temperature": 0}
    generated = httpx.post(
        f"{client.base_url}".removesuffix("/v1/") + "/inference/v1/generate",
        json={"model": "sql", "token_ids": ids, "sampling_params": sampling},
        timeout=120,
    ).json()  # vLLM's token-in face: its `model` naming the adapter runs it too
    assert getattr(names["sql"], "parent", None) == base_name and names["sql"].root == str(folders["sql"])
    assert answers["sql"].model == "sql" and chat.model == "sql"
    assert answers[base_name].choices[0].text == reference(base, None, 8)
    assert answers["sql"].choices[0].text == reference(base, folders["sql"], 8)
    assert answers["sql"].choices[0].text != answers[base_name].choices[0].text
    assert base[0].decode(generated["choices"][0]["token_ids"], skip_special_tokens=True) == reference(
        base, folders["sql"], 8
    )


def test_vllm_runtime_routes_load_and_unload_an_adapter(stack, client, base, folders):
    url = stack.rest_url
    loaded = httpx.post(f"{url}/v1/load_lora_adapter", json={"lora_name": "late", "lora_path": str(folders["late"])})
    text = client.completions.create(model="late", prompt=PROMPT, max_tokens=6, temperature=0).choices[0].text
    listed = [m.id for m in client.models.list().data]
    again = httpx.post(f"{url}/v1/load_lora_adapter", json={"lora_name": "late", "lora_path": str(folders["late"])})
    unloaded = httpx.post(f"{url}/v1/unload_lora_adapter", json={"lora_name": "late"})
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="late", prompt=PROMPT, max_tokens=2)
    missing = httpx.post(f"{url}/v1/unload_lora_adapter", json={"lora_name": "late"})
    assert loaded.status_code == 200 and loaded.text == "Success: LoRA adapter 'late' added successfully."
    assert text == reference(base, folders["late"], 6) and "late" in listed
    assert again.status_code == 400 and again.json()["error"]["code"] == "LORA_REFUSED"
    assert unloaded.status_code == 200 and unloaded.text == "Success: LoRA adapter 'late' removed successfully."
    assert missing.status_code == 404 and "cannot be found" in missing.json()["error"]["message"]
