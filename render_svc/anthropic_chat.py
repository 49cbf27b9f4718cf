"""Anthropic Messages requests -> the chat form (RenderChatRequest), as vLLM converts them (client_json.py: how
the client's JSON is read, taken or refused).

Anthropic (vLLM's `AnthropicServingMessages._convert_anthropic_to_openai_request`):
- `system` (a string or text blocks) and every inline `role: "system"` message are joined, in order and
  without a separator, into one leading system message; Claude Code's `x-anthropic-billing-header` block
  (a per-request hash) is dropped so prefixes stay cacheable.
- text blocks -> the content (one block: a string; several: text parts); `thinking` -> the message's
  reasoning; `tool_use` -> tool_calls (arguments = json.dumps(input)); `tool_result` (in a user turn) -> a tool
  message before the user's own text, its content joined by "\\n"; a user turn of only tool results adds no
  user message, and one with neither text nor tool results is refused (Anthropic refuses it too).
- tools' `input_schema` -> `parameters` (`{"type": "object"}` when it names no type); tool_choice auto / any /
  tool / none -> auto / required / named / none; `disable_parallel_tool_use` -> parallel_tool_calls = false.
- max_tokens, stop_sequences, temperature, top_p, top_k -> the chat fields of the same meaning; a prompt over
  the limits is refused in Anthropic's words (`_anthropic_context`).
- `thread` (message threads: the SDKs' tool runners send it by default) is served statelessly: `{"type":
  "create"}` is accepted (the request holds the whole conversation; nothing is kept), and `{"type": "continue"}`
  is refused first, before anything else is read, with THREAD_NOT_FOUND (404, `error.details.error_code`
  `thread_not_found`), on which the SDKs replay the whole conversation under a new thread.
- Unlike vLLM, a conversation ending with an assistant turn is continued (Anthropic's prefill:
  continue_final_message), `thinking` / `output_config.effort` reach the template as `enable_thinking` /
  `reasoning_effort`, and blocks vLLM drops silently (redacted_thinking, server tools, tool_use in a user turn,
  tool_result in an assistant turn) are refused.
"""

from __future__ import annotations

import json
from typing import Any

from render_svc.client_json import (
    IMAGE_LIKE,
    Fields,
    invalid,
    not_text,
    text_parts,
    unsupported,
)
from scaleout_common.errors import ServiceError, quote
from scaleout_common.reasons import Reason, fail

# Claude Code's per-request attribution block: a hash that would defeat prefix caching (vLLM drops it too).
BILLING_HEADER = "x-anthropic-billing-header"
# Roles Claude Code >= 2.1.154 writes for user context (vLLM reads them as user).
ANTHROPIC_USER_ALIASES = ("ctx", "msg")
ANTHROPIC_ROLES = ("user", "assistant", "system")
# Error fields named as the chat request names them -> as the Anthropic request does.
ANTHROPIC_FIELD_NAMES = {
    "stop": "stop_sequences",
    "thinking_token_budget": "thinking.budget_tokens",
    "response_format.json_schema.schema": "output_config.format.schema",
    "response_format": "output_config.format",
}


def _system_blocks(value, field: str) -> list[str]:
    texts = [t for t in text_parts(value, field, ("text",)) if t]
    return [t for t in texts if not t.startswith(BILLING_HEADER)]


def _anthropic_tool_use(block: Fields) -> dict:
    call_id = block.take("id", str, required=True)
    name = block.take("name", str, required=True)
    arguments = block.take("input", dict)
    block.allow("cache_control")
    block.done()
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments or {})}}


def _anthropic_tool_result(block: Fields) -> dict:
    call_id = block.take("tool_use_id", str, required=True)
    content = block.take("content", str, list)
    # The tool's output already says what went wrong; chat templates have no error flag (vLLM drops it too).
    block.take("is_error", bool)
    block.allow("cache_control")
    block.done()
    text = "\n".join(text_parts(content, block.name("content"), ("text",))) if content is not None else ""
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _empty_turn(message: Fields) -> ServiceError:
    return invalid(message.name("content"), "is empty: a user message needs text or a tool_result")


def _anthropic_message(message: Fields, role: str, out: list[dict]) -> None:
    """Append the chat messages of one Anthropic user or assistant message to `out` (vLLM's _convert_messages)."""
    content = message.take("content", str, list, required=True)
    message.done()
    chat: dict[str, Any] = {"role": role}
    if isinstance(content, str):
        if role == "user" and not content:
            raise _empty_turn(message)
        out.append(chat | {"content": content})
        return
    before = len(out)  # this turn's tool_result blocks append tool messages
    parts: list[dict] = []
    tool_calls: list[dict] = []
    reasoning: list[str] = []
    for j, item in enumerate(content):
        block = Fields(item, f"{message.path}.content[{j}]")
        kind = block.take("type", str, required=True)
        if kind == "text":
            block.allow("cache_control")
            block.allow("citations", [], why="(citations) are not supported")
            text = block.take("text", str, required=True)
            block.done()
            if text:
                parts.append({"type": "text", "text": text})
        elif kind in IMAGE_LIKE:
            raise not_text(block.path, kind)
        elif kind == "thinking":
            thinking = block.take("thinking", str, required=True)
            block.take("signature", str)  # ours are not verified; a client echoes them back
            block.done()
            reasoning.append(thinking)
        elif kind == "tool_use" and role == "assistant":
            tool_calls.append(_anthropic_tool_use(block))
        elif kind == "tool_result" and role == "user":
            out.append(_anthropic_tool_result(block))
        elif kind in ("tool_use", "tool_result"):
            raise unsupported(block.name("type"), f"= {quote(kind)} does not belong in a {role} message")
        elif kind == "redacted_thinking":
            raise unsupported(block.path, "is encrypted reasoning, which this deployment cannot read")
        else:
            raise unsupported(block.name("type"), f"= {quote(kind)} is not a content block this deployment takes")
    if reasoning:
        chat["reasoning_content"] = "".join(reasoning)
    if tool_calls:
        chat["tool_calls"] = tool_calls
    if parts:
        chat["content"] = parts[0]["text"] if len(parts) == 1 else parts
    if role == "assistant" or "content" in chat:
        out.append(chat)
    elif len(out) == before:  # neither text nor a tool_result
        raise _empty_turn(message)


def _anthropic_messages(messages: list, system) -> list[dict]:
    system_texts = _system_blocks(system, "system") if system is not None else []
    turns: list[tuple[Fields, str]] = []
    for i, item in enumerate(messages):
        message = Fields(item, f"messages[{i}]")
        role = message.take("role", str, required=True)
        role = "user" if role in ANTHROPIC_USER_ALIASES else role
        if role not in ANTHROPIC_ROLES:
            raise fail(
                Reason.INVALID_ROLE, f"unknown role {quote(role)} (expected user or assistant)", message.name("role")
            )
        if role == "system":  # merged into the leading system message, in order
            system_texts += _system_blocks(message.take("content", str, list, required=True), message.name("content"))
            message.done()
        else:
            turns.append((message, role))
    out: list[dict] = [{"role": "system", "content": "".join(system_texts)}] if system_texts else []
    for message, role in turns:
        _anthropic_message(message, role, out)
    return out


def _anthropic_tools(tools: list) -> list[dict]:
    out = []
    for i, item in enumerate(tools):
        tool = Fields(item, f"tools[{i}]")
        tool.allow("type", "custom", why="(server tools) are not supported: give client tools with input_schema")
        name = tool.take("name", str, required=True)
        description = tool.take("description", str)
        schema = dict(tool.take("input_schema", dict, required=True))
        schema.setdefault("type", "object")
        strict = tool.take("strict", bool)
        tool.allow("cache_control")
        # the Vercel AI SDK's streamed requests: input streams as derender emits it (per token under a named
        # tool_choice, else whole when the call's block closes: valid JSON, never taken back); false is refused
        tool.allow("eager_input_streaming", True, why="is not supported: a call's input is streamed as it is parsed")
        tool.done()
        function: dict[str, Any] = {"name": name, "parameters": schema}
        if description is not None:
            function["description"] = description
        if strict is not None:
            function["strict"] = strict
        out.append({"type": "function", "function": function})
    return out


def _anthropic_tool_choice(value, chat: dict) -> None:
    choice = Fields(value, "tool_choice")
    kind = choice.take("type", str, required=True)
    mapped = {"auto": "auto", "any": "required", "none": "none"}
    if kind == "tool":
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.take("name", str, required=True)}}
    elif kind in mapped:
        chat["tool_choice"] = mapped[kind]
    else:
        raise fail(Reason.INVALID_TOOL_CHOICE, "`tool_choice.type` is auto, any, tool or none", "tool_choice.type")
    if choice.take("disable_parallel_tool_use", bool):
        chat["parallel_tool_calls"] = False
    choice.done()


def _anthropic_thinking(value, kwargs: dict, max_tokens: int | None) -> int | None:
    """`thinking` -> the template's `enable_thinking`, and the budget of `enabled` (Anthropic's rules: at
    least 1,024 and below `max_tokens`, which count_tokens does not take)."""
    thinking = Fields(value, "thinking")
    kind = thinking.take("type", str, required=True)
    if kind not in ("enabled", "adaptive", "disabled"):
        raise invalid("thinking.type", f'= {quote(kind)}: use "enabled", "adaptive" or "disabled"')
    budget = thinking.take("budget_tokens", int, required=kind == "enabled")
    if kind != "enabled" and budget is not None:
        raise invalid("thinking.budget_tokens", f'applies to {{"type": "enabled"}}, not {quote(kind)}')
    if budget is not None and budget < MIN_THINKING_BUDGET:
        raise invalid("thinking.budget_tokens", f"must be at least {MIN_THINKING_BUDGET}")
    if budget is not None and max_tokens is not None and budget >= max_tokens:
        raise invalid("thinking.budget_tokens", f"({budget}) must be less than `max_tokens` ({max_tokens})")
    thinking.allow("display", "summarized", why="is not supported: thinking comes back whole")
    thinking.done()
    kwargs["enable_thinking"] = kind != "disabled"
    return budget


MIN_THINKING_BUDGET = 1024


def _anthropic_format(fmt: Fields) -> dict:
    """Structured outputs (`output_config.format`, what the SDK's `messages.parse` sends) -> OpenAI's strict
    `response_format`: the answer's text is JSON that follows the schema, enforced while decoding (the schema
    travels as JSON text, so its key order, the order properties are generated in, survives)."""
    kind = fmt.take("type", str, required=True)
    if kind != "json_schema":
        raise invalid(fmt.name("type"), f'= {quote(kind)}: the only format is "json_schema"')
    schema = fmt.take("schema", dict, required=True)
    fmt.done()
    text = json.dumps(schema, ensure_ascii=False)
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": text, "strict": True}}


def _thread(value) -> None:
    """Message threads on a server that keeps none: a `create` is the request itself; a `continue` names a thread
    that is not here (the SDKs then replay the whole conversation with a `create`)."""
    thread = Fields(value, "thread")
    kind = thread.take("type", str, required=True)
    if kind == "continue":
        thread.take("previous_message_id", str, required=True)
        raise fail(
            Reason.THREAD_NOT_FOUND,
            "no thread holds `thread.previous_message_id`: this deployment keeps no conversation between requests; "
            'send the whole conversation with `thread: {"type": "create"}` (or none)',
            "thread.previous_message_id",
        )
    if kind != "create":
        raise invalid("thread.type", f'= {quote(kind)}: use "create" or "continue"')
    thread.done()


def messages_chat(data: dict, counting: bool = False) -> dict:
    """An Anthropic Messages request (parsed JSON) -> the equivalent chat request (JSON form); `counting`:
    count_tokens's, which has no `max_tokens`."""
    top = Fields(data, "")
    thread = top.take("thread", dict)
    if thread is not None:  # first: a `continue` leaves out what the thread would hold (system, tools, history)
        _thread(thread)
    chat: dict[str, Any] = {"model": top.take("model", str, required=True)}
    chat["max_tokens"] = top.take("max_tokens", int, required=True)
    messages = top.take("messages", list, required=True)
    chat["messages"] = _anthropic_messages(messages, top.take("system", str, list))
    if chat["messages"] and chat["messages"][-1]["role"] == "assistant":  # Anthropic's prefill: continue it
        chat["add_generation_prompt"] = False
        chat["continue_final_message"] = True
    kwargs = dict(top.take("chat_template_kwargs", dict) or {})
    tools = top.take("tools", list)
    if tools is not None:
        chat["tools"] = _anthropic_tools(tools)
    tool_choice = top.take("tool_choice", dict)
    if tool_choice is not None:
        _anthropic_tool_choice(tool_choice, chat)
    elif tools:
        chat["tool_choice"] = "auto"
    stop = top.take("stop_sequences", list)
    if stop is not None:
        if not all(isinstance(s, str) for s in stop):
            raise invalid("stop_sequences", "must be a list of strings")
        chat["stop"] = stop
    for name, kind in (("temperature", float), ("top_p", float), ("top_k", int)):
        value = top.take(name, kind)
        if value is not None:
            chat[name] = value
    if top.take("stream", bool):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    metadata = top.take("metadata", dict)
    if metadata is not None:  # user_id: the caller's identity (the one hop records it on the trace)
        metadata = Fields(metadata, "metadata")
        metadata.take("user_id", str)
        metadata.done()
    thinking = top.take("thinking", dict)
    if thinking is not None:
        budget = _anthropic_thinking(thinking, kwargs, None if counting else chat["max_tokens"])
        if budget is not None:
            chat["thinking_token_budget"] = budget
    output_config = top.take("output_config", dict)
    if output_config is not None:
        config = Fields(output_config, "output_config")
        output_format = config.take("format", dict)
        if output_format is not None:
            chat["response_format"] = _anthropic_format(Fields(output_format, "output_config.format"))
        effort = config.take("effort", str)
        if effort is not None:
            kwargs["reasoning_effort"] = effort
        config.done()
    top.allow("service_tier", "auto", "standard_only")
    top.allow("speed", "standard", why="is not supported: this deployment has one speed")
    top.allow("cache_control")  # automatic prompt caching: prefix caching is always on here
    top.refuse("kv_transfer_params", "needs disaggregated prefill, which this deployment does not run")
    if top.take("return_token_ids", bool):  # our extension (vLLM's chat field): the Message carries the ids
        chat["return_token_ids"] = True
    top.done()
    if kwargs:
        chat["chat_template_kwargs"] = kwargs
    return chat
