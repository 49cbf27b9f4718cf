"""Record vLLM's own per-chunk derender against generate chunks of this stack (run by hand, not by CI):

    python -m tests.gateway.record_vllm_derender_stream --ours http://127.0.0.1:8080 --vllm http://127.0.0.1:8000

`--ours` is a running stack (its render and `/inference/v1/generate` give the chunks), `--vllm` a running
`vllm launch render` on the default model (`--served-model-name SmolLM2-135M-Instruct --enable-auto-tool-choice
--tool-call-parser hermes`, as tests/render/record_vllm_render.py starts it; it serves the derender routes too).
Each request's chunks are posted one call each to vLLM's derender, carrying its stream_state, and the chunks and
vLLM's answers are written to `vllm_derender_stream_answers.json`, which test_vllm_scale_out.py replays against ours.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import requests

ANSWERS = Path(__file__).with_name("vllm_derender_stream_answers.json")
MODEL = "SmolLM2-135M-Instruct"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "What is the capital of France?"}]}
CHAT |= {"max_tokens": 12, "temperature": 0, "logprobs": True, "top_logprobs": 2, "return_token_ids": True}
COMPLETION = {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "logprobs": 1}
# name -> (render path, derender path, the request, its field in the derender body)
CASES = {
    "chat": ("/v1/chat/completions/render", "/v1/chat/completions/derender", CHAT, "chat_request"),
    "completion": ("/v1/completions/render", "/v1/completions/derender", COMPLETION, "completion_request"),
}


def generate_chunks(url: str, rendered: dict) -> list[dict]:
    body = rendered | {"stream": True, "stream_options": {"include_usage": True}}
    answer = requests.post(url + "/inference/v1/generate", json=body, timeout=120)
    lines = [line[len("data: ") :] for line in answer.text.splitlines() if line.startswith("data: ")]
    return [json.loads(line) for line in lines if line != "[DONE]"]


def derender(url: str, path: str, chunks: list[dict], fields: dict) -> list[dict]:
    state, out = None, []
    for chunk in chunks:
        answer = requests.post(
            url + path, json={"stream": True, "generate_chunk": chunk, "stream_state": state, **fields}
        )
        answer.raise_for_status()
        out.append(answer.json())
        state = out[-1]["stream_state"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ours", required=True, help="a running stack's gateway URL")
    parser.add_argument("--vllm", required=True, help="a running `vllm launch render` URL")
    args = parser.parse_args()
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    models = {"chat_request": ChatCompletionRequest, "completion_request": CompletionRequest}
    recorded = {}
    for name, (render_path, derender_path, request, field) in CASES.items():
        rendered = requests.post(args.ours + render_path, json=request, timeout=120).json()
        rendered = rendered[0] if isinstance(rendered, list) else rendered
        fields = {field: models[field].model_validate(request).model_dump(mode="json")}
        fields |= {"prompt_tokens": len(rendered["token_ids"]), "prompt_token_ids": rendered["token_ids"]}
        chunks = generate_chunks(args.ours, rendered)
        answers = derender(args.vllm, derender_path, chunks, fields)
        recorded[name] = {"path": derender_path, "fields": fields, "chunks": chunks, "vllm": answers}
    ANSWERS.write_text(json.dumps(recorded, ensure_ascii=False) + "\n")
    print(f"recorded {sum(len(r['chunks']) for r in recorded.values())} chunks' answers in {ANSWERS}")


if __name__ == "__main__":
    main()
