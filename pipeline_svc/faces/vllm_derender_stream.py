"""vLLM 0.33's per-chunk streaming derender (`stream: true` on `POST /v1/chat/completions/derender` and
`/v1/completions/derender`) as a face over DerenderService.DerenderChunk.

vLLM's client sends one call per `/inference/v1/generate` SSE chunk: `generate_chunk` (its
GenerateTokensStreamResponse, at most one choice), the `stream_state` the previous call answered (null on the first),
and the request render was given; each answer is `{chunk, stream_state}`, the chunk its ChatCompletionStreamResponse
/ CompletionStreamResponse. Nothing is kept here between calls: as vLLM's parser path does, every call starts a fresh
derender, replays the output so far (`stream_state.output_token_ids`) and derenders the new chunk after it, so the
chunk is the delta a whole-stream derender would have sent. The state, field by field:

| DerenderStreamState       | here                                                                                  |
|---------------------------|---------------------------------------------------------------------------------------|
| output_token_ids          | the output so far, replayed before the chunk (the chunk's ids appended in the answer)  |
| output_chunk_lens         | each chunk's length, positive and summing to output_token_ids' (else 400); appended   |
| role_sent                 | `role: "assistant"` on the first chunk with a choice only                              |
| tools_streamed            | once a tool call was sent, a "stop" finish is "tool_calls" (as vLLM)                   |
| last_tool_call_ids        | each call index's id, pinned: a call keeps the id it was first sent with               |
| logprob_context_token_ids | the last 4 output ids (must be output_token_ids' tail, else 400)                        |
| logprob_text_offset       | completions: the first token's `text_offset` (the token texts sent so far, as vLLM's)  |
| prev_tokens, prefix_offset, read_offset | vLLM's plain-detokenization window: its own states only; non-empty: 400  |

The chunk: `id` is generate_chunk.request_id, `usage` present when the chunk has usage (`prompt_tokens` the body's,
else the chunk's), `metrics` the chunk's, `token_ids` / `prompt_token_ids` the chunk's when the request asked
`return_token_ids`, as vLLM. Of the chunk, `mm_placeholders` and a choice's `routed_experts` / `sampling_mask` are
null only (this stack never produces them); `weight_versions` is read by no derender (vLLM's neither).
Differences kept on purpose: stop strings are served (vLLM refuses them here: derender holds back what may begin
one, and the replay holds back the same), `prompt_token_ids` is optional with a parser (render knows the prompt and
whether it opened reasoning). Without `chat_request` / `completion_request`, vLLM's defaults, as the unary route
(vllm_derender.request_contexts). Refused naming the field: more than one choice in a chunk, an answer not at output
mode `tokens`, `completion_request.echo` (vLLM ignores it per chunk).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import grpc
from google.api import httpbody_pb2

from pipeline_svc.faces.rl_json import only, strings, typed
from pipeline_svc.faces.vllm_derender import engine_choice, request_contexts, seed
from pipeline_svc.faces.vllm_generate_output import usage
from pipeline_svc.faces.vllm_generate_request import token_ids
from pipeline_svc.hops import Hops
from pipeline_svc.openai_response import chat_chunk, completion
from pipeline_svc.request_metrics import as_vllms
from pipeline_svc.shaped_route import json_body
from scaleout.v1 import derender_pb2, engine_pb2
from scaleout_common.errors import ServiceError, clip
from scaleout_common.reasons import Reason, fail

CHAT = ("stream", "model", "generate_chunk", "stream_state", "prompt_tokens", "prompt_token_ids", "chat_request")
COMPLETION = ("stream", "model", "generate_chunk", "stream_state", "prompt_tokens", "prompt_token_ids")
COMPLETION += ("completion_request",)
# vLLM's GenerateTokensStreamResponse: the keys taken (the null-only ones as /inference/v1/generate prints them)
CHUNK = ("request_id", "usage", "prompt_token_ids", "mm_placeholders", "metrics", "output_mode", "choices")
STATE = ("prev_tokens", "prefix_offset", "read_offset", "role_sent", "logprob_context_token_ids")
STATE += ("logprob_text_offset", "output_token_ids", "output_chunk_lens", "tools_streamed", "last_tool_call_ids")
LOGPROB_WINDOW = 4  # vLLM's byte-fallback context: the last sampled ids
NULL_ONLY = ("routed_experts", "sampling_mask")  # a choice's fields this stack never produces


@dataclass
class StreamState:
    """vLLM's DerenderStreamState as this face reads and writes it (its plain-detokenization window left empty)."""

    role_sent: bool = False
    logprob_text_offset: int = 0
    output_token_ids: list[int] = field(default_factory=list)
    output_chunk_lens: list[int] = field(default_factory=list)
    tools_streamed: bool = False
    last_tool_call_ids: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, value) -> StreamState:
        if value is None:
            return cls()
        where = "stream_state"
        only(typed(value, dict, where), STATE, where)
        for name, empty in (("prev_tokens", []), ("prefix_offset", 0), ("read_offset", 0)):
            if value.get(name, empty) != empty:
                why = "is vLLM's plain-detokenization window: this server replays output_token_ids and sends none"
                raise fail(Reason.UNSUPPORTED_FIELD, f"{where}.{name} {why}", f"{where}.{name}")
        state = cls(
            role_sent=typed(value.get("role_sent", False), bool, f"{where}.role_sent"),
            logprob_text_offset=_count(value.get("logprob_text_offset", 0), f"{where}.logprob_text_offset"),
            output_token_ids=token_ids(value.get("output_token_ids", []), f"{where}.output_token_ids"),
            output_chunk_lens=typed(value.get("output_chunk_lens", []), list, f"{where}.output_chunk_lens"),
            tools_streamed=typed(value.get("tools_streamed", False), bool, f"{where}.tools_streamed"),
            last_tool_call_ids=strings(value.get("last_tool_call_ids", []), f"{where}.last_tool_call_ids"),
        )
        lens = [_count(n, f"{where}.output_chunk_lens") for n in state.output_chunk_lens]
        if 0 in lens or sum(lens) != len(state.output_token_ids):
            why = "must be positive and sum to len(output_token_ids)"
            raise fail(Reason.INVALID_REQUEST, f"{where}.output_chunk_lens {why}", f"{where}.output_chunk_lens")
        tail = value.get("logprob_context_token_ids", [])
        if tail != state.output_token_ids[-LOGPROB_WINDOW:]:
            name = f"{where}.logprob_context_token_ids"
            raise fail(Reason.INVALID_REQUEST, f"{name} must be the last {LOGPROB_WINDOW} output_token_ids", name)
        return state

    def json(self) -> dict:
        return {
            "prev_tokens": [],
            "prefix_offset": 0,
            "read_offset": 0,
            "role_sent": self.role_sent,
            "logprob_context_token_ids": self.output_token_ids[-LOGPROB_WINDOW:],
            "logprob_text_offset": self.logprob_text_offset,
            "output_token_ids": self.output_token_ids,
            "output_chunk_lens": self.output_chunk_lens,
            "tools_streamed": self.tools_streamed,
            "last_tool_call_ids": self.last_tool_call_ids,
        }


def _count(value, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise fail(Reason.INVALID_REQUEST, f"{name} must be a non-negative integer", name)
    return value


def _chunk(value) -> tuple[dict, dict | None]:
    """generate_chunk, checked, and its one choice (None for a usage-only chunk)."""
    where = "generate_chunk"
    only({k: v for k, v in typed(value, dict, where).items() if v is not None}, CHUNK, where)  # null: not given
    if value.get("output_mode", "tokens") != "tokens":
        raise fail(Reason.UNSUPPORTED_FIELD, f"{where}.output_mode: only 'tokens' chunks", f"{where}.output_mode")
    typed(value.get("request_id", ""), str, f"{where}.request_id")
    choices = typed(value.get("choices"), list, f"{where}.choices")
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    given = {f"{where}.mm_placeholders": value.get("mm_placeholders")}
    given |= {f"{where}.choices[0].{name}": first.get(name) for name in NULL_ONLY}
    for name, set_to in given.items():
        if set_to is not None:
            raise fail(Reason.UNSUPPORTED_FIELD, f"{name}: only null (never produced by this stack)", name)
    if len(choices) > 1:
        why = f"{where}.choices: at most one choice per chunk (got {len(choices)}); one stream_state per choice"
        raise fail(Reason.INVALID_REQUEST, why, f"{where}.choices")
    return value, typed(choices[0], dict, f"{where}.choices[0]") if choices else None


def _usage(chunk: dict, prompt_tokens) -> dict | None:
    given = chunk.get("usage")
    if given is None:
        return None
    given = typed(given, dict, "generate_chunk.usage")
    prompt = prompt_tokens if prompt_tokens is not None else given.get("prompt_tokens") or 0
    completion_tokens = _count(given.get("completion_tokens") or 0, "generate_chunk.usage.completion_tokens")
    return usage(_count(prompt, "prompt_tokens"), completion_tokens, None)


class VllmDerenderStream:
    def __init__(self, hops: Hops, model_name):
        self.hops = hops
        self.model_name = model_name  # (asked name or None, context) -> the served name, 404 for another

    async def chat(self, body: dict, context) -> httpbody_pb2.HttpBody:
        only(body, CHAT)
        chunk, choice, state, model = await self._read(body, context)
        request, contexts = await request_contexts(self.hops, body, "chat_request", context)
        derendered = await self._derender(contexts[0], body, chunk, choice, state, context)
        out = {"id": chunk.get("request_id", ""), "object": "chat.completion.chunk", "created": int(time.time())}
        out |= {"model": model, "choices": [], "usage": _usage(chunk, body.get("prompt_tokens"))}
        out["metrics"] = as_vllms(chunk.get("metrics"))  # as vLLM: the generate chunk's, passed on
        return_ids = bool(request.get("return_token_ids"))
        out["prompt_token_ids"] = chunk.get("prompt_token_ids") if return_ids else None
        if choice is not None:
            ours = chat_chunk(derendered.chat, with_usage=False)["choices"] if derendered else []
            delta = ours[0] if ours else {"index": choice["index"], "delta": {}, "logprobs": None}
            delta |= {"finish_reason": delta.get("finish_reason"), "stop_reason": delta.get("stop_reason")}
            named = isinstance(request.get("tool_choice"), dict)  # a forced call ends "stop", as vLLM and OpenAI
            out["choices"] = [self._chat_choice(delta, state, named) | _ids(choice, return_ids)]
            _advance(state, choice)
        return _answer(out, state)

    @staticmethod
    def _chat_choice(choice: dict, state: StreamState, named: bool = False) -> dict:
        delta = choice["delta"]
        delta.pop("role", None)
        if not state.role_sent:
            delta = {"role": "assistant", **delta}
            state.role_sent = True
        for call in delta.get("tool_calls", ()):
            state.tools_streamed = True
            if "id" in call:  # a call's first delta: its id pinned for the index
                if call["index"] < len(state.last_tool_call_ids):
                    call["id"] = state.last_tool_call_ids[call["index"]]
                else:
                    state.last_tool_call_ids.append(call["id"])
        if state.tools_streamed and choice["finish_reason"] == "stop" and not named:
            choice["finish_reason"] = "tool_calls"
        return choice | {"delta": delta}

    async def completion(self, body: dict, context) -> httpbody_pb2.HttpBody:
        only(body, COMPLETION)
        if (body.get("completion_request") or {}).get("echo"):
            why = "completion_request.echo is not served per chunk: use the unary derender or /v1/completions"
            raise fail(Reason.UNSUPPORTED_FIELD, why, "completion_request.echo")
        chunk, choice, state, model = await self._read(body, context)
        request, contexts = await request_contexts(self.hops, body, "completion_request", context)
        if len(contexts) > 1 and body.get("prompt_token_ids", chunk.get("prompt_token_ids")) is None:
            del contexts[0].prompt_tail_token_ids[:]  # which prompt is not said: unseeded, as vLLM
        derendered = await self._derender(contexts[0], body, chunk, choice, state, context)
        out = {"id": chunk.get("request_id", ""), "object": "text_completion", "created": int(time.time())}
        out |= {"model": model, "choices": [], "usage": _usage(chunk, body.get("prompt_tokens"))}
        out["metrics"] = as_vllms(chunk.get("metrics"))
        if choice is not None:
            ours = completion(derendered.completion, streamed=True)["choices"] if derendered else []
            text = ours[0] if ours else {"index": choice["index"], "text": "", "logprobs": None}
            text |= {"finish_reason": text.get("finish_reason"), "stop_reason": text.get("stop_reason")}
            self._offsets(text, state)
            return_ids = bool(request.get("return_token_ids"))
            text |= {"prompt_token_ids": chunk.get("prompt_token_ids") if return_ids else None}
            out["choices"] = [text | _ids(choice, return_ids)]
            _advance(state, choice)
        return _answer(out, state)

    @staticmethod
    def _offsets(choice: dict, state: StreamState) -> None:
        """`text_offset` from the carried logprob_text_offset on, and the next one (vLLM's: past the last token)."""
        logprobs = choice.get("logprobs")
        if not logprobs or not logprobs["tokens"]:
            state.logprob_text_offset += len(choice["text"])
            return
        first = logprobs["text_offset"][0]
        logprobs["text_offset"] = [state.logprob_text_offset + o - first for o in logprobs["text_offset"]]
        state.logprob_text_offset = logprobs["text_offset"][-1] + len(logprobs["tokens"][-1])

    async def _read(self, body: dict, context) -> tuple[dict, dict | None, StreamState, str]:
        model = await self.model_name(typed(body.get("model") or "", str, "model") or None, context)
        chunk, choice = _chunk(body.get("generate_chunk"))
        if body.get("prompt_tokens") is not None:
            _count(body["prompt_tokens"], "prompt_tokens")
        return chunk, choice, StreamState.read(body.get("stream_state")), model

    async def _derender(self, derender_context, body, chunk, choice, state, context):
        """The chunk's derender after the replayed output (None for a usage-only chunk)."""
        if choice is None:
            return None
        derender_context.id = chunk.get("request_id", "")  # tool call ids follow it, as the chunk's id
        derender_context.include_usage = derender_context.continuous_usage_stats = False  # usage is the chunk's
        derender_context.echo, derender_context.prompt_index = False, 0
        prompt_ids = body.get("prompt_token_ids", chunk.get("prompt_token_ids"))
        seed(derender_context, prompt_ids, "prompt_token_ids")
        message = engine_pb2.GenerateResponse(request_id=derender_context.id)
        path = "generate_chunk.choices[0]"
        try:
            engine_choice(message.choices.add(), choice, path, whole=False)
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise fail(Reason.INVALID_REQUEST, f"{path} is not vLLM's choice: {clip(str(error))}", path) from None
        replay = engine_pb2.GenerateResponse(request_id=derender_context.id)
        prior = state.output_token_ids
        zeros = [0.0] * len(prior)  # the logprobs' carried bytes and offsets advance; their values are not shown
        replay.choices.add(index=message.choices[0].index, token_ids=prior).logprobs.logprobs.extend(zeros)
        try:
            previous = b""
            if prior:
                previous = (await self._chunk_call(derender_context, replay, b"", context)).state
            return await self._chunk_call(derender_context, message, previous, context)
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None

    async def _chunk_call(self, derender_context, message, state: bytes, context) -> derender_pb2.DerenderChunkResponse:
        request = derender_pb2.DerenderChunkRequest(context=derender_context, engine_output=message, state=state)
        return await self.hops.derender.DerenderChunk(request, timeout=context.time_remaining())


def _ids(choice: dict, return_ids: bool) -> dict:
    return {"token_ids": choice.get("token_ids") if return_ids else None}


def _advance(state: StreamState, choice: dict) -> None:
    ids = choice.get("token_ids") or []
    if ids:
        state.output_token_ids = [*state.output_token_ids, *ids]
        state.output_chunk_lens = [*state.output_chunk_lens, len(ids)]


def _answer(chunk: dict, state: StreamState) -> httpbody_pb2.HttpBody:
    return json_body({"chunk": chunk, "stream_state": state.json()})
