"""Anthropic Messages and OpenAI Responses requests -> the chat form (RenderChatRequest), as vLLM converts them.

Both APIs arrive as the client's JSON (google.api.HttpBody), so every key the client wrote is seen. Each one is
converted onto the chat request (render then treats it exactly as a chat request: same template, same tokens,
same sampling resolution), accepted where it changes nothing, or refused: UNSUPPORTED_FIELD (400) naming it.
`null` means "not given". Images, documents and other non-text content are INVALID_CONTENT, as in a chat
request. The same module serves `/v1/messages/render`, `/v1/responses/render` and, through those RPCs, the
one-hop `/v1/messages` and `/v1/responses`, so the conversion has one owner.

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
- Unlike vLLM, a conversation ending with an assistant turn is continued (Anthropic's prefill:
  continue_final_message), `thinking` / `output_config.effort` reach the template as `enable_thinking` /
  `reasoning_effort`, and blocks vLLM drops silently (redacted_thinking, server tools, tool_use in a user turn,
  tool_result in an assistant turn) are refused.

Responses (vLLM's `construct_input_messages`):
- `instructions` -> a leading system message; a string `input` -> one user message.
- message items keep their role (text parts as text parts); an assistant message, a reasoning item and
  function calls that follow each other merge into one assistant message (content, reasoning, tool_calls);
  `function_call_output` -> a tool message. A last message or reasoning item whose status is `in_progress` /
  `incomplete` is continued (continue_final_message).
- tools of type function -> chat tools; tool_choice "none" / "auto" / "required" / {"type": "function", "name"}.
- max_output_tokens -> max_tokens; `reasoning.effort` -> the template's `reasoning_effort`; `truncation: auto` ->
  truncate_prompt_tokens = -1; `text.format` json_object / json_schema -> the chat request's response_format
  (enforced while decoding).
- Refused: `previous_response_id`, `store: true`, `conversation`, `background: true`, hosted tools, encrypted
  reasoning and item references (no store).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format

from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

# Claude Code's per-request attribution block: a hash that would defeat prefix caching (vLLM drops it too).
BILLING_HEADER = "x-anthropic-billing-header"
# Roles Claude Code >= 2.1.154 writes for user context (vLLM reads them as user).
ANTHROPIC_USER_ALIASES = ("ctx", "msg")
ANTHROPIC_ROLES = ("user", "assistant", "system")
RESPONSES_ROLES = ("user", "system", "developer", "assistant")
IMAGE_LIKE = ("image", "document", "input_image", "input_file", "input_audio", "image_url", "file", "audio")
CONTINUED_STATUSES = ("in_progress", "incomplete")
# vLLM sampling extensions both APIs accept (vLLM's ResponsesRequest takes them; chat has them by these names).
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
)
# Error fields named as the chat request names them -> as the Responses request does.
RESPONSES_FIELD_NAMES = {"max_tokens": "max_output_tokens", "messages": "input"}
ANTHROPIC_FIELD_NAMES = {
    "stop": "stop_sequences",
    "thinking_token_budget": "thinking.budget_tokens",
    "response_format.json_schema.schema": "output_config.format.schema",
    "response_format": "output_config.format",
}


# --- reading the client's JSON ---------------------------------------------------------------------------------
def _invalid(field: str, message: str) -> ServiceError:
    return fail(Reason.INVALID_REQUEST, f"`{field}` {message}", field)


def _unsupported(field: str, why: str) -> ServiceError:
    return fail(Reason.UNSUPPORTED_FIELD, f"`{field}` {why}", field)


def _not_text(field: str, kind: str) -> ServiceError:
    return fail(
        Reason.INVALID_CONTENT,
        f"unsupported content {kind!r}: this deployment serves a text-only model (no images, files or audio)",
        field,
    )


_TYPES: dict[Any, str] = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    list: "a list",
    dict: "an object",
}


def _is(value, kind) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)


class Fields:
    """One JSON object of the request. Each key is taken (honoured), allowed (a no-op) or, at `done()`, refused."""

    def __init__(self, value, path: str):
        if not isinstance(value, dict):
            raise _invalid(path, "must be an object")
        self.path = path
        self.items = {k: v for k, v in value.items() if v is not None}

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self.items

    def take(self, key: str, *kinds, required: bool = False) -> Any:
        """The value of `key` (None when absent or null), checked to be one of `kinds`."""
        value = self.items.pop(key, None)
        if value is None:
            if required:
                raise _invalid(self.name(key), "is required")
            return None
        if kinds and not any(_is(value, kind) for kind in kinds):
            raise _invalid(self.name(key), "must be " + " or ".join(_TYPES[k] for k in kinds))
        return value

    def allow(self, key: str, *values, why: str = "is not supported by this deployment") -> None:
        """A no-op at `values` (any value when none are listed); any other value is refused with `why`."""
        if key not in self.items:
            return
        value = self.items.pop(key)
        if values and value not in values:
            raise _unsupported(self.name(key), f"= {json.dumps(value)} {why}")

    def refuse(self, key: str, why: str) -> None:
        if key in self.items:
            raise _unsupported(self.name(key), why)

    def done(self) -> None:
        for key in self.items:
            raise _unsupported(self.name(key), "is not a field this API takes")


def _text_parts(value, field: str, part_types: tuple[str, ...]) -> list[str]:
    """The texts of a string or a list of text parts (`{"type": <one of part_types>, "text": ...}`)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise _invalid(field, "must be a string or a list of content blocks")
    texts = []
    for i, item in enumerate(value):
        part = Fields(item, f"{field}[{i}]")
        kind = part.take("type", str, required=True)
        if kind in IMAGE_LIKE:
            raise _not_text(part.path, kind)
        if kind not in part_types:
            raise _unsupported(part.name("type"), f"= {kind!r} is not supported here (text only)")
        texts.append(part.take("text", str, required=True))
        part.allow("cache_control")  # a prompt-caching hint: prefix caching is automatic here
        part.allow("annotations", [])
        part.allow("logprobs", [])
        part.allow("citations", [], why="(citations) are not supported")
        part.done()
    return texts


# --- Anthropic Messages --------------------------------------------------------------------------------------
def _system_blocks(value, field: str) -> list[str]:
    texts = [t for t in _text_parts(value, field, ("text",)) if t]
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
    text = "\n".join(_text_parts(content, block.name("content"), ("text",))) if content is not None else ""
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _empty_turn(message: Fields) -> ServiceError:
    return _invalid(message.name("content"), "is empty: a user message needs text or a tool_result")


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
            raise _not_text(block.path, kind)
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
            raise _unsupported(block.name("type"), f"= {kind!r} does not belong in a {role} message")
        elif kind == "redacted_thinking":
            raise _unsupported(block.path, "is encrypted reasoning, which this deployment cannot read")
        else:
            raise _unsupported(block.name("type"), f"= {kind!r} is not a content block this deployment takes")
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
            raise fail(Reason.INVALID_ROLE, f"unknown role {role!r} (expected user or assistant)", message.name("role"))
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
        raise _invalid("thinking.type", f'= {kind!r}: use "enabled", "adaptive" or "disabled"')
    budget = thinking.take("budget_tokens", int, required=kind == "enabled")
    if kind != "enabled" and budget is not None:
        raise _invalid("thinking.budget_tokens", f'applies to {{"type": "enabled"}}, not {kind!r}')
    if budget is not None and budget < MIN_THINKING_BUDGET:
        raise _invalid("thinking.budget_tokens", f"must be at least {MIN_THINKING_BUDGET}")
    if budget is not None and max_tokens is not None and budget >= max_tokens:
        raise _invalid("thinking.budget_tokens", f"({budget}) must be less than `max_tokens` ({max_tokens})")
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
        raise _invalid(fmt.name("type"), f'= {kind!r}: the only format is "json_schema"')
    schema = fmt.take("schema", dict, required=True)
    fmt.done()
    text = json.dumps(schema, ensure_ascii=False)
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": text, "strict": True}}


def messages_chat(data: dict, counting: bool = False) -> dict:
    """An Anthropic Messages request (parsed JSON) -> the equivalent chat request (JSON form); `counting`:
    count_tokens's, which has no `max_tokens`."""
    top = Fields(data, "")
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
            raise _invalid("stop_sequences", "must be a list of strings")
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
    top.done()
    if kwargs:
        chat["chat_template_kwargs"] = kwargs
    return chat


# --- OpenAI Responses ----------------------------------------------------------------------------------------
def _responses_content(item: Fields, role: str):
    """A message item's content: a string, or its text parts (one assistant part reads as a string)."""
    content = item.take("content", str, list, required=True)
    if isinstance(content, str):
        return content
    part_types = ("output_text",) if role == "assistant" else ("input_text", "text", "output_text")
    texts = _text_parts(content, item.name("content"), part_types)
    if role == "assistant":
        return texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts] if texts else ""
    return [{"type": "text", "text": t} for t in texts]


def _reasoning_text(item: Fields) -> str:
    item.refuse("encrypted_content", "is encrypted reasoning, which this deployment cannot read")
    texts = {}
    for key, part_type in (("content", "reasoning_text"), ("summary", "summary_text")):
        value = item.take(key, list)
        texts[key] = _text_parts(value, item.name(key), (part_type,)) if value else []
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
                Reason.INVALID_ROLE, f"unknown role {role!r} (expected one of {RESPONSES_ROLES})", item.name("role")
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
            output if isinstance(output, str) else "\n".join(_text_parts(output, item.name("output"), ("input_text",)))
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
        raise _unsupported(
            item.path,
            "refers to a stored item, and this deployment stores nothing: send the item itself (clients such as the"
            " Vercel AI SDK do with store: false)",
        )
    elif kind is None:
        raise _invalid(item.name("type"), "is required (or a `role`, for a message)")
    else:
        raise _unsupported(item.name("type"), f"= {kind!r} is not an input item this deployment takes")


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
            raise _unsupported(tool.name("type"), f"= {kind!r} (a hosted tool) is not supported: give function tools")
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
        raise _unsupported(
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
    raise _invalid("text.format.type", 'is "text", "json_object" or "json_schema"')


RESPONSES_INCLUDE_LOGPROBS = "message.output_text.logprobs"


def _responses_logprobs(top: Fields, chat: dict) -> None:
    """`include: ["message.output_text.logprobs"]` and `top_logprobs` -> chat's logprobs (their output_text
    tokens'); any other `include` is refused."""
    include = top.take("include", list) or []
    for i, item in enumerate(include):
        if item != RESPONSES_INCLUDE_LOGPROBS:
            raise _unsupported(f"include[{i}]", f"= {json.dumps(item)} is not supported by this deployment")
    top_logprobs = top.take("top_logprobs", int)
    if include or top_logprobs:
        chat["logprobs"] = True
    if top_logprobs is not None:
        chat["top_logprobs"] = top_logprobs


def _responses_reasoning(value, kwargs: dict) -> None:
    reasoning = Fields(value, "reasoning")
    effort = reasoning.take("effort", str)
    if effort is not None:
        kwargs["reasoning_effort"] = effort
    reasoning.refuse("summary", "is not supported: reasoning comes back whole, never summarized")
    reasoning.refuse("generate_summary", "is not supported: reasoning comes back whole, never summarized")
    reasoning.done()


def responses_chat(data: dict) -> dict:
    """A Responses request (parsed JSON) -> the equivalent chat request (JSON form)."""
    top = Fields(data, "")
    top.refuse("previous_response_id", "needs stored responses, and this deployment stores nothing: send the input")
    top.refuse("conversation", "needs stored conversations, and this deployment stores nothing: send the input")
    top.allow("store", False, why="is not supported: this deployment stores nothing (send store: false)")
    top.allow("background", False, why="is not supported: responses are answered in the call")
    top.refuse("prompt", "(stored prompt templates) is not supported")
    top.take("max_tool_calls", int)  # caps built-in (hosted) tool calls: with those refused here, it always holds
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
        chat["tool_choice"] = _responses_tool_choice(top.take("tool_choice"))
    kwargs: dict = {}
    if top.has("text") and (response_format := _responses_text(top.take("text", dict))):
        chat["response_format"] = response_format
    if top.has("reasoning"):
        _responses_reasoning(top.take("reasoning", dict), kwargs)
    if kwargs:
        chat["chat_template_kwargs"] = kwargs
    truncation = top.take("truncation", str)
    if truncation not in (None, "disabled", "auto"):
        raise _invalid("truncation", 'is "auto" or "disabled"')
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
        raise _invalid("metadata", "must map strings to strings")
    for name in ("user", "safety_identifier"):  # the caller's identity: on the trace, echoed
        top.take(name, str)
    cache_key = top.take("prompt_cache_key", str)
    if cache_key:  # routes the request with the others that share it (render_svc/routing.py)
        chat["prompt_cache_key"] = cache_key
    top.allow("service_tier", "auto", "default")
    for name in RESPONSES_EXTENSIONS:
        if top.has(name):
            chat[name] = top.take(name)
    if isinstance(chat.get("stop"), str):
        chat["stop"] = [chat["stop"]]
    top.done()
    return chat


# --- the chat request and the render RPCs -----------------------------------------------------------------------
def typed(chat: dict) -> render_pb2.RenderChatRequest:
    try:
        return json_format.ParseDict(chat, render_pb2.RenderChatRequest())
    except json_format.ParseError as error:
        raise fail(Reason.INVALID_REQUEST, f"the request does not fit the API: {error}") from None


def _renamed(error: ServiceError, names: dict[str, str]) -> ServiceError:
    """The chat render's error with its fields named as the client's API names them (a renamed field's
    dotted sub-fields too)."""

    def rename(field: str) -> str:
        for ours, theirs in names.items():
            if field == ours or field.startswith(ours + "."):
                return theirs + field[len(ours) :]
        return field

    error.violations = [(rename(field), description) for field, description in error.violations]
    return error


def _anthropic_context(renderer, max_tokens: int) -> Callable[[list[int]], None]:
    """The context limits in Anthropic's words, which clients parse (Claude Code retries with a smaller
    `max_tokens`, LiteLLM raises its context-window error): checked on the prompt's tokens before the shared
    limits (render_svc/prompt.py, scaleout_common/sampling_rules.py) would refuse it in OpenAI's words."""

    def check(ids: list[int]) -> None:
        prompt, most, limit = len(ids), renderer.max_prompt_tokens, renderer.model.max_model_len
        if prompt > most:
            raise fail(Reason.PROMPT_TOO_LONG, f"prompt is too long: {prompt} tokens > {most} maximum", "messages")
        if prompt + max_tokens > limit:
            raise fail(
                Reason.MAX_TOKENS_TOO_LARGE,
                f"input length and `max_tokens` exceed context limit: {prompt} + {max_tokens} > {limit}, "
                "decrease input length or `max_tokens` and try again",
                "max_tokens",
            )

    return check


def render_messages(renderer, body) -> render_pb2.RenderChatResponse:
    """RenderService.RenderMessages: an Anthropic request (HttpBody) rendered as its chat form."""
    return _render_messages(renderer, load_object(body.data))


# What Anthropic's count_tokens takes: what shapes the prompt.
COUNT_TOKENS_FIELDS = (
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",  # its effort reaches the template
    "cache_control",
    "speed",
)


def count_message_tokens(renderer, body) -> render_pb2.CountMessageTokensResponse:
    """RenderService.CountMessageTokens: the prompt an Anthropic request (without max_tokens) renders to."""
    data = load_object(body.data)
    fields = Fields(data, "")
    for name in COUNT_TOKENS_FIELDS:
        fields.take(name)
    fields.done()
    rendered = _render_messages(renderer, data | {"max_tokens": 1}, counting=True)  # the prompt does not need it
    return render_pb2.CountMessageTokensResponse(input_tokens=len(rendered.generate_request.token_ids))


def _render_messages(renderer, data: dict, counting: bool = False) -> render_pb2.RenderChatResponse:
    request = typed(messages_chat(data, counting))
    try:
        return renderer.render_chat(request, "msg_", _anthropic_context(renderer, request.max_tokens))
    except ServiceError as error:
        raise _renamed(error, ANTHROPIC_FIELD_NAMES) from None


def render_responses(renderer, body) -> render_pb2.RenderChatResponse:
    """RenderService.RenderResponses: a Responses request (HttpBody) rendered as its chat form."""
    request = typed(responses_chat(load_object(body.data)))
    try:
        return renderer.render_chat(request, id_prefix="resp_")
    except ServiceError as error:
        raise _renamed(error, RESPONSES_FIELD_NAMES) from None
