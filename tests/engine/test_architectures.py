"""Other model families: Qwen2 (qkv bias) on the fused paged path, GPT-2 through the transformers path."""

from __future__ import annotations

import asyncio

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

from scaleout.v1 import engine_pb2
from tests.engine.conftest import engine_stub, generate, request
from tests.engine.test_generate import PROMPTS, reference


def tiny_qwen2():
    torch.manual_seed(1)
    config = Qwen2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=2,
        tie_word_embeddings=False,
        architectures=["Qwen2ForCausalLM"],
    )
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():  # random biases, so that a dropped qkv bias would show
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    return model


def tiny_gpt2():
    torch.manual_seed(2)
    config = GPT2Config(
        vocab_size=256,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=512,
        eos_token_id=2,
        architectures=["GPT2LMHeadModel"],
    )
    return GPT2LMHeadModel(config).eval()


async def _check(model, backend: str):
    async with engine_stub(model, "--block-size", "4", "--max-num-batched-tokens", "16") as (stub, _):
        info = await stub.GetModelInfo(engine_pb2.GetModelInfoRequest())
        results = await asyncio.gather(
            *[generate(stub, request(p, temperature=0, max_tokens=10, ignore_eos=True)) for p in PROMPTS[:4]]
        )
    assert info.backend == backend
    for prompt, (_, tokens) in zip(PROMPTS[:4], results):
        assert tokens[0] == reference(model, prompt, 10)


async def test_qwen2_runs_on_the_fused_paged_path():
    await _check(tiny_qwen2(), "paged")


async def test_other_architectures_run_through_transformers():
    await _check(tiny_gpt2(), "transformers")
