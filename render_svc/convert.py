"""Protobuf request parts -> the plain Python data a chat template sees (as vLLM hands it to transformers).

- google.protobuf.Struct does not keep key order (its map iterates in a per-process random order), so object
  keys are sorted: every replica renders the same prompt for the same request. Tool-call arguments travel as
  JSON strings and keep the caller's order.
- JSON numbers arrive as doubles (google.protobuf.Value); integral ones become ints so `tojson` prints `1`, not `1.0`.
- Content is a string or a list of text parts. Templates that loop over `message.content` ("openai" content
  format) get a list of {"type": "text", "text": ...}; the others ("string" format) get the texts joined by "\n".
- Assistant tool call arguments (JSON strings on the wire) become dicts, as tool-use templates expect; arguments
  that are not a JSON object (a call cut by max_tokens, which the server itself produced and an agent loop sends
  back) become `{}`, as vLLM's `_postprocess_messages` coerces them: OpenAI accepts any string in history.
- Every message but the assistant's needs content (a string or a non-empty list of parts), as OpenAI requires:
  `{"role": "user"}` or `"content": null` is refused rather than rendered as an empty turn.
"""

from __future__ import annotations

import json

from google.protobuf import struct_pb2

from render_svc import roles
from scaleout.v1 import common_pb2, derender_pb2
from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail

TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
_MAX_EXACT_INT = 2**53


def value_to_py(value: struct_pb2.Value):
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        return int(number) if number.is_integer() and abs(number) < _MAX_EXACT_INT else number
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return struct_to_py(value.struct_value)
    if kind == "list_value":
        return [value_to_py(item) for item in value.list_value.values]
    return None


def struct_to_py(struct: struct_pb2.Struct) -> dict:
    return {key: value_to_py(item) for key, item in sorted(struct.fields.items())}


def _texts(content: struct_pb2.Value, field: str) -> list[str] | None:
    """The text parts of a message's content; None when it has none (null or absent)."""
    kind = content.WhichOneof("kind")
    if kind == "string_value":
        return [content.string_value]
    if kind is None or kind == "null_value":
        return None
    if kind != "list_value":
        raise fail(Reason.INVALID_CONTENT, "content must be a string, null or a list of parts", field)
    texts = []
    for i, part in enumerate(content.list_value.values):
        item = value_to_py(part)
        if isinstance(item, str):
            texts.append(item)
            continue
        part_type = item.get("type", "text") if isinstance(item, dict) else None
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("text"), str)
            or not isinstance(part_type, str)  # a list or an object: unhashable, and no part type
            or part_type not in TEXT_PART_TYPES
        ):
            kind_name = part_type if isinstance(part_type, str) else type(part_type or item).__name__
            raise fail(
                Reason.INVALID_CONTENT,
                f"unsupported content part {quote(kind_name)}: this model takes text parts only",
                f"{field}[{i}]",
            )
        texts.append(item["text"])
    return texts


def _tool_call(call: common_pb2.ToolCall, field: str) -> dict:
    if not call.function.name:
        raise fail(Reason.INVALID_TOOL_CALL, "a tool call needs a function name", f"{field}.function.name")
    out = {
        "id": call.id,
        "type": call.type or "function",
        "function": {"name": call.function.name, "arguments": _arguments(call.function.arguments)},
    }
    if not call.id:
        del out["id"]
    return out


def _arguments(text: str) -> dict:
    """A call's arguments as the object templates expect; anything but a JSON object is `{}` (vLLM's coercion)."""
    try:
        parsed = json.loads(text) if text else {}
    except (json.JSONDecodeError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def chat_messages(messages, openai_content: bool) -> list[dict]:
    """ChatMessage protos -> template messages (`openai_content`: the template loops over content parts)."""
    if not messages:
        raise fail(Reason.MISSING_MESSAGES, "at least one message is required", "messages")
    out = []
    for i, message in enumerate(messages):
        role = message.role
        if role not in roles.OPENAI_ROLES and not roles.CUSTOM_ROLE.fullmatch(role):
            raise fail(
                Reason.INVALID_ROLE,
                f"unknown role {quote(role)} (one of {sorted(roles.OPENAI_ROLES)}, or a custom role: up to 64 letters, digits "
                "and _.:- starting with a letter)",
                f"messages[{i}].role",
            )
        texts = _texts(message.content, f"messages[{i}].content") if message.HasField("content") else None
        if not texts and role != "assistant":  # None (null or absent) or [] ("" is [""], a turn of its own)
            raise fail(
                Reason.INVALID_CONTENT,
                f"a {role} message needs content: a string or a non-empty list of text parts",
                f"messages[{i}].content",
            )
        if openai_content:
            content = [{"type": "text", "text": text} for text in texts or ()]
        else:
            content = "\n".join(texts) if texts else ""
        item = {"role": role, "content": content}
        if message.name:
            item["name"] = message.name
        if role == "assistant":
            if message.tool_calls:
                item["tool_calls"] = [
                    _tool_call(c, f"messages[{i}].tool_calls[{j}]") for j, c in enumerate(message.tool_calls)
                ]
            if message.reasoning_content:
                item["reasoning_content"] = message.reasoning_content
        elif role == "tool" and message.tool_call_id:
            item["tool_call_id"] = message.tool_call_id
        out.append(item)
    return out


def tools(tool_protos) -> list[dict] | None:
    if not tool_protos:
        return None
    out = []
    for i, tool in enumerate(tool_protos):
        if tool.type not in ("", "function") or not tool.function.name:
            raise fail(Reason.INVALID_TOOL, "a tool is {'type': 'function', 'function': {'name': ...}}", f"tools[{i}]")
        function = {"name": tool.function.name}
        if tool.function.description:
            function["description"] = tool.function.description
        if tool.function.HasField("parameters"):
            function["parameters"] = struct_to_py(tool.function.parameters)
        if tool.function.HasField("strict"):
            function["strict"] = tool.function.strict
        out.append({"type": "function", "function": function})
    return out


def tool_choice(value: struct_pb2.Value, tool_list: list[dict] | None) -> tuple[derender_pb2.ToolChoiceMode, str]:
    """(ToolChoiceMode, named function) from OpenAI's tool_choice; absent: auto with tools, none without."""
    modes = derender_pb2  # module-level enum values: no enum-wrapper lookups on the hot path
    choice = value_to_py(value)
    if choice is None:
        return (modes.TOOL_CHOICE_MODE_AUTO if tool_list else modes.TOOL_CHOICE_MODE_NONE), ""
    names = {t["function"]["name"] for t in tool_list or ()}
    if choice == "none":
        return modes.TOOL_CHOICE_MODE_NONE, ""
    if choice in ("auto", "required"):
        if not tool_list:
            raise fail(Reason.INVALID_TOOL_CHOICE, f"tool_choice {quote(choice)} needs tools", "tool_choice")
        return (modes.TOOL_CHOICE_MODE_AUTO if choice == "auto" else modes.TOOL_CHOICE_MODE_REQUIRED), ""
    if (
        isinstance(choice, dict)
        and choice.get("type", "function") == "function"
        and isinstance(choice.get("function"), dict)
    ):
        name = choice["function"].get("name")
        if name not in names:
            raise fail(
                Reason.INVALID_TOOL_CHOICE,
                f"tool_choice names {quote(name)}, which is not among the tools",
                "tool_choice",
            )
        return modes.TOOL_CHOICE_MODE_NAMED, name
    raise fail(
        Reason.INVALID_TOOL_CHOICE,
        "tool_choice is 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': ...}}",
        "tool_choice",
    )
