"""vLLM's chat-form pooling requests (its EmbeddingChatRequest / PoolingChatRequest): `messages` in place of
`input`, one conversation, rendered by its chat template and embedded as one input.

The chat fields go to render's RenderChat as a chat request would (openai_request.chat_request checks the
messages and names their errors), with vLLM's pooling defaults: `add_generation_prompt` false, `add_special_tokens`
false (the template writes them); `continue_final_message`, `chat_template` and `chat_template_kwargs` as in chat
(both `continue_final_message` and `add_generation_prompt` true: vLLM's words). The rendered prompt's token ids
then go to RenderEmbedding as given, with the request's other pooling fields (truncation, padding). The chat
render is asked for one output token, so a conversation that fills the whole context is refused where vLLM, which
generates nothing, takes it. A batch of conversations (vLLM's list of lists) is refused naming `messages`.
"""

from __future__ import annotations

import json

from pipeline_svc import openai_request
from scaleout.v1 import render_pb2
from scaleout_common.reasons import Reason, fail

CHAT_FIELDS = ("messages", "add_generation_prompt", "continue_final_message", "chat_template", "chat_template_kwargs")
DEFAULTS = {"add_generation_prompt": False, "add_special_tokens": False}


def chat_part(data: dict) -> render_pb2.RenderChatRequest:
    """Takes the chat fields (and `add_special_tokens`) out of `data`: the render request of its conversation."""
    messages = data["messages"]
    if isinstance(messages, list) and messages and all(isinstance(m, list) for m in messages):
        raise fail(Reason.UNSUPPORTED_FIELD, "`messages`: a batch of conversations is not supported", "messages")
    if "input" in data:
        raise fail(Reason.CONFLICTING_OPTIONS, "give `input` or `messages`, not both", "messages")
    chat = DEFAULTS | {name: data.pop(name) for name in (*CHAT_FIELDS, "add_special_tokens") if name in data}
    if chat["add_generation_prompt"] is True and chat.get("continue_final_message") is True:
        raise fail(
            Reason.CONFLICTING_OPTIONS,
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
            "continue_final_message",
        )
    body = chat | {"max_tokens": 1} | ({"model": data["model"]} if "model" in data else {})
    return openai_request.chat_request(json.dumps(body).encode()).typed
