"""scaleout_common.proto_json prints what json_format.MessageToDict(preserving_proto_field_name=True) prints:
over every message type of the contract with every field set (scalars, enums, bytes, int64, floats, maps,
repeated, nested, well-known types), and over what render answers for each case of the vLLM render corpus."""

from __future__ import annotations

import importlib
import json
import pkgutil

import pytest
from google.api import httpbody_pb2
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor as FD

import scaleout.v1
from render_svc.model import load_model
from render_svc.renderer import Renderer
from render_svc.vllm_render.answer import render_chat_vllm, render_completion_vllm
from scaleout_common import proto_json
from scaleout_common.errors import ServiceError
from tests.render.vllm_render_cases import CASES, CHAT

SCALARS = {
    FD.CPPTYPE_STRING: "x\u00e9",
    FD.CPPTYPE_INT32: -7,
    FD.CPPTYPE_UINT32: 7,
    FD.CPPTYPE_INT64: -(2**40),
    FD.CPPTYPE_UINT64: 2**40,
    FD.CPPTYPE_FLOAT: 0.1,
    FD.CPPTYPE_DOUBLE: 0.1,
    FD.CPPTYPE_BOOL: True,
}


def _value(field):
    if field.type == FD.TYPE_BYTES:
        return b"\x00\xff"
    if field.cpp_type == FD.CPPTYPE_ENUM:
        return field.enum_type.values[-1].number
    return SCALARS[field.cpp_type]


def _fill(message, depth: int = 0):
    """Every field set (one member of each oneof), two levels deep."""
    for field in message.DESCRIPTOR.fields:
        if field.containing_oneof is not None and message.WhichOneof(field.containing_oneof.name):
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            if value.cpp_type != FD.CPPTYPE_MESSAGE:
                getattr(message, field.name)[_value(key)] = _value(value)
        elif field.cpp_type == FD.CPPTYPE_MESSAGE:
            if depth >= 2 or field.message_type.full_name.startswith("google.protobuf.Any"):
                continue
            child = getattr(message, field.name).add() if field.is_repeated else getattr(message, field.name)
            if field.message_type.full_name == "google.protobuf.Value":
                child.string_value = "v"
            elif field.message_type.full_name == "google.protobuf.Struct":
                child.update({"a": [1, "b", None, {"c": True}]})
            else:
                _fill(child, depth + 1)
                child.SetInParent()
        elif field.is_repeated:
            getattr(message, field.name).extend([_value(field)] * 2)
        else:
            setattr(message, field.name, _value(field))


def _message_types():
    for module in pkgutil.iter_modules(scaleout.v1.__path__):
        if module.name.endswith("_pb2"):
            pb2 = importlib.import_module(f"scaleout.v1.{module.name}")
            yield from (getattr(pb2, name) for name in pb2.DESCRIPTOR.message_types_by_name)


def _expected(message) -> dict:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


@pytest.mark.parametrize("kind", list(_message_types()), ids=lambda kind: kind.DESCRIPTOR.name)
def test_every_field_prints_as_json_format_prints_it(kind):
    message = kind()
    _fill(message)
    assert proto_json.to_dict(message) == _expected(message)
    assert proto_json.to_dict(kind()) == {}


def test_render_answers_print_as_json_format_prints_them(monkeypatch):
    renderer = Renderer(load_model(None))
    printed = []
    monkeypatch.setattr(proto_json, "to_dict", lambda message: printed.append(message) or _expected(message))
    for case in CASES:
        body = httpbody_pb2.HttpBody(data=json.dumps(case.body).encode())
        try:
            (render_chat_vllm if case.path == CHAT else render_completion_vllm)(renderer, body)
        except ServiceError:
            continue
    monkeypatch.undo()
    assert len(printed) > 100
    for message in printed:
        assert proto_json.to_dict(message) == _expected(message)
