"""Tokens a forced tool call and a schema output take with compact JSON (the default) and with any whitespace
(`structured_outputs: {"disable_any_whitespace": false}`), on the default model through the whole stack, at the
default temperature: mean completion tokens and how many runs end as they should (`tool_calls` / `stop`)
rather than `length`.

    python -m bench.structured.whitespace --runs 20 --max-tokens 64
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

from devstack.stack import Stack, StackConfig
from tests.clients.test_structured_outputs import TIME, WEATHER, ask

CITY = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "country": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["name", "country", "population"],
}
CASES = {
    "forced tool call": dict(
        messages=[{"role": "user", "content": "What is the weather in Oslo?"}],
        tools=[WEATHER, TIME],
        tool_choice="required",
    ),
    "forced, one call": dict(
        messages=[{"role": "user", "content": "What is the weather in Oslo?"}],
        tools=[WEATHER, TIME],
        tool_choice="required",
        parallel_tool_calls=False,
    ),
    "schema output": dict(
        messages=ask("facts about Lyon"),
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}},
    ),
}
ENDS = {"forced tool call": "tool_calls", "forced, one call": "tool_calls", "schema output": "stop"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    with Stack(StackConfig(port=0, log_dir=Path(tempfile.mkdtemp(prefix="ws-bench-")))) as stack:
        client = openai.OpenAI(base_url=stack.rest_url + "/v1", api_key="unused", max_retries=0, timeout=600)
        model = client.models.list().data[0].id
        print(f"{'case':18} {'whitespace':11} {'tokens':>7} {'ended right':>12}")
        for name, case in CASES.items():
            for label, extra in (("compact", {}), ("any", {"structured_outputs": {"disable_any_whitespace": False}})):

                def call(seed: int, case=case, extra=extra):
                    return client.chat.completions.create(
                        model=model, max_tokens=args.max_tokens, seed=seed, extra_body=extra or None, **case
                    )

                with ThreadPoolExecutor(4) as pool:
                    results = list(pool.map(call, range(args.runs)))
                tokens = statistics.mean(r.usage.completion_tokens for r in results)
                ended = sum(r.choices[0].finish_reason == ENDS[name] for r in results)
                print(f"{name:18} {label:11} {tokens:7.1f} {ended:>5} of {args.runs}", flush=True)


if __name__ == "__main__":
    main()
