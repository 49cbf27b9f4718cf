"""Anthropic's tool runners on their default path, message threads, against the real stack behind the gateway.

The SDKs (Python `client.beta.messages.tool_runner`, TypeScript `client.beta.messages.toolRunner`) send the first
turn with `"thread": {"type": "create"}` and header `anthropic-beta: message-threads-2026-08-12`, and each later
turn with `{"type": "continue", "previous_message_id": ...}` and only the new messages. This deployment keeps no
conversation, so it takes the `create` as the whole request and answers a `continue` 404 with
`error.details.error_code: "thread_not_found"`, on which the SDKs replay the whole conversation under a new thread
(anthropic/lib/threads/_thread_state.py `recovers_from`, lib/internal/threads/ThreadState `recoversFrom`). The
tests record every request the SDK sends and check that sequence, and that the loop ends with the model's answer to
the tool's result.

The TypeScript half needs `node` and `npm` (skipped without them, or offline with a cold npm cache).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anthropic
import httpx2
import pytest
from anthropic import beta_tool

from tests.clients.node import npm_project
from tests.clients.test_anthropic_sdk import GREEDY, TOOL_SYSTEM, WEATHER

pytestmark = pytest.mark.slow

THREADS_BETA = "message-threads-2026-08-12"


@beta_tool
def get_weather(city: str) -> str:
    """Current weather in a city

    Args:
        city: the city
    """
    return f"18 degrees and sunny in {city}"


def _turns(sent: list[tuple[dict, int, str]]) -> list[tuple[str, int]]:
    return [(body.get("thread", {}).get("type", "none"), status) for body, status, _ in sent]


def test_python_tool_runner_replays_a_thread_it_cannot_continue(stack, model_id):
    sent: list[tuple[dict, int, str]] = []

    def record(response: httpx2.Response) -> None:
        request = response.request
        if request.url.path.startswith("/v1/messages"):
            sent.append((json.loads(request.content), response.status_code, request.headers.get("anthropic-beta", "")))

    http = anthropic.DefaultHttpxClient(event_hooks={"response": [record]})
    with anthropic.Anthropic(base_url=stack.rest_url, api_key="unused", max_retries=0, http_client=http) as claude:
        runner = claude.beta.messages.tool_runner(
            model=model_id,
            max_tokens=64,
            system=TOOL_SYSTEM,
            tools=[get_weather],
            messages=WEATHER,
            max_iterations=2,
            extra_body=GREEDY,
        )
        replies = list(runner)
    assert replies[0].stop_reason == "tool_use"
    [call] = [b for b in replies[0].content if b.type == "tool_use"]
    assert call.name == "get_weather" and call.input == {"city": "Paris"}
    # create (the tool call), continue (refused: no thread is kept), create again with the whole conversation
    assert _turns(sent)[:3] == [("create", 200), ("continue", 404), ("create", 200)], _turns(sent)
    assert all(THREADS_BETA in beta for _, _, beta in sent)
    replay = sent[2][0]
    assert replay["system"] == TOOL_SYSTEM and [t["name"] for t in replay["tools"]] == ["get_weather"]
    roles = [m["role"] for m in replay["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]  # WEATHER, the call, its result
    assert replay["messages"][-1]["content"][0]["type"] == "tool_result"
    assert len(replies) == 2 and replies[1].content


def test_thread_continue_is_a_typed_not_found(stack, model_id):
    """What the SDKs read: 404 not_found_error with `error.details.error_code`, Anthropic's own shape."""
    with anthropic.Anthropic(base_url=stack.rest_url, api_key="unused", max_retries=0) as claude:
        with pytest.raises(anthropic.NotFoundError) as refused:
            claude.beta.messages.create(
                model=model_id,
                max_tokens=8,
                messages=[{"role": "user", "content": "hi"}],
                thread={"type": "continue", "previous_message_id": "msg_0123"},
                betas=[THREADS_BETA],
            )
        error = refused.value.body["error"]
        assert error["type"] == "not_found_error" and error["details"] == {"error_code": "thread_not_found"}
        assert error["code"] == "THREAD_NOT_FOUND" and error["param"] == "thread.previous_message_id"
        with pytest.raises(anthropic.BadRequestError) as refused:
            claude.beta.messages.create(
                model=model_id, max_tokens=8, messages=[{"role": "user", "content": "hi"}], thread={"type": "fork"}
            )
        assert refused.value.body["error"]["param"] == "thread.type"


TS_SCRIPT = r"""
import Anthropic from "@anthropic-ai/sdk";
import { betaTool } from "@anthropic-ai/sdk/helpers/beta/json-schema";

const [baseURL, model, system, messagesJson, greedyJson] = process.argv.slice(2);
const sent = [];
const recording = async (url, init) => {
  const response = await fetch(url, init);
  if (String(url).includes("/v1/messages")) {
    const headers = new Headers(init?.headers);
    sent.push({ body: JSON.parse(init.body), status: response.status, beta: headers.get("anthropic-beta") ?? "" });
  }
  return response;
};
const client = new Anthropic({ baseURL, apiKey: "unused", maxRetries: 0, fetch: recording });
const calls = [];
const weather = betaTool({
  name: "get_weather",
  description: "Current weather in a city",
  inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  run: async ({ city }) => { calls.push(city); return `18 degrees and sunny in ${city}`; },
});
const runner = client.beta.messages.toolRunner({
  model, max_tokens: 64, system, tools: [weather], messages: JSON.parse(messagesJson), max_iterations: 2,
  ...JSON.parse(greedyJson),
});
const replies = [];
for await (const message of runner) replies.push({ stop_reason: message.stop_reason, content: message.content });
console.log(JSON.stringify({ sent, calls, replies }));
"""


@pytest.fixture(scope="module")
def node_project(tmp_path_factory) -> Path:
    return npm_project(tmp_path_factory.mktemp("anthropic-js"), "@anthropic-ai/sdk", {"runner.mjs": TS_SCRIPT})


def test_typescript_tool_runner_replays_a_thread_it_cannot_continue(node_project, stack, model_id):
    argv = [stack.rest_url, model_id, TOOL_SYSTEM, json.dumps(WEATHER), json.dumps(GREEDY)]
    run = subprocess.run(
        ["node", "runner.mjs", *argv], check=False, cwd=node_project, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    turns = [(s["body"].get("thread", {}).get("type", "none"), s["status"]) for s in out["sent"]]
    assert turns[:3] == [("create", 200), ("continue", 404), ("create", 200)], turns
    assert all(THREADS_BETA in s["beta"] for s in out["sent"])
    assert out["calls"] == ["Paris"]
    assert out["replies"][0]["stop_reason"] == "tool_use" and len(out["replies"]) == 2
    replay = out["sent"][2]["body"]
    assert replay["messages"][-1]["content"][0]["type"] == "tool_result"
