"""The router bench's workload and its two measures.

Workload: conversations in `system_prompts` groups, each group behind its own system prompt (an application's
prompt its users share; bench.serving.datasets' multi_turn per group, as text, interleaved so the conversations
running at once belong to different groups), that grow turn by turn: each turn sends the whole history (system, every user turn, every answer so far) as a
streamed OpenAI chat with EOS ignored, so every answer has exactly `output_len` tokens; the answer joins the
history. A conversation's turns are sequential; `concurrency` conversations run at once. A 429 (an engine's
queue-wait budget, when every replica it could go to is over it) is retried after its Retry-After, as the openai
SDK retries it; the retries are counted.

Measures: TTFT per turn as the client sees it (request sent -> first SSE event with content), and the prefix-cache
hit rate the engines report themselves (GetLoad's prefix_cache_hit_tokens / prefix_cache_queried_tokens over the
phase, summed over the configuration's engines), with each engine's share of the prompt tokens (the balance).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import grpc
import httpx

from bench.serving.datasets import Conversation, multi_turn
from bench.serving.metrics import RequestResult
from devstack.stack import Replica
from scaleout.v1 import engine_pb2, engine_pb2_grpc

RETRIES = 3


@dataclass
class CacheCounters:
    queried: list[int]  # prompt tokens admitted, per engine
    hit: list[int]  # of those, tokens found in the prefix cache


def cache_counters(engines: list[Replica]) -> CacheCounters:
    queried, hit = [], []
    for engine in engines:
        with grpc.insecure_channel(f"127.0.0.1:{engine.port}") as channel:
            load = engine_pb2_grpc.EngineServiceStub(channel).GetLoad(engine_pb2.GetLoadRequest(), timeout=10)
        queried.append(load.prefix_cache_queried_tokens)
        hit.append(load.prefix_cache_hit_tokens)
    return CacheCounters(queried, hit)


def cache_delta(before: CacheCounters, after: CacheCounters) -> dict:
    queried = [a - b for a, b in zip(after.queried, before.queried)]
    hit = [a - b for a, b in zip(after.hit, before.hit)]
    total = sum(queried)
    return {
        "queried_tokens": total,
        "hit_tokens": sum(hit),
        "hit_rate": sum(hit) / total if total else float("nan"),
        "engine_share": [q / total if total else float("nan") for q in queried],
    }


def grouped_conversations(
    count: int, groups: int, turns: int, system_len: int, user_len: int, output_len: int, seed: int
) -> list[Conversation]:
    """`count` conversations of `turns` turns, dealt round-robin to `groups` system prompts: conversation i has
    group i % groups' prompt."""
    sets = [
        multi_turn(
            len(range(g, count, groups)), turns, system_len, user_len, output_len, 0, True, seed=seed * groups + g
        )
        for g in range(groups)
    ]
    return [sets[i % groups][i // groups] for i in range(count)]


async def _turn(client: httpx.AsyncClient, url: str, body: dict) -> tuple[RequestResult, str, int]:
    """One streamed turn; a 429 (an engine's queue-wait budget) is retried after its Retry-After, as the openai SDK
    does, up to RETRIES times. TTFT counts from the first attempt: the wait is the user's."""
    result, retries = RequestResult(start=time.perf_counter()), 0
    while True:
        text = await _attempt(client, url, body, result)
        if not result.error.startswith("429 ") or retries == RETRIES:
            return result, text, retries
        retries += 1
        await asyncio.sleep(min(float(result.error.split(" ", 2)[1]), 5.0))
        result.error = ""


async def _attempt(client: httpx.AsyncClient, url: str, body: dict, result: RequestResult) -> str:
    text: list[str] = []
    try:
        async with client.stream("POST", url, json=body) as answer:
            if answer.status_code == 429:
                result.error = f"429 {answer.headers.get('retry-after', '1')} {(await answer.aread()).decode()[:300]}"
            elif answer.status_code != 200:
                result.error = f"{answer.status_code}: {(await answer.aread()).decode()[:300]}"
            else:
                async for line in answer.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    event = json.loads(line[len("data: ") :])
                    pieces = [c["delta"].get("content") or "" for c in event.get("choices", [])]
                    if any(pieces):
                        result.first_token = result.first_token or time.perf_counter()
                        text += pieces
                    if usage := event.get("usage"):
                        result.prompt_tokens = usage.get("prompt_tokens", 0)
                        result.output_tokens = usage.get("completion_tokens", 0)
    except httpx.HTTPError as error:
        result.error = f"{type(error).__name__}: {error}"
    result.end = time.perf_counter()
    return "".join(text)


async def _conversation(client: httpx.AsyncClient, url: str, model: str, conversation: Conversation) -> list:
    messages = [{"role": "system", "content": str(conversation.system)}]
    results = []
    for turn in conversation.turns:
        messages.append({"role": "user", "content": str(turn.user)})
        body = {
            "model": model,
            "messages": messages,
            "max_tokens": turn.output_len,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        result, answer, retries = await _turn(client, url, body)
        results.append((result, retries))
        if result.error:
            break
        messages.append({"role": "assistant", "content": answer or "ok"})
    return results


async def run_conversations(base_url: str, model: str, conversations: list[Conversation], concurrency: int) -> list:
    """Every turn's (RequestResult, 429 retries), `concurrency` conversations at a time."""
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(timeout=600, limits=limits) as client:

        async def one(conversation: Conversation) -> list:
            async with gate:
                return await _conversation(client, base_url + "/v1/chat/completions", model, conversation)

        done = await asyncio.gather(*[one(c) for c in conversations])
    return [result for results in done for result in results]
