"""Tokenize (completion and chat forms), Detokenize and ListModels."""

from __future__ import annotations

from datetime import UTC, datetime

from render_svc import errors
from render_svc.prompt import offsets_proto
from render_svc.renderer import Renderer
from scaleout.v1 import render_pb2
from scaleout_common import sampling_rules
from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail

MAX_MODELS_PAGE = 1000  # Anthropic's largest `limit`


def tokenize(renderer: Renderer, request: render_pb2.TokenizeRequest) -> render_pb2.TokenizeResponse:
    renderer.check_model(request.model)
    if request.prompt and request.messages:
        raise fail(Reason.CONFLICTING_OPTIONS, "give prompt or messages, not both", "messages")
    tokens = renderer.model.tokens
    if request.messages:
        chat = render_pb2.RenderChatRequest(
            messages=request.messages,
            tools=request.tools,
            chat_template_kwargs=request.chat_template_kwargs,
            continue_final_message=request.continue_final_message,
            return_token_offsets=request.return_token_offsets,
        )
        for name in ("add_special_tokens", "add_generation_prompt"):
            if request.HasField(name):
                setattr(chat, name, getattr(request, name))
        job = renderer.prepare(chat)
        [(ids, offsets, _)] = renderer.encode([job], [renderer.text(job)])
    else:
        special = request.add_special_tokens if request.HasField("add_special_tokens") else True
        if request.return_token_offsets:
            [(ids, offsets)] = tokens.encode_with_offsets([request.prompt], special)
        else:
            [ids], offsets = tokens.encode([request.prompt], special), None
    response = render_pb2.TokenizeResponse(count=len(ids), max_model_len=renderer.model.max_model_len, tokens=ids)
    if request.return_token_strs:
        response.token_strs.extend(tokens.token_strs(ids))
    if offsets is not None:
        response.token_offsets.extend(offsets_proto(offsets))
    return response


def detokenize(renderer: Renderer, request: render_pb2.DetokenizeRequest) -> render_pb2.DetokenizeResponse:
    renderer.check_model(request.model)
    sampling_rules.check_token_ids(request.tokens, renderer.model.tokens.vocab_size, "tokens")
    skip = request.skip_special_tokens if request.HasField("skip_special_tokens") else True
    return render_pb2.DetokenizeResponse(prompt=renderer.model.tokens.decode(request.tokens, skip_special_tokens=skip))


def _card(renderer: Renderer, name: str) -> render_pb2.ModelCard:
    model = renderer.model
    created = datetime.fromtimestamp(model.created, UTC).isoformat().replace("+00:00", "Z")
    if (adapter := renderer.loras.get(name)) is not None and name not in model.names:
        card = _card(renderer, model.name)
        card.id = card.display_name = name
        card.root, card.parent = adapter.path, adapter.base_model_name or model.name
        return card
    return render_pb2.ModelCard(
        id=name,
        object="model",
        created=model.created,
        owned_by="scaleout",
        root=model.name,  # the base model's name: never the server's path (vLLM shows what --model was given)
        max_model_len=model.max_model_len,
        tokenizer_fingerprint=model.fingerprint,
        type="model",
        display_name=name,
        created_at=created,
    )


def list_models(renderer: Renderer, request: render_pb2.ListModelsRequest) -> render_pb2.ListModelsResponse:
    """OpenAI's list of every served name, then the LoRA adapters' (vLLM's order), which is also Anthropic's page
    (`limit`, `after_id`, `before_id`)."""
    names = list(renderer.model.names) + [name for name in renderer.loras if name not in renderer.model.names]
    for field in ("after_id", "before_id"):
        bound = getattr(request, field)
        if bound and bound not in names:
            raise fail(Reason.INVALID_REQUEST, f"{field} {quote(bound)} is not a served model", field)
    if request.HasField("limit") and not 1 <= request.limit <= MAX_MODELS_PAGE:
        raise fail(Reason.INVALID_REQUEST, f"limit must be from 1 to {MAX_MODELS_PAGE}", "limit")
    start = names.index(request.after_id) + 1 if request.after_id else 0
    end = names.index(request.before_id) if request.before_id else len(names)
    limit = request.limit if request.HasField("limit") else len(names)
    window = names[start:end]
    page = window[-limit:] if request.before_id else window[:limit]
    return render_pb2.ListModelsResponse(
        object="list",
        data=[_card(renderer, name) for name in page],
        has_more=len(page) < len(window),
        first_id=page[0] if page else "",
        last_id=page[-1] if page else "",
    )


def get_model(renderer: Renderer, request: render_pb2.GetModelRequest) -> render_pb2.ModelCard:
    """OpenAI's `GET /v1/models/{model}`: the card of one served name or adapter, MODEL_NOT_FOUND (404) for any
    other."""
    renderer.check_model(request.model)
    if not request.model:
        raise errors.model_not_found(request.model, renderer.model.names)
    return _card(renderer, request.model)
