"""Forced tool calls under a tight max_tokens (issue 38): per seed, the finish reason, the completion tokens, and
the tokens of each whole call (from the returned logprobs' tokens) and of what a cut left open, on the default
model through the whole stack at its default temperature.

    python -m bench.structured.forced_calls --runs 20 --max-tokens 64            # parallel_tool_calls true
    python -m bench.structured.forced_calls --runs 20 --max-tokens 64 --one-call  # parallel_tool_calls false
    python -m bench.structured.forced_calls --runs 20 --max-tokens 48 --auto-strict  # strict tools, tool_choice auto

`--auto-strict`: the tool is strict and the tool choice auto (render's structural tag: free text, then hermes
`<tool_call>` tags), the prompt teaches the format and asks for two cities; a call is a whole tag.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai

from devstack.stack import Stack, StackConfig
from tests.clients.prompts import WEATHER_TWO_CITIES
from tests.clients.test_strict_tools import STRICT_WEATHER
from tests.clients.test_structured_outputs import TIME, WEATHER

CLOSE = "</tool_call>"


def call_tokens(tokens: list[str]) -> tuple[list[int], int]:
    """Each whole call's tokens (the list's opening or the separator goes with the call after it; a token that
    closes a call and writes the separator, with the call it closes) and the tokens after the last whole call."""
    depth, in_string, escaped, calls, count = 0, False, False, [], 0
    for token in tokens:
        count += 1
        for char in token:
            if in_string:
                escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
            elif char == '"':
                in_string = True
            elif char in "[{":
                depth += 1
            elif char in "]}":
                depth -= 1
                if depth == 1 and char == "}":
                    calls.append(count)
                    count = 0
    return calls, count


def tag_tokens(tokens: list[str]) -> tuple[list[int], int]:
    """`call_tokens` for hermes tags: each whole `<tool_call>...</tool_call>` with the text before it."""
    calls, count, text = [], 0, ""
    for token in tokens:
        count, text = count + 1, text + token
        if CLOSE in text:
            calls.append(count)
            count, text = 0, text[text.rindex(CLOSE) + len(CLOSE) :]
    return calls, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--one-call", action="store_true", help="parallel_tool_calls false")
    parser.add_argument("--auto-strict", action="store_true", help="strict tools under tool_choice auto (hermes)")
    args = parser.parse_args()
    with Stack(StackConfig(port=0, log_dir=Path(tempfile.mkdtemp(prefix="forced-calls-")))) as stack:
        # (a retry asks the same seed again: for an overloaded host's 503s)
        client = openai.OpenAI(base_url=stack.rest_url + "/v1", api_key="unused", max_retries=2, timeout=3600)
        model = client.models.list().data[0].id

        def call(seed: int):
            ask: dict[str, Any]
            if args.auto_strict:
                ask = dict(messages=WEATHER_TWO_CITIES, tools=STRICT_WEATHER, tool_choice="auto")
            else:
                ask = dict(
                    messages=[{"role": "user", "content": "What is the weather in Oslo?"}],
                    tools=[WEATHER, TIME],
                    tool_choice="required",
                )
            return client.chat.completions.create(
                model=model,
                **ask,
                parallel_tool_calls=not args.one_call,
                max_tokens=args.max_tokens,
                seed=seed,
                logprobs=True,
            )

        start = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(call, range(args.runs)))
        seconds = time.perf_counter() - start
    print(f"{'seed':>4} {'finish':10} {'tokens':>6}  whole calls' tokens, then what a cut left open")
    for seed, result in enumerate(results):
        choice = result.choices[0]
        tokens = [t.token for t in (choice.logprobs.content if choice.logprobs else None) or []]
        calls, tail = (tag_tokens if args.auto_strict else call_tokens)(tokens)
        cut = (
            f" + {tail} open: {''.join(tokens[len(tokens) - tail :])[:40]!r}"
            if choice.finish_reason == "length"
            else ""
        )
        print(f"{seed:>4} {choice.finish_reason:10} {result.usage.completion_tokens:>6}  {calls}{cut}")
    ended = sum(r.choices[0].finish_reason == "tool_calls" for r in results)
    tokens = statistics.mean(r.usage.completion_tokens for r in results)
    print(f"tool_calls {ended} of {args.runs}; {tokens:.1f} completion tokens per answer; {seconds:.0f} s")


if __name__ == "__main__":
    main()
