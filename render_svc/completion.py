"""Completion rendering: a prompt (string, strings, token ids or lists of them) -> one GenerateRequest each."""

from __future__ import annotations

from render_svc import context, routing, structured
from render_svc.prompt import check_length, check_size, check_truncation, fill_generate_request, offsets_proto, truncate
from render_svc.renderer import Renderer
from scaleout.v1 import derender_pb2, render_pb2
from scaleout_common import sampling_rules
from scaleout_common.reasons import Reason, fail


def _prompts(renderer: Renderer, request: render_pb2.RenderCompletionRequest, add_special_tokens: bool):
    """[(text, ids, offsets)] for the one prompt form the request uses."""
    if request.prompts and request.prompt_token_ids:
        raise fail(Reason.CONFLICTING_OPTIONS, "give prompts or prompt_token_ids, not both", "prompt_token_ids")
    tokens = renderer.model.tokens
    if request.prompts:
        texts = list(request.prompts)
        if request.return_token_offsets:
            return [
                (text, ids, offsets)
                for text, (ids, offsets) in zip(texts, tokens.encode_with_offsets(texts, add_special_tokens))
            ]
        return [(text, ids, None) for text, ids in zip(texts, tokens.encode(texts, add_special_tokens))]
    if not request.prompt_token_ids:
        raise fail(Reason.MISSING_PROMPT, "a completion needs prompts or prompt_token_ids", "prompts")
    if request.return_token_offsets:
        raise fail(Reason.UNSUPPORTED_FIELD, "return_token_offsets needs text prompts", "return_token_offsets")
    vocab = tokens.vocab_size
    out = []
    for i, prompt in enumerate(request.prompt_token_ids):
        ids = list(prompt.token_ids)
        sampling_rules.check_token_ids(ids, vocab, f"prompt_token_ids[{i}].token_ids")
        needs_text = request.echo or request.return_prompt_text
        out.append((tokens.decode(ids, skip_special_tokens=False) if needs_text else None, ids, None))
    return out


def render_completion(
    renderer: Renderer, request: render_pb2.RenderCompletionRequest
) -> render_pb2.RenderCompletionResponse:
    adapter = renderer.check_model(request.model)
    check_size(request, renderer.limits.max_request_bytes)
    if request.suffix:
        raise fail(Reason.UNSUPPORTED_FIELD, "suffix is not supported", "suffix")
    keep = check_truncation(request, renderer.model.max_model_len)
    add_special_tokens = request.add_special_tokens if request.HasField("add_special_tokens") else True
    n = request.n if request.HasField("n") else 1
    sampling_rules.check_choices(  # before any prompt is tokenized, let alone generated
        len(request.prompts) or len(request.prompt_token_ids), n, "prompts" if request.prompts else "prompt_token_ids"
    )
    constraint = structured.constraint(request)
    prompts = _prompts(renderer, request, add_special_tokens)
    identity = renderer.identity("cmpl", request.request_id, adapter)
    model = renderer.model
    out = render_pb2.RenderCompletionResponse()
    for index, (text, ids, offsets) in enumerate(prompts):
        field = f"prompts[{index}]" if request.prompts else f"prompt_token_ids[{index}]"
        ids, offsets = truncate(ids, offsets, keep, request.truncation_side)
        check_length(ids, renderer.max_prompt_tokens, field)
        params = sampling_rules.resolve(request, len(ids), renderer.model_limits, chat=False, prompt_field="prompt")
        structured.apply(params, constraint, request, model.tokenizer, None, "")
        echo_logprobs = request.echo and params.HasField("logprobs")
        if echo_logprobs and not params.HasField("prompt_logprobs"):
            params.prompt_logprobs = params.logprobs  # the echoed prompt is scored like the output
        tail_text = (
            text
            if text is not None
            else model.tokens.decode(ids[-context.PROMPT_TAIL_TOKENS :], skip_special_tokens=False)
        )
        base_id = request.request_id or identity.id
        item = out.prompts.add()
        fill_generate_request(
            item.generate_request,
            request,
            base_id if len(prompts) == 1 else f"{base_id}-{index}",
            ids,
            params,
            n,
            model.name,
            model.fingerprint,
            adapter,
        )
        item.generate_request.prefix_hash = routing.completion_prefix_hash(request.cache_salt, ids)
        context.fill(
            item.derender_context,
            request,
            identity,
            derender_pb2.ENDPOINT_COMPLETION,
            ids,
            tail_text,
            n,
            params.logprobs if params.HasField("logprobs") else None,
            text or "",
            index,
            params.prompt_logprobs if request.HasField("prompt_logprobs") else None,  # on each choice (vLLM's)
        )
        if echo_logprobs and not request.HasField("prompt_logprobs") and not request.return_token_ids:
            item.derender_context.prompt_token_ids.extend(ids)  # the echo's logprobs score the prompt
        if request.return_prompt_text:
            item.prompt_text = text
        if offsets is not None:
            item.token_offsets.extend(offsets_proto(offsets))
    return out
