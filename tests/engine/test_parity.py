"""Greedy output through the service equals transformers `generate`, token for token, on the default model."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM

from scaleout_common.models import load_tokenizer, resolve_model, tokenizer_fingerprint
from tests.engine.conftest import engine_stub, generate, request

pytestmark = pytest.mark.slow

QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain gravity to a child.",
    "List three prime numbers.",
    "Who wrote Hamlet?",
    "Translate 'good morning' into Spanish.",
    "What is 12 times 12?",
    "Give me a tip for learning Python.",
    "Why is the sky blue?",
    "Name a famous painting.",
    "Describe a cat in one sentence.",
    "What does a CPU do?",
]


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
