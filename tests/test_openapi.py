"""The OpenAPI document: valid OpenAPI 3.1, one operation per google.api.http binding, the gateway's JSON names,
SSE for server streams, raw HttpBody, OpenAI errors; and the staleness check covers it."""

from __future__ import annotations

import json
import shutil

import pytest
from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2
from openapi_spec_validator import validate

from scaleout_common import openapi
from scaleout_common.codegen import DESCRIPTOR_SET, GENERATED, OPENAPI, contract_files, stale_files

F = descriptor_pb2.FieldDescriptorProto


@pytest.fixture(scope="module")
def document() -> dict:
    return json.loads((GENERATED / OPENAPI).read_text())


def _bindings():
    """(service, method, verb, path template) of every google.api.http binding in the contract."""
    descriptors = descriptor_pb2.FileDescriptorSet.FromString((GENERATED / DESCRIPTOR_SET).read_bytes())
    for file in descriptors.file:
        if file.name not in contract_files():
            continue
        for service in file.service:
            for method in service.method:
                options = descriptor_pb2.MethodOptions.FromString(method.options.SerializeToString())
                if options.HasExtension(annotations_pb2.http):
                    rule = options.Extensions[annotations_pb2.http]
                    verb = rule.WhichOneof("pattern")
                    yield service, method, verb, getattr(rule, verb)


def test_the_document_is_valid_openapi(document):
    validate(document)
    assert document["openapi"].startswith("3.")


def test_every_http_binding_is_an_operation(document):
    bindings = list(_bindings())
    assert len(bindings) > 10
    for service, method, verb, path in bindings:
        operation = document["paths"][openapi.openapi_path(path)][verb]
        assert operation["operationId"] == f"{service.name}_{method.name}"
        ok = operation["responses"]["200"]["content"]
        media = "text/event-stream" if method.server_streaming else "application/json"
        if not method.output_type.endswith("HttpBody"):
            assert list(ok) == [media], method.name
        assert operation["responses"]["default"] == {"$ref": f"#/components/responses/{openapi.ERROR}"}


def test_schemas_use_the_gateways_json_names(document):
    schemas = document["components"]["schemas"]
    request = schemas["RenderChatRequest"]["properties"]
    # preserve_proto_field_names: snake_case, as Envoy prints and reads them.
    assert {"max_completion_tokens", "chat_template_kwargs", "messages"} <= request.keys()
    assert request["messages"] == {"type": "array", "items": {"$ref": "#/components/schemas/ChatMessage"}}
    assert request["seed"]["format"] == "int64" and "string" in request["seed"]["type"]
    assert request["chat_template_kwargs"]["type"] == "object"  # google.protobuf.Struct, inlined
    assert schemas["FinishReason"]["enum"][0] == "FINISH_REASON_UNSPECIFIED"
    stream = document["paths"]["/v1/chat/completions/stream"]["post"]["responses"]["200"]["content"]
    assert stream["text/event-stream"]["x-sse-data"] == {"$ref": "#/components/schemas/ChatCompletionChunk"}


def test_errors_are_the_openai_error_object(document):
    error = document["components"]["schemas"][openapi.ERROR]["properties"]["error"]
    assert set(error["properties"]) == {"message", "type", "param", "code"}


def _toy_contract() -> descriptor_pb2.FileDescriptorSet:
    """A contract with what ours does not use yet: HttpBody, path and query parameters, additional bindings."""
    body = descriptor_pb2.FileDescriptorProto(name="google/api/httpbody.proto", package="google.api", syntax="proto3")
    body.message_type.add(name="HttpBody").field.add(name="content_type", number=1, type=F.TYPE_STRING)
    toy = descriptor_pb2.FileDescriptorProto(name="toy/v1/toy.proto", package="toy.v1", syntax="proto3")
    get = toy.message_type.add(name="GetRequest")
    get.field.add(name="name", number=1, type=F.TYPE_STRING)
    get.field.add(name="limit", number=2, type=F.TYPE_INT64)
    get.field.add(name="page", number=3, type=F.TYPE_MESSAGE, type_name=".toy.v1.Page")
    toy.message_type.add(name="Page").field.add(name="token", number=1, type=F.TYPE_STRING)
    service = toy.service.add(name="Toy")
    rule = http_pb2.HttpRule(get="/v1/things/{name=things/*}")
    rule.additional_bindings.add(get="/v1/alias/{name}")
    options = descriptor_pb2.MethodOptions()
    options.Extensions[annotations_pb2.http].CopyFrom(rule)
    service.method.add(name="Get", input_type=".toy.v1.GetRequest", output_type=".google.api.HttpBody", options=options)
    upload = descriptor_pb2.MethodOptions()
    upload.Extensions[annotations_pb2.http].CopyFrom(http_pb2.HttpRule(post="/v1/upload", body="*"))
    service.method.add(
        name="Upload",
        input_type=".google.api.HttpBody",
        output_type=".toy.v1.Page",
        server_streaming=True,
        options=upload,
    )
    return descriptor_pb2.FileDescriptorSet(file=[body, toy])


def test_path_query_raw_bodies_and_additional_bindings():
    document = openapi.build(_toy_contract(), ["toy/v1/toy.proto"])
    validate(document)
    get = document["paths"]["/v1/things/{name}"]["get"]
    params = {p["name"]: p for p in get["parameters"]}
    assert params["name"]["in"] == "path" and params["name"]["required"]
    assert params["limit"]["in"] == "query" and params["page.token"]["in"] == "query"
    assert list(get["responses"]["200"]["content"]) == ["*/*"]
    assert document["paths"]["/v1/alias/{name}"]["get"]["operationId"] == "Toy_Get_1"
    upload = document["paths"]["/v1/upload"]["post"]
    assert list(upload["requestBody"]["content"]) == ["*/*"]
    assert list(upload["responses"]["200"]["content"]) == ["text/event-stream"]


def test_the_staleness_check_covers_the_document(tmp_path):
    copy = tmp_path / "generated"
    shutil.copytree(GENERATED, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / OPENAPI).write_text("{}\n")
    assert stale_files(copy) == [OPENAPI]
