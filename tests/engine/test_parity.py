"""Greedy output through the service equals transformers `generate`, token for token, on the default model."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM

from scaleout_common.models import load_tokenizer, resolve_model, tokenizer_fingerprint
from tests.engine.conftest import QUESTIONS, engine_stub, generate, request

pytestmark = pytest.mark.slow


async def test_greedy_matches_transformers_generate_on_the_default_model():
    folder = resolve_model(None)
    tokenizer = load_tokenizer(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        for q in QUESTIONS
    ]
    expected = []
    for prompt in prompts:
        out = model.generate(torch.tensor([prompt]), max_new_tokens=20, do_sample=False)
        expected.append(out[0, len(prompt) :].tolist())
    fingerprint = tokenizer_fingerprint(tokenizer)
    async with engine_stub(model, fingerprint=fingerprint) as (stub, _):
        messages = [request(p, temperature=0, max_tokens=20) for p in prompts]
        for m in messages:
            m.tokenizer_fingerprint = fingerprint
        results = await asyncio.gather(*[generate(stub, m) for m in messages])
    assert [tokens[0] for _, tokens in results] == expected
