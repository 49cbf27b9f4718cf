"""The field names each typed REST route's JSON body may hold, for the gateway's Lua guard (json_fields.lua).

Envoy's transcoder drops a JSON field its message does not define and forwards the rest (envoyproxy/envoy#46623;
its request_validation_options cover methods and query parameters, not body fields), so `{"bogus": 1}` or a
misspelt `sampling_params.max_token` would be accepted and ignored. The guard walks the body before the
transcoder and refuses the first name the contract does not define: 400 UNSUPPORTED_FIELD naming its path.
HttpBody routes (the OpenAI, Anthropic, vLLM and SGLang faces) parse their own JSON and are not listed.

Each message becomes a Lua table of its JSON names (proto and lowerCamel, as protobuf's JSON parser takes both)
to the kind of value the name holds: "" a scalar (or a well-known type printed as one), "*" anything (Struct,
Value, ListValue, Any), "m:<message>" a message, "map:<kind>" a map of the value kind.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor

from scaleout_common.openapi import method_bindings
from scaleout_common.reasons import Reason

GUARD_LUA = Path(__file__).with_name("json_fields.lua")
# The refused field's path, set on the request for the reply's mapper (envoy.yaml.j2) to print as `param`.
FIELD_HEADER = "x-scaleout-unknown-field"

FREE = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.Any"}
# Well-known types whose JSON is a scalar (a string or a number), not an object of their fields.
SCALAR_LIKE = {"google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask"}
BODY_VERBS = ("post", "put", "patch")


def _kind(field: FieldDescriptor, messages: dict[str, dict[str, str]]) -> str:
    if field.message_type is None:
        return ""
    name = field.message_type.full_name
    if field.message_type.GetOptions().map_entry:
        return "map:" + _kind(field.message_type.fields_by_name["value"], messages)
    if name in FREE:
        return "*"
    if name in SCALAR_LIKE or (name.startswith("google.protobuf.") and name.endswith("Value")):
        return ""
    _collect(field.message_type, messages)
    return "m:" + name


def _collect(message: Descriptor, messages: dict[str, dict[str, str]]) -> None:
    if message.full_name in messages:
        return
    fields: dict[str, str] = {}
    messages[message.full_name] = fields  # before the fields: a message may hold itself
    for field in message.fields:
        kind = _kind(field, messages)
        fields[field.name] = kind
        fields[field.json_name] = kind


def guarded_routes(services: Iterable[ServiceDescriptor]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """REST path -> its message's full name for every typed method whose whole body is its request, and every
    message reachable from those (full name -> JSON name -> kind)."""
    routes: dict[str, str] = {}
    messages: dict[str, dict[str, str]] = {}
    for service in services:
        for method in service.methods:
            if method.input_type.full_name == "google.api.HttpBody":
                continue
            for rule in method_bindings(method.GetOptions()):
                verb = rule.WhichOneof("pattern")
                if rule.body == "*" and verb in BODY_VERBS:
                    routes[getattr(rule, verb)] = method.input_type.full_name
                    _collect(method.input_type, messages)
    return routes, messages


def _lua(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{json.dumps(k)}] = {_lua(v)}" for k, v in sorted(value.items())) + "}"
    return json.dumps(value)


def guard_lua(services: Iterable[ServiceDescriptor]) -> str:
    """json_fields.lua with its tables filled in for these services."""
    routes, messages = guarded_routes(services)
    return (
        GUARD_LUA.read_text()
        .replace("{{ routes }}", _lua(routes))
        .replace("{{ messages }}", _lua(messages))
        .replace("{{ reason }}", Reason.UNSUPPORTED_FIELD.value)
        .replace("{{ field_header }}", FIELD_HEADER)
    )
