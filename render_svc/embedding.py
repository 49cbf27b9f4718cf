"""Embedding rendering: texts (tokenized) or token ids -> the EmbedRequest the engine's Embed takes unchanged.

As vLLM prepares a pooling request: `add_special_tokens` (default true) for texts, token ids taken as given (every
id checked against the vocabulary); `truncate_prompt_tokens` (-1: the model length) cuts on `truncation_side`, whose
default is the tokenizer's own side (vLLM passes None to the tokenizer's truncation); an input longer than the
model's context with nothing cut is refused (PROMPT_TOO_LONG), with no room kept for output. Inputs per request:
at most --max-batch-size (TOO_MANY_REQUESTS). `max_text_tokens` (vLLM's scoring max_tokens_per_query / _doc) cuts
each text before that, as vLLM's truncate_text_to_tokens does: counted without special tokens, cut at the end of its
last whole token (or the start of the next one, whichever is first) by the fast tokenizer's character offsets,
again until it fits (a merge across the cut can change the count); 0 cuts nothing. `pad_to_max_length` (vLLM's
`padding: "max_length"`) then fills each input to the model length with the tokenizer's pad token, as vLLM does.
"""

from __future__ import annotations

from render_svc.prompt import check_length, check_size, check_truncation, truncate
from render_svc.renderer import Renderer
from scaleout.v1 import render_pb2
from scaleout_common import sampling_rules
from scaleout_common.reasons import Reason, fail


def _cut(renderer: Renderer, texts: list[str], most: int) -> list[str]:
    """Each text cut to at most `most` tokens, counted without special tokens (see the module docstring)."""
    if not 0 <= most < renderer.model.max_model_len:
        raise fail(
            Reason.INVALID_REQUEST,
            f"max_text_tokens ({most}) must be a non-negative integer less than max_model_len "
            f"({renderer.model.max_model_len}).",
            "max_text_tokens",
        )
    tokenizer = renderer.model.tokenizer
    if not most:
        return texts
    if not tokenizer.is_fast:
        raise fail(
            Reason.UNSUPPORTED_FIELD, "max_text_tokens needs a fast tokenizer (character offsets)", "max_text_tokens"
        )
    out = []
    for text in texts:
        while text:
            offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
            if len(offsets) <= most:
                break
            text = text[: min(offsets[most - 1][1], offsets[most][0], len(text) - 1)]
        out.append(text)
    return out


def _token_ids(renderer: Renderer, request: render_pb2.RenderEmbeddingRequest) -> tuple[str, list[list[int]]]:
    """(the field the inputs came in, their token ids)."""
    if request.inputs and request.input_token_ids:
        raise fail(Reason.CONFLICTING_OPTIONS, "give inputs or input_token_ids, not both", "input_token_ids")
    tokens = renderer.model.tokens
    if request.inputs:
        special = request.add_special_tokens if request.HasField("add_special_tokens") else True
        return "inputs", tokens.encode(_cut(renderer, list(request.inputs), request.max_text_tokens), special)
    if not request.input_token_ids:
        raise fail(Reason.MISSING_PROMPT, "an embedding request needs inputs or input_token_ids", "inputs")
    if request.max_text_tokens:
        raise fail(Reason.CONFLICTING_OPTIONS, "max_text_tokens cuts texts: give inputs", "max_text_tokens")
    out = []
    for i, item in enumerate(request.input_token_ids):
        ids = list(item.token_ids)
        sampling_rules.check_token_ids(ids, tokens.vocab_size, f"input_token_ids[{i}].token_ids")
        out.append(ids)
    return "input_token_ids", out


def _pad_id(renderer: Renderer) -> int:
    pad = renderer.model.tokenizer.pad_token_id
    if not isinstance(pad, int):
        raise fail(Reason.UNSUPPORTED_FIELD, "the model's tokenizer has no pad token to pad with", "pad_to_max_length")
    return pad


def render_embedding(
    renderer: Renderer, request: render_pb2.RenderEmbeddingRequest
) -> render_pb2.RenderEmbeddingResponse:
    renderer.check_model(request.model, adapters=False)  # a pooling engine runs no adapter
    check_size(request, renderer.limits.max_request_bytes)
    count, most = len(request.inputs) or len(request.input_token_ids), renderer.limits.max_batch_size
    if count > most:
        raise fail(Reason.TOO_MANY_REQUESTS, f"{count} inputs, more than the limit of {most}", "inputs")
    model = renderer.model
    keep = check_truncation(request, model.max_model_len)
    side = request.truncation_side or model.tokenizer.truncation_side
    field, inputs = _token_ids(renderer, request)
    out = render_pb2.RenderEmbeddingResponse()
    embed = out.embed_request
    pad = _pad_id(renderer) if request.pad_to_max_length else None
    for index, ids in enumerate(inputs):
        ids, _ = truncate(ids, None, keep, side)
        check_length(ids, model.max_model_len, f"{field}[{index}]")
        if pad is not None:
            ids = ids + [pad] * (model.max_model_len - len(ids))
        embed.inputs.add().token_ids.extend(ids)
    embed.request_id = request.request_id
    embed.model = model.name
    embed.tokenizer_fingerprint = model.fingerprint
    embed.priority = request.priority
    for name in ("dimensions", "use_activation"):
        if request.HasField(name):
            setattr(embed, name, getattr(request, name))
    return out
