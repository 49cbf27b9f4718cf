"""Token bridging for multi-turn RL: next prompt = previous prompt + sampled completion + the new turns' tokens.

The sampled history is never re-rendered (templates that rewrite history, e.g. drop earlier reasoning, would
change the tokens the policy produced). Only the text after the sampled assistant turn is rendered: the
template runs on a probe conversation [user, assistant(MARKER), *new messages]; what follows MARKER is the
end of the assistant turn plus the new turns. If the completion already ends with the special token that
closes the turn (its stop token), that token is not repeated.

A template is not bridgeable (FAILED_PRECONDITION TEMPLATE_NOT_BRIDGEABLE) when it does not render the
assistant content as given, or closes the assistant turn differently once more messages follow.
"""

from __future__ import annotations

from typing import cast

from render_svc import routing
from render_svc.renderer import Renderer
from scaleout.v1 import render_pb2
from scaleout_common import sampling_rules
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

MARKER = "scaleoutBridgeMarker7f3a"


def _not_bridgeable(why: str) -> ServiceError:
    return fail(Reason.TEMPLATE_NOT_BRIDGEABLE, f"this chat template cannot be bridged: {why}")


def _after_marker(text: str) -> str:
    if text.count(MARKER) != 1:
        raise _not_bridgeable("it does not render an assistant message's content as given")
    return text[text.index(MARKER) + len(MARKER) :]


def bridge_chat(renderer: Renderer, request: render_pb2.BridgeChatRequest) -> render_pb2.RenderChatResponse:
    previous, completion = list(request.previous_prompt_token_ids), list(request.completion_token_ids)
    if not previous:
        raise fail(Reason.MISSING_PREVIOUS_PROMPT, "previous_prompt_token_ids is empty", "previous_prompt_token_ids")
    tokens = renderer.model.tokens
    sampling_rules.check_token_ids(previous, tokens.vocab_size, "previous_prompt_token_ids")
    sampling_rules.check_token_ids(completion, tokens.vocab_size, "completion_token_ids")
    if request.request.return_token_offsets:
        raise fail(Reason.UNSUPPORTED_FIELD, "BridgeChat does not return token offsets", "request.return_token_offsets")
    key = routing.bridge_prefix_hash(request.prefix_hash, request.request.cache_salt, previous)

    probe = render_pb2.RenderChatRequest()
    probe.CopyFrom(request.request)
    del probe.messages[:]
    probe.messages.add(role="user").content.string_value = "?"
    probe.messages.add(role="assistant").content.string_value = MARKER
    probe.messages.extend(request.request.messages)
    job = renderer.prepare(probe)
    opened = _after_marker(renderer.text(job))
    closing = _after_marker(
        renderer.templates.render(
            job.template,
            job.messages[:2],
            job.tools,
            add_generation_prompt=False,
            variables={**renderer.special_tokens, **job.template_kwargs},
        )
    )
    if not opened.startswith(closing):
        raise _not_bridgeable("it closes an assistant turn differently once more messages follow")
    tokenizer = renderer.model.tokenizer
    if completion and completion[-1] in tokenizer.all_special_ids:
        # one id in, one token out (transformers types the result as `str | list[str]` for both forms)
        stop_text = cast(str, tokenizer.convert_ids_to_tokens(completion[-1]))
        if closing.startswith(stop_text):
            opened = opened[len(stop_text) :]
    [delta] = tokens.encode([opened], add_special_tokens=False)  # no BOS in the middle of a sequence
    ids = previous + completion + delta
    text = tokens.decode(ids, skip_special_tokens=False) if probe.return_prompt_text else opened
    response = renderer.finish(job, text, ids, None)
    response.generate_request.prefix_hash = key
    return response
