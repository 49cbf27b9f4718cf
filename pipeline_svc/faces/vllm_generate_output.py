"""vLLM 0.33's `/inference/v1/generate` answers (GenerateTokensResponse, GenerateTokensStreamResponse) from the
engine's GenerateResponse stream, key for key in pydantic's order (vLLM dumps its models whole: null where unset).

- request_id: the engine's id, "generate-tokens-" + the client's (vLLM's engine id: what abort_requests takes);
- model, created: the served name (or the request's), the answer's Unix second;
- usage: the engine's counts, prompt_tokens_details {cached_tokens} as vLLM prints it with
  --enable-prompt-tokens-details (and our OpenAI routes always); streamed only with stream_options.include_usage,
  in a last chunk without choices and nulls, continuous_usage_stats adding the running count to every chunk;
- prompt_logprobs: null for the first token, then {id: {logprob, rank, decoded_token: null}}, the prompt token
  first, then its top alternatives; prompt_token_ids with return_token_ids (streamed: on the first chunk only);
- kv_transfer_params: the engine's, after a prefill step;
- choices[]: finish_reason by scaleout_common.finish_reasons ("stop", "length", "abort"; unary "stop" when unset,
  streamed null until the choice ends), stop_reason (the stop token id or string; null for EOS, length, abort),
  token_ids (all, or the new ones), logprobs {content: [{token_id, logprob, rank, top_logprobs}]} (the sampled
  token first, then the alternatives other than it; -inf and NaN are -9999.0), weight_versions [{version, start,
  end}] over the output (streamed: on the choice's last chunk);
- prompt_token_id_logprobs (with sampling_params.prompt_logprob_token_ids; unary only): the engine's scores as
  vLLM's base64 `.npy` of float32 [rows, widest row], -inf where a row named -1 or was shorter (written here: the
  format is numpy's, which this service does not depend on);
- metrics: as vLLM, only the choice's speculation counts (the engine's --per-request-spec-decode-metrics, `n` 1):
  {speculative_decoding} (request_metrics.speculative_decoding; the timings null: vLLM puts none there), on the
  unary answer and the streamed usage chunk (nulls left out); else null / no key;
- null always: mm_placeholders, ec_transfer_params (no multimodal input, no encoder), routed_experts,
  sampling_mask.
"""

from __future__ import annotations

import array
import base64
import math
import sys
import time

from pipeline_svc import request_metrics
from pipeline_svc.faces.vllm_generate_request import VllmGenerate
from pipeline_svc.openai_response import kv_transfer_params
from scaleout.v1 import common_pb2, engine_pb2
from scaleout_common import finish_reasons

FLOOR = -9999.0  # vLLM's floor for -inf and NaN logprobs


def _clamp(value: float) -> float:
    return FLOOR if math.isnan(value) else max(value, FLOOR)


def _rank(rank: int) -> int | None:
    return rank or None


def _positions(token_ids, logprobs: common_pb2.TokenLogprobs):
    """(token id, its logprob, its rank, [(alternative id, logprob, rank)]) per position."""
    for i, token in enumerate(token_ids):
        top = logprobs.top[i] if i < len(logprobs.top) else common_pb2.TopLogprobs()
        rank = logprobs.ranks[i] if i < len(logprobs.ranks) else 0
        alternatives = [(t, lp, j + 1) for j, (t, lp) in enumerate(zip(top.token_ids, top.logprobs)) if t != token]
        yield token, logprobs.logprobs[i], rank, alternatives


def token_logprobs(token_ids, logprobs: common_pb2.TokenLogprobs) -> dict:
    content = []
    for token, value, rank, alternatives in _positions(token_ids, logprobs):
        first = {"token_id": token, "logprob": _clamp(value), "rank": _rank(rank)}
        rest = [{"token_id": t, "logprob": _clamp(lp), "rank": r} for t, lp, r in alternatives]
        content.append({**first, "top_logprobs": [first, *rest]})
    return {"content": content}


def prompt_logprobs(prompt_ids, logprobs: common_pb2.TokenLogprobs) -> list:
    entries: list = [None]
    for token, value, rank, alternatives in _positions(prompt_ids[1:], logprobs):
        entry = {str(token): {"logprob": _clamp(value), "rank": _rank(rank), "decoded_token": None}}
        for t, lp, r in alternatives:
            entry.setdefault(str(t), {"logprob": _clamp(lp), "rank": r, "decoded_token": None})
        entries.append(entry)
    return entries


def npy_base64(rows: list[list[float]], width: int) -> str:
    """float32 [len(rows), width], each row padded with -inf, as numpy's `.npy` (format 1.0: magic, version, a
    header dict padded to 64 bytes, then the values in C order) in base64: what vLLM's numpy2base64 prints."""
    values = array.array("f", [v for row in rows for v in (*row, *[-math.inf] * (width - len(row)))])
    if sys.byteorder == "big":
        values.byteswap()
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({len(rows)}, {width}), }}"
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    npy = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + values.tobytes()
    return base64.b64encode(npy).decode("ascii")


def usage(prompt: int, completion: int, cached: int | None) -> dict:
    details = {"cached_tokens": cached} if cached is not None else None
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": details,
        "completion_tokens_details": None,
    }


class _Choice:
    def __init__(self, index: int):
        self.index = index
        self.token_ids: list[int] = []
        self.logprobs: list[dict] | None = None
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None
        self.spans: list[dict] = []

    def feed(self, choice: engine_pb2.GenerateChoice, version: str, wants_logprobs: bool) -> dict:
        """One engine message's delta for this choice; its streamed chunk's choice."""
        new = list(choice.token_ids)
        if version and new:
            if not self.spans or self.spans[-1]["version"] != version:
                self.spans.append({"version": version, "start": len(self.token_ids), "end": len(self.token_ids)})
            self.spans[-1]["end"] += len(new)
        self.token_ids += new
        delta = token_logprobs(new, choice.logprobs) if wants_logprobs else None
        if delta is not None:
            self.logprobs = (self.logprobs or []) + delta["content"]
        if choice.finish_reason:
            self.finish_reason = finish_reasons.openai_name(choice.finish_reason)
            kind = choice.WhichOneof("stop_reason")
            self.stop_reason = getattr(choice, kind) if kind else None
        return self.json(new, delta, self.finish_reason, self.spans if self.finish_reason else None)

    def json(self, token_ids, logprobs, finish_reason, spans) -> dict:
        return {
            "index": self.index,
            "finish_reason": finish_reason,
            "stop_reason": self.stop_reason,
            "token_ids": token_ids,
            "routed_experts": None,
            "sampling_mask": None,
            "weight_versions": spans or None,
            "logprobs": logprobs,
        }


class GenerateAnswer:
    """Fed the engine's messages in order; gives each message's stream chunks, and the unary answer at the end."""

    def __init__(self, request: VllmGenerate, model: str):
        self.request = request
        self.model = model
        self.request_id = request.typed.request_id
        self.prompt = engine_pb2.PromptInfo()
        self.kv_transfer_params: dict | None = None
        self.choices = {i: _Choice(i) for i in range(request.typed.n if request.typed.HasField("n") else 1)}
        self.prompt_ids_due = request.return_token_ids
        self.wants_logprobs = request.typed.sampling_params.HasField("logprobs")
        self.speculation: engine_pb2.SpeculationCounts | None = None  # the one choice's, with its finish

    def feed(self, message: engine_pb2.GenerateResponse) -> list[dict]:
        if message.HasField("prompt"):
            self.prompt = message.prompt
        if message.HasField("kv_transfer_params"):  # its ids and port as integers, as vLLM prints them
            self.kv_transfer_params = kv_transfer_params([message])["kv_transfer_params"]
        chunks = []
        for choice in message.choices:
            if choice.HasField("speculation") and len(self.choices) == 1:
                self.speculation = choice.speculation
            if not choice.token_ids and not choice.finish_reason:
                continue
            answer = self.choices.setdefault(choice.index, _Choice(choice.index))
            chunks.append(self._chunk(answer, answer.feed(choice, message.weight_version, self.wants_logprobs)))
        return chunks

    def _chunk(self, answer: _Choice, choice: dict) -> dict:
        chunk: dict = {"request_id": self.request_id, "usage": None}
        if self.request.continuous_usage:
            chunk["usage"] = usage(self.prompt.num_tokens, len(answer.token_ids), None)
        if self.prompt_ids_due:
            chunk["prompt_token_ids"] = list(self.request.typed.token_ids)
            self.prompt_ids_due = False
        return chunk | {"output_mode": "tokens", "choices": [choice]}

    def _usage(self) -> dict:
        completion = sum(len(c.token_ids) for c in self.choices.values())
        return usage(self.prompt.num_tokens, completion, self.prompt.cached_tokens)

    def _metrics(self) -> dict | None:
        if self.speculation is None:
            return None
        return request_metrics.untimed(request_metrics.speculative_decoding(self.speculation))

    def usage_chunk(self) -> dict:
        """The streamed usage (stream_options.include_usage), printed as vLLM prints it: nulls left out."""
        counts = {name: value for name, value in self._usage().items() if value is not None}
        chunk = {"request_id": self.request_id, "usage": counts} | request_metrics.without_nulls(self._metrics())
        return chunk | {"output_mode": "tokens", "choices": []}

    def _whole(self, choice: _Choice) -> dict:
        logprobs = {"content": choice.logprobs or []} if self.wants_logprobs else None
        return choice.json(choice.token_ids, logprobs, choice.finish_reason or "stop", choice.spans)

    def _token_id_logprobs(self) -> str | None:
        named = self.request.typed.sampling_params.prompt_logprob_token_ids
        if not named:
            return None
        scores = [list(row.logprobs) for row in self.prompt.token_id_logprobs]
        return npy_base64(scores, max(len(row.token_ids) for row in named))

    def unary(self) -> dict:
        asked = self.request.typed.sampling_params.HasField("prompt_logprobs")
        return {
            "request_id": self.request_id,
            "model": self.model,
            "created": int(time.time()),
            "usage": self._usage(),
            "prompt_logprobs": prompt_logprobs(self.request.typed.token_ids, self.prompt.logprobs) if asked else None,
            "prompt_token_id_logprobs": self._token_id_logprobs(),
            "prompt_token_ids": list(self.request.typed.token_ids) if self.request.return_token_ids else None,
            "mm_placeholders": None,
            "metrics": self._metrics(),
            "kv_transfer_params": self.kv_transfer_params,
            "ec_transfer_params": None,
            "output_mode": "tokens",
            "choices": [self._whole(c) for _, c in sorted(self.choices.items())],
        }
