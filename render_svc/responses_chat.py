"""OpenAI Responses requests -> the chat form (RenderChatRequest), as vLLM converts them (client_json.py: how the
client's JSON is read, taken or refused).

Responses (vLLM's `construct_input_messages`):
- `instructions` -> a leading system message; a string `input` -> one user message.
- message items keep their role (text parts as text parts); an assistant message, a reasoning item and
  function calls that follow each other merge into one assistant message (content, reasoning, tool_calls);
  `function_call_output` -> a tool message. A last message or reasoning item whose status is `in_progress` /
  `incomplete` is continued (continue_final_message).
- tools of type function -> chat tools; tool_choice "none" / "auto" / "required" / {"type": "function", "name"}.
- max_output_tokens -> max_tokens; `reasoning.effort` -> the template's `reasoning_effort`, and `enable_thinking`
  (false for "none", else true) unless the request's `chat_template_kwargs` (vLLM's extension, passed to the
  template as in chat) sets it; `reasoning.summary` "auto" / "detailed" (the Response's summary is the reasoning
  whole; "concise" refused); `prompt_cache_retention` "in_memory" ("24h" refused); `truncation: auto` ->
  truncate_prompt_tokens = -1; `text.format` json_object / json_schema -> the chat request's response_format
  (enforced while decoding).
- `store`, `background` and `previous_response_id` are the one-hop route's (`/v1/responses` keeps responses,
  runs background ones on and expands the conversation before it calls render): render, which keeps and runs
  nothing, refuses them here (`store: false` and `background: false` pass).
- Refused: `conversation`, hosted tools, encrypted reasoning and item references.
- Our extension: vLLM's chat `return_token_ids` -> the same (the Response carries `prompt_token_ids` and the
  sampled `token_ids`; vLLM's Responses API has no such field).
"""

from __future__ import annotations

import json
from typing import Any

from render_svc.client_json import Fields, invalid, text_parts, unsupported
from scaleout_common.errors import quote
from scaleout_common.openai_body_rules import prompt_cache_retention
from scaleout_common.reasons import Reason, fail

RESPONSES_ROLES = ("user", "system", "developer", "assistant")
CONTINUED_STATUSES = ("in_progress", "incomplete")
# vLLM sampling extensions the Responses API accepts (vLLM's ResponsesRequest takes them; chat has them by these names).
RESPONSES_EXTENSIONS = (
    "top_k",
    "seed",
    "stop",
    "repetition_penalty",
    "ignore_eos",
    "skip_special_tokens",
    "include_stop_str_in_output",
    "priority",
    "cache_salt",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
)
# `reasoning.summary` values honoured: the reasoning item's summary is the reasoning itself, the most detailed
# summary there is (pipeline_svc/responses_response.py); "concise" would need a shorter text than the model wrote.
REASONING_SUMMARIES = ("auto", "detailed")
# Error fields named as the chat request names them -> as the Responses request does.
RESPONSES_FIELD_NAMES = {"max_tokens": "max_output_tokens", "messages": "input"}


def _responses_content(item: Fields, role: str):
    """A message item's content: a string, or its text parts (one assistant part reads as a string)."""
    content = item.take("content", str, list, required=True)
    if isinstance(content, str):
        return content
    part_types = ("output_text",) if role == "assistant" else ("input_text", "text", "output_text")
    texts = text_parts(content, item.name("content"), part_types)
    if role == "assistant":
        return texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts] if texts else ""
    return [{"type": "text", "text": t} for t in texts]


def _reasoning_text(item: Fields) -> str:
    item.refuse("encrypted_content", "is encrypted reasoning, which this deployment cannot read")
    texts = {}
    for key, part_type in (("content", "reasoning_text"), ("summary", "summary_text")):
        value = item.take(key, list)
        texts[key] = text_parts(value, item.name(key), (part_type,)) if value else []
    return "\n".join(texts["content"] or texts["summary"])


def _previous_assistant(out: list[dict]) -> dict | None:
    return out[-1] if out and out[-1]["role"] == "assistant" else None


def _responses_item(index: int, value, out: list[dict]) -> None:
    """Append one input item to the chat messages `out` (vLLM's _construct_message_from_response_item)."""
    item = Fields(value, f"input[{index}]")
    kind = item.take("type", str) or ("message" if item.has("role") else None)
    item.take("id", str)
    item.take("status", str)
    previous = _previous_assistant(out)
    if kind == "message":
        role = item.take("role", str, required=True)
        if role not in RESPONSES_ROLES:
            raise fail(
                Reason.INVALID_ROLE,
                f"unknown role {quote(role)} (expected one of {RESPONSES_ROLES})",
                item.name("role"),
            )
        content = _responses_content(item, role)
        item.allow("phase")
        item.done()
        if role == "assistant" and previous is not None and previous.get("content") is None:
            previous["content"] = content
        else:
            out.append({"role": role, "content": content})
    elif kind == "function_call":
        call = {
            "id": item.take("call_id", str, required=True),
            "type": "function",
            "function": {"name": item.take("name", str, required=True)},
        }
        call["function"]["arguments"] = item.take("arguments", str, required=True)
        item.refuse("namespace", "(namespaced tools) is not supported")
        item.done()
        if previous is not None:
            previous.setdefault("tool_calls", []).append(call)
        else:
            out.append({"role": "assistant", "tool_calls": [call]})
    elif kind == "function_call_output":
        call_id = item.take("call_id", str, required=True)
        output = item.take("output", str, list, required=True)
        item.done()
        text = (
            output if isinstance(output, str) else "\n".join(text_parts(output, item.name("output"), ("input_text",)))
        )
        out.append({"role": "tool", "tool_call_id": call_id, "content": text})
    elif kind == "reasoning":
        reasoning = _reasoning_text(item)
        item.done()
        if previous is not None and previous.get("reasoning_content") is None:
            previous["reasoning_content"] = reasoning
        else:
            out.append({"role": "assistant", "reasoning_content": reasoning})
    elif kind == "item_reference":
        raise unsupported(
            item.path,
            "refers to a stored item by id, which this deployment does not look up: send the item itself (clients"
            " such as the Vercel AI SDK do with store: false), or continue with previous_response_id",
        )
    elif kind is None:
        raise invalid(item.name("type"), "is required (or a `role`, for a message)")
    else:
        raise unsupported(item.name("type"), f"= {quote(kind)} is not an input item this deployment takes")


def _continues(items: list) -> bool:
    """vLLM's should_continue_final_message: the last message or reasoning item is unfinished."""
    last = items[-1] if items else None
    if not isinstance(last, dict) or last.get("type", "message") not in ("message", "reasoning"):
        return False
    return last.get("status") in CONTINUED_STATUSES


def _responses_tools(tools: list) -> list[dict]:
    out = []
    for i, item in enumerate(tools):
        tool = Fields(item, f"tools[{i}]")
        kind = tool.take("type", str, required=True)
        if kind != "function":
            raise unsupported(
                tool.name("type"), f"= {quote(kind)} (a hosted tool) is not supported: give function tools"
            )
        function: dict[str, Any] = {"name": tool.take("name", str, required=True)}
        for key, value_kind in (("description", str), ("parameters", dict), ("strict", bool)):
            value = tool.take(key, value_kind)
            if value is not None:
                function[key] = value
        tool.refuse("defer_loading", "is not supported")
        tool.done()
        out.append({"type": "function", "function": function})
    return out


def _responses_tool_choice(value) -> Any:
    if value in ("none", "auto", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        choice = Fields(value, "tool_choice")
        choice.take("type")
        name = choice.take("name", str, required=True)
        choice.done()
        return {"type": "function", "function": {"name": name}}
    if isinstance(value, dict):
        raise unsupported(
            "tool_choice", f"= {json.dumps(value)} is not supported: use none, auto, required or a function"
        )
    raise fail(Reason.INVALID_TOOL_CHOICE, "`tool_choice` is none, auto, required or a function", "tool_choice")


def _responses_text(value) -> dict | None:
    """`text.format` as the chat request's response_format (None for plain text); the schema travels as JSON
    text so that its key order survives."""
    text = Fields(value, "text")
    fmt = text.take("format", dict)
    text.allow("verbosity", "medium", why="is not supported: the model has one verbosity")
    text.done()
    if fmt is None:
        return None
    spec = Fields(fmt, "text.format")
    kind = spec.take("type", str, required=True)
    if kind == "json_schema":
        schema = {"name": spec.take("name", str, required=True)}
        schema["schema"] = json.dumps(spec.take("schema", dict, required=True), ensure_ascii=False)
        for key, key_kind in (("description", str), ("strict", bool)):
            if spec.has(key):
                schema[key] = spec.take(key, key_kind)
        spec.done()
        return {"type": "json_schema", "json_schema": schema}
    spec.done()
    if kind in ("text", "json_object"):
        return None if kind == "text" else {"type": "json_object"}
    raise invalid("text.format.type", 'is "text", "json_object" or "json_schema"')


RESPONSES_INCLUDE_LOGPROBS = "message.output_text.logprobs"


def _responses_logprobs(top: Fields, chat: dict) -> None:
    """`include: ["message.output_text.logprobs"]` and `top_logprobs` -> chat's logprobs (their output_text
    tokens'); any other `include` is refused."""
    include = top.take("include", list) or []
    for i, item in enumerate(include):
        if item != RESPONSES_INCLUDE_LOGPROBS:
            raise unsupported(f"include[{i}]", f"= {json.dumps(item)} is not supported by this deployment")
    top_logprobs = top.take("top_logprobs", int)
    if include or top_logprobs:
        chat["logprobs"] = True
    if top_logprobs is not None:
        chat["top_logprobs"] = top_logprobs


def _responses_reasoning(value, kwargs: dict) -> None:
    """`reasoning.effort` -> the template's `reasoning_effort`, and `enable_thinking` (off for "none") where the
    request's own chat_template_kwargs leave it unset (vLLM's: templates that want thinking asked for, as Gemma's).
    `reasoning.summary` shapes the Response, not the prompt: checked here, honoured by the pipeline."""
    reasoning = Fields(value, "reasoning")
    effort = reasoning.take("effort", str)
    if effort is not None:
        kwargs["reasoning_effort"] = effort
        kwargs.setdefault("enable_thinking", effort != "none")
    for key in ("summary", "generate_summary"):  # generate_summary: OpenAI's deprecated name of summary
        summary = reasoning.take(key, str)
        if summary == "concise":
            raise unsupported(reasoning.name(key), '= "concise" is not supported: the summary is the reasoning whole')
        if summary not in (None, *REASONING_SUMMARIES):
            raise invalid(reasoning.name(key), 'is "auto", "concise" or "detailed"')
    reasoning.done()


def responses_chat(data: dict) -> dict:
    """A Responses request (parsed JSON) -> the equivalent chat request (JSON form)."""
    top = Fields(data, "")
    top.refuse("previous_response_id", "needs stored responses: POST /v1/responses keeps them, render does not")
    top.refuse("conversation", "(the Conversations API) is not supported: chain with previous_response_id")
    top.allow("store", False, why="is not supported here: POST /v1/responses stores responses, render does not")
    top.allow("background", False, why="is not supported here: POST /v1/responses runs responses on, render does not")
    top.refuse("prompt", "(stored prompt templates) is not supported")
    max_tool_calls = top.take("max_tool_calls", int)  # caps hosted tools' calls: with those refused, it holds
    if max_tool_calls is not None and max_tool_calls < 0:
        raise invalid("max_tool_calls", f"must be at least 0 (got {max_tool_calls})")
    chat: dict[str, Any] = {}
    _responses_logprobs(top, chat)
    model = top.take("model", str)
    if model is not None:
        chat["model"] = model
    instructions = top.take("instructions", str)
    items = top.take("input", str, list, required=True)
    messages: list[dict] = [{"role": "system", "content": instructions}] if instructions else []
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    else:
        converted: list[dict] = []
        for i, item in enumerate(items):
            _responses_item(i, item, converted)
        messages += converted
        if _continues(items):
            chat["add_generation_prompt"] = False
            chat["continue_final_message"] = True
    chat["messages"] = messages
    max_tokens = top.take("max_output_tokens", int)
    if max_tokens is not None:
        chat["max_tokens"] = max_tokens
    for name, kind in (("temperature", float), ("top_p", float), ("parallel_tool_calls", bool)):
        value = top.take(name, kind)
        if value is not None:
            chat[name] = value
    tools = top.take("tools", list)
    if tools:
        chat["tools"] = _responses_tools(tools)
    if top.has("tool_choice"):
        choice = _responses_tool_choice(top.take("tool_choice"))
        if tools or choice not in ("auto", "none"):  # without tools "auto" is "none" (OpenAI's, vLLM's default)
            chat["tool_choice"] = choice
    kwargs: dict = dict(top.take("chat_template_kwargs", dict) or {})
    if top.has("text") and (response_format := _responses_text(top.take("text", dict))):
        chat["response_format"] = response_format
    if top.has("reasoning"):
        _responses_reasoning(top.take("reasoning", dict), kwargs)
    if kwargs:
        chat["chat_template_kwargs"] = kwargs
    truncation = top.take("truncation", str)
    if truncation not in (None, "disabled", "auto"):
        raise invalid("truncation", 'is "auto" or "disabled"')
    if truncation == "auto":  # keep the prompt's last max_model_len tokens, as vLLM does
        chat["truncate_prompt_tokens"] = -1
    if top.take("stream", bool):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    options = top.take("stream_options", dict)
    if options is not None:
        stream_options = Fields(options, "stream_options")
        stream_options.allow("include_obfuscation", False, why="is not supported: send include_obfuscation: false")
        stream_options.done()
    metadata = top.take("metadata", dict)
    if metadata is not None and not all(isinstance(v, str) for v in metadata.values()):
        raise invalid("metadata", "must map strings to strings")
    for name in ("user", "safety_identifier"):  # the caller's identity: on the trace, echoed
        top.take(name, str)
    cache_key = top.take("prompt_cache_key", str)
    if cache_key:  # routes the request with the others that share it (render_svc/routing.py)
        chat["prompt_cache_key"] = cache_key
    if top.has("prompt_cache_retention"):
        prompt_cache_retention(top.take("prompt_cache_retention"))
    top.allow("service_tier", "auto", "default")
    for name in RESPONSES_EXTENSIONS:
        if top.has(name):
            chat[name] = top.take(name)
    if top.take("return_token_ids", bool):
        chat["return_token_ids"] = True
    if isinstance(chat.get("stop"), str):
        chat["stop"] = [chat["stop"]]
    top.done()
    return chat
