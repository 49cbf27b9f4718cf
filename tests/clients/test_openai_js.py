"""The official `openai` npm package (Node) against the gateway: a streamed chat and errors as JS code reads them.

Needs `node` and `npm` (skipped without them, or offline with a cold npm cache: tests/clients/node.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.clients.node import node_major, npm_project
from tests.clients.prompts import COUNT

pytestmark = pytest.mark.slow

SCRIPT = r"""
import OpenAI from "openai";

const [baseURL, model, messagesJson] = process.argv.slice(2);
const messages = JSON.parse(messagesJson);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const out = {};

// stream=true: tokens as they come
const stream = await client.chat.completions.create({
  model, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
});
const parts = [], finish = [];
let usage = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  for (const choice of chunk.choices) {
    if (choice.delta?.content) parts.push(choice.delta.content);
    if (choice.finish_reason) finish.push(choice.finish_reason);
  }
  if (chunk.usage) usage = chunk.usage;
}
out.stream = { chunks, parts, finish, usage };

// the SDK's stream helper, assembling the message
const runner = client.chat.completions.stream({ model, messages, max_tokens: 12, temperature: 0 });
let deltas = 0;
runner.on("content", () => deltas++);
const final = await runner.finalChatCompletion();
out.helper = { deltas, content: final.choices[0].message.content, finish: final.choices[0].finish_reason };

async function error(call) {
  try { await call(); return null; }
  catch (e) { return { name: e.constructor.name, status: e.status, code: e.code, param: e.param, type: e.type, message: e.message }; }
}
out.badTemperature = await error(() => client.chat.completions.create({ model, messages, temperature: -1 }));
out.badTemperatureStream = await error(async () => {
  for await (const _ of await client.chat.completions.create({ model, messages, temperature: -1, stream: true })) {}
});
out.unknownModel = await error(() => client.chat.completions.create({ model: "no-such-model", messages }));
console.log(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def node_project(tmp_path_factory) -> Path:
    major = node_major()
    if major < 20:
        pytest.skip(f"node {major}: the openai npm package supports Node 20 and later")
    # openai 7 declares node >= 22; 6.x is the line for Node 20 (the same client API for what is used here)
    spec = "openai" if major >= 22 else "openai@6"
    return npm_project(tmp_path_factory.mktemp("openai-js"), spec, {"client.mjs": SCRIPT})


def test_openai_js_streams_and_reads_errors(node_project, client, base_url, model_id):
    run = subprocess.run(
        ["node", "client.mjs", base_url, model_id, json.dumps(COUNT)],
        check=False,
        cwd=node_project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    expected = client.chat.completions.create(model=model_id, messages=COUNT, max_tokens=12, temperature=0)
    text, finish = expected.choices[0].message.content, expected.choices[0].finish_reason

    stream = out["stream"]
    assert len(stream["parts"]) > 3, "the answer came in one piece, not token by token"
    assert "".join(stream["parts"]) == text
    assert stream["finish"] == [finish]
    counts = ("prompt_tokens", "completion_tokens", "total_tokens")  # cached_tokens depends on what ran before
    assert {k: stream["usage"][k] for k in counts} == {k: getattr(expected.usage, k) for k in counts}
    assert stream["chunks"] == len(stream["parts"]) + 1  # + the usage chunk (no empty chunks)

    assert out["helper"] == {"deltas": len(stream["parts"]), "content": text, "finish": finish}

    for name in ("badTemperature", "badTemperatureStream"):
        error = out[name]
        assert error["name"] == "BadRequestError", error
        assert (error["status"], error["code"], error["param"], error["type"]) == (
            400,
            "INVALID_SAMPLING_PARAM",
            "temperature",
            "invalid_request_error",
        )
        assert "temperature" in error["message"]
    error = out["unknownModel"]
    assert (error["name"], error["status"], error["code"], error["param"]) == (
        "NotFoundError",
        404,
        "MODEL_NOT_FOUND",
        "model",
    )
