"""vLLM's own benchmark client against the real stack: the request functions of `vllm bench serve`
(vllm.benchmarks.lib.endpoint_request_func, from the registry's vLLM 0.33) for each generate backend it has, as an
operator runs it (`vllm bench serve --backend vllm|openai-chat|openai-responses --ignore-eos`): every request
succeeds, is timed from its first token, and counts the tokens it asked for."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from vllm.benchmarks.lib.endpoint_request_func import ASYNC_REQUEST_FUNCS, RequestFuncInput

pytestmark = pytest.mark.slow

BACKENDS = {"vllm": "/v1/completions", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}
OUTPUT_LEN = 12


async def _bench(backend: str, url: str, model: str, logprobs: int | None) -> list:
    inputs = [
        RequestFuncInput(
            prompt=f"Tell me a story about the number {i}.",
            api_url=url + BACKENDS[backend],
            prompt_len=10,
            output_len=OUTPUT_LEN,
            model=model,
            logprobs=logprobs,
            ignore_eos=True,
            request_id=f"bench-{backend}-{i}",
        )
        for i in range(4)
    ]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
        return await asyncio.gather(*(ASYNC_REQUEST_FUNCS[backend](one, session) for one in inputs))


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_times_and_counts_each_request(stack, model_id, backend):
    outputs = asyncio.run(_bench(backend, stack.rest_url, model_id, 2 if backend == "vllm" else None))
    for output in outputs:
        assert output.success, output.error
        assert 0 < output.ttft <= output.latency and output.generated_text
        # a chunk a token (the first is TTFT, each other an ITL), but tokens that queued up while the client was
        # slow go out together, as vLLM's output collector merges them
        assert 0 < len(output.itl) <= OUTPUT_LEN - 1
        assert output.output_tokens == OUTPUT_LEN and output.prompt_len > 0  # from the usage chunk
