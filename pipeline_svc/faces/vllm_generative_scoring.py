"""vLLM 0.33's `POST /generative_scoring` (VllmServerService.GenerativeScoring): how likely a generative model is to
continue `query + item` (or `item + query`) with the first of `label_token_ids`, per item, from one label read each
(pipeline_svc/label_reads.py: one greedy token with the labels' logprobs; no chat template).

The request, field by field (vLLM's GenerativeScoringRequest):
- `query`: text (tokenized with `add_special_tokens`, default true) or token ids; `items`: texts (tokenized without
  special tokens, as vLLM does) or lists of token ids, at least one; `item_first` puts each item before the query;
- `label_token_ids`: 1 to 128 ids inside the vocabulary; the score is the first label's probability, renormalized
  over the labels with `apply_softmax` (the default), else over the whole vocabulary;
- `model`, `cache_salt`, `priority`, `request_id` (the answer's id is `generative-scoring-<it>`) as on completions;
- a prompt longer than the model's context less the one token read is refused (PROMPT_TOO_LONG naming the item)
  where vLLM cuts it silently; any other field is refused (UNSUPPORTED_FIELD naming it).
Errors name the client's fields: `label_token_ids[i]`, `items[i]`.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid

import grpc

from pipeline_svc.label_reads import in_client_terms, is_ids, read_token_prompts, tokens_of
from scaleout_common.errors import QUOTE_CHARS, ServiceError, clip
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

FIELDS = {"model", "query", "items", "label_token_ids", "apply_softmax", "item_first", "add_special_tokens"}
FIELDS |= {"cache_salt", "priority", "request_id"}
FLAGS = {"apply_softmax": True, "item_first": False, "add_special_tokens": True}


def _parse(body: bytes) -> tuple[dict, dict]:
    data = {k: v for k, v in load_object(body).items() if v is not None}
    for name in data:
        if name not in FIELDS:
            raise fail(Reason.UNSUPPORTED_FIELD, f"`{clip(name, QUOTE_CHARS)}` is not a field this API takes", name)
    for name in ("query", "items", "label_token_ids"):
        if name not in data:
            raise fail(Reason.INVALID_REQUEST, f"`{name}` is required", name)
    for name, default in FLAGS.items():
        if not isinstance(data.setdefault(name, default), bool):
            raise fail(Reason.INVALID_REQUEST, f"`{name}` must be a boolean", name)
    if not isinstance(data["query"], str) and not is_ids(data["query"]):
        raise fail(Reason.INVALID_REQUEST, "`query` must be a string or a list of token ids", "query")
    items = data["items"]
    if not isinstance(items, list) or not items:
        raise fail(Reason.INVALID_REQUEST, "items must contain at least one item.", "items")
    if not (all(isinstance(i, str) for i in items) or all(is_ids(i) for i in items)):
        raise fail(Reason.INVALID_REQUEST, "`items` must be all strings or all lists of token ids", "items")
    labels = data["label_token_ids"]
    if not is_ids(labels) or not labels:
        raise fail(Reason.INVALID_REQUEST, "label_token_ids must contain at least one token ID.", "label_token_ids")
    shared = {name: data[name] for name in ("model", "cache_salt", "priority") if name in data}
    shared["request_id"] = f"generative-scoring-{data.get('request_id') or uuid.uuid4().hex}"
    return data, shared


async def generative_scoring(hops, body: bytes, context) -> dict:
    data, shared = _parse(body)
    model, parts = data.get("model", ""), None  # each prompt's first part and its length, once tokenized
    try:
        query, *items = await asyncio.gather(
            tokens_of(hops, model, data["query"], data["add_special_tokens"], context),
            *(tokens_of(hops, model, item, False, context) for item in data["items"]),
        )
        first = data["item_first"]
        prompts = [item + query if first else query + item for item in items]
        parts = [("item", len(item)) if first else ("query", len(query)) for item in items]
        reads = await read_token_prompts(hops, prompts, [data["label_token_ids"]] * len(prompts), shared, context)
    except grpc.aio.AioRpcError as error:
        raise in_client_terms(ServiceError.from_rpc_error(error), parts) from None
    except ServiceError as error:
        raise in_client_terms(error, parts) from None
    scores = [read.probs()[0] if data["apply_softmax"] else math.exp(read.logprobs[0]) for read in reads]
    prompt_tokens, completion_tokens = sum(r.input_tokens for r in reads), sum(r.output_tokens for r in reads)
    return {
        "id": shared["request_id"],
        "object": "list",
        "created": int(time.time()),
        "model": reads[0].model,
        "data": [{"index": i, "object": "score", "score": score} for i, score in enumerate(scores)],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": None,
        },
    }
