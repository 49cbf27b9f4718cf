"""SGLang's `POST /v1/score` over a generative model (its ScoringRequest with `label_token_ids`; the same path serves
vLLM's bi-encoder `/score` body, faces/vllm_scoring.py): per item, the probability of each label token right after
`query + item` (or `item + query`), from one label read each (pipeline_svc/label_reads.py).

The request, field by field (SGLang's ScoringRequest and its TokenizerManager.score_request checks and words):
- `query` and `items`: both text (each prompt is the text `query + item` tokenized whole, as SGLang does) or both
  token ids (the ids joined); `items` one string, strings or lists of ids (none: no scores); `item_first` puts each
  item first; no `query`: the items alone;
- `label_token_ids`: one nonempty list for every item, or one per item, each without duplicates, inside the
  vocabulary; a row of `scores` per item holds its labels' probabilities over the whole vocabulary, or with
  `apply_softmax` over the labels, sharpened by `temperature` (which needs `apply_softmax`, as SGLang says);
- `model` is echoed; SGLang's embedding overrides, setwise readout (`score_extraction_token`),
  `return_pooled_hidden_states` (a classifier's) and `return_token_logprobs` are refused naming them, as is any
  other field.
Errors are SGLang's 400 words where it has them; render refuses a prompt past the context (PROMPT_TOO_LONG).
"""

from __future__ import annotations

import asyncio
import math
import uuid

import grpc

from pipeline_svc.label_reads import in_client_terms, is_ids, read_token_prompts, tokens_of
from scaleout_common.errors import QUOTE_CHARS, ServiceError, clip
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

FIELDS = {"model", "query", "items", "label_token_ids", "apply_softmax", "item_first", "temperature"}
NOT_SERVED = {
    "embed_override_token_id": "embedding overrides are not supported",
    "query_embed_overrides": "embedding overrides are not supported",
    "item_embed_overrides": "embedding overrides are not supported",
    "score_extraction_token": "setwise readout is not supported: each item is read at its last token",
    "return_pooled_hidden_states": "is a classifier's; this model generates",
    "return_token_logprobs": "is not supported",
}
NEUTRAL = {"return_pooled_hidden_states": False, "return_token_logprobs": False}


def is_score_body(body: dict) -> bool:
    """SGLang's generative scoring names its labels; vLLM's `/score` bodies never do."""
    return "label_token_ids" in body


def _bad(message: str, where: str | None = None):
    return fail(Reason.INVALID_REQUEST, message, where)


def _labels(value, count: int) -> list[list[int]]:
    if not isinstance(value, list) or not value:
        raise _bad("label_token_ids must be a nonempty list", "label_token_ids")
    rows = value if isinstance(value[0], list) else [value] * count
    if isinstance(value[0], list) and len(value) != count:
        raise _bad("label_token_ids must have one list per item", "label_token_ids")
    for row in rows:
        if not isinstance(row, list) or not row:
            raise _bad("each item must have a nonempty candidate list", "label_token_ids")
        if any(type(token) is not int or token < 0 for token in row):
            raise _bad("label_token_ids must contain nonnegative integers", "label_token_ids")
        if len(set(row)) != len(row):
            raise _bad("label_token_ids must not contain duplicate tokens", "label_token_ids")
    return rows


def _parse(body: bytes) -> dict:
    data = {k: v for k, v in load_object(body).items() if v is not None}
    for name, value in data.items():
        if name in NOT_SERVED and NEUTRAL.get(name, object()) != value:
            raise fail(Reason.UNSUPPORTED_FIELD, f"`{name}`: {NOT_SERVED[name]}", name)
        if name not in FIELDS and name not in NOT_SERVED:
            raise fail(Reason.UNSUPPORTED_FIELD, f"`{clip(name, QUOTE_CHARS)}` is not a field this API takes", name)
    for name in ("apply_softmax", "item_first"):
        if not isinstance(data.setdefault(name, False), bool):
            raise _bad(f"`{name}` must be a boolean", name)
    temperature = data.setdefault("temperature", 1.0)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 < temperature < math.inf:
        raise _bad("temperature must be finite and greater than zero", "temperature")
    if temperature != 1.0 and not data["apply_softmax"]:
        raise _bad("temperature requires apply_softmax=True", "temperature")
    if "items" not in data:
        raise _bad("items must be provided", "items")
    items = data["items"] = [data["items"]] if isinstance(data["items"], str) else data["items"]
    if not isinstance(items, list):
        raise _bad("`items` must be a string, strings or lists of token ids", "items")
    for i, item in enumerate(items):
        if not isinstance(item, str) and not is_ids(item):
            raise _bad("`items` must be a string, strings or lists of token ids", f"items[{i}]")
    query = data.setdefault("query", "" if all(isinstance(i, str) for i in items) else [])
    if not isinstance(query, str) and not is_ids(query):
        raise _bad("`query` must be a string or a list of token ids", "query")
    if any(isinstance(item, str) != isinstance(query, str) for item in items):
        raise _bad("query and items must both be text or both be token IDs", "items")
    data["label_token_ids"] = _labels(data.get("label_token_ids"), len(items)) if items else []
    return data


async def score(hops, body: bytes, context) -> dict:
    data = _parse(body)
    model, query, items = data.get("model", ""), data["query"], data["items"]
    shared = {"model": model} if model else {}
    parts = None
    try:
        if isinstance(query, str):  # SGLang tokenizes the joined text
            texts = [item + query if data["item_first"] else query + item for item in items]
            prompts = list(await asyncio.gather(*(tokens_of(hops, model, t, True, context) for t in texts)))
        else:
            prompts = [item + query if data["item_first"] else query + item for item in items]
            parts = [("item", len(i)) if data["item_first"] else ("query", len(query)) for i in items]
        shared["request_id"] = f"score-{uuid.uuid4().hex}"
        reads = await read_token_prompts(hops, prompts, data["label_token_ids"], shared, context)
    except grpc.aio.AioRpcError as error:
        raise in_client_terms(ServiceError.from_rpc_error(error), parts) from None
    except ServiceError as error:
        raise in_client_terms(error, parts) from None
    prompt_tokens, completion_tokens = sum(r.input_tokens for r in reads), sum(r.output_tokens for r in reads)
    return {
        "scores": [
            read.probs(data["temperature"]) if data["apply_softmax"] else [math.exp(lp) for lp in read.logprobs]
            for read in reads
        ],
        "pooled_hidden_states": None,
        "token_logprobs": None,
        "model": model or (reads[0].model if reads else ""),
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
        },
        "object": "scoring",
    }
