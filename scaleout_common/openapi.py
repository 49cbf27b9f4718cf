"""OpenAPI 3.1 document of the REST surface that Envoy's grpc_json_transcoder serves, built from the contract's
FileDescriptorSet (with source info: proto comments become descriptions). `scaleout-codegen` writes it to
generated/openapi.json; the gateway serves it at GET /openapi.json.

Our own, not the field's generator: gnostic's protoc-gen-openapi and grpc-gateway's protoc-gen-openapiv2 are Go
binaries (Go proxy or release downloads, which this project's machines do not reach), npm's protobuf2swagger wants
the paths written by hand, and none of them knows the gateway's print options. The mapping is the transcoder's:

- every google.api.http binding (additional_bindings too) is an operation; `{field}` / `{field=pattern}` are path
  parameters; without a body (or with `body: "field"`) the other fields are query parameters, nested ones dotted.
- `body: "*"` is the request message, `body: "field"` that field; `response_body` narrows the response likewise.
- JSON names are the proto field names (the gateway sets preserve_proto_field_names); enums print as value
  names, 64-bit integers as strings, bytes as base64, well-known types in their proto3 JSON forms.
- a server-streaming RPC answers text/event-stream, one `data:` event per message (stream_sse_style_delimited);
  a client-streaming one takes a JSON array of messages.
- google.api.HttpBody is raw bytes of the content type it carries.
- every error is the OpenAI error object, `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto
ERROR = "ErrorResponse"  # components/schemas and components/responses name of the OpenAI error object
HTTP_BODY = ".google.api.HttpBody"
_PACKAGE_PREFIX = "scaleout.v1."  # component names drop it: "ChatCompletion", "google.rpc.Status"
_METHODS = ("get", "put", "post", "delete", "patch")
_HTTP: Any = annotations_pb2.http  # the stubs type it as a plain FieldDescriptor, not an extension
_PATH_VAR = re.compile(r"\{([^}=]+)(?:=[^}]*)?\}")

_SCALARS: dict[int, dict] = {
    F.TYPE_DOUBLE: {"type": "number", "format": "double"},
    F.TYPE_FLOAT: {"type": "number", "format": "float"},
    # 64-bit integers print as decimal strings (proto3 JSON); the transcoder also reads numbers.
    **{
        key: {"type": ["string", "integer"], "format": "int64"}
        for key in (F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64)
    },
    **{key: {"type": ["string", "integer"], "format": "uint64"} for key in (F.TYPE_UINT64, F.TYPE_FIXED64)},
    **{key: {"type": "integer", "format": "int32"} for key in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32)},
    **{key: {"type": "integer", "format": "uint32", "minimum": 0} for key in (F.TYPE_UINT32, F.TYPE_FIXED32)},
    F.TYPE_BOOL: {"type": "boolean"},
    F.TYPE_STRING: {"type": "string"},
    F.TYPE_BYTES: {"type": "string", "contentEncoding": "base64"},
}


def _nullable(schema: dict) -> dict:
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return {**schema, "type": [*kinds, "null"]}


_WRAPPERS = ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
# Types whose JSON is not an object of their fields (proto3 JSON mapping), inlined where used.
_WELL_KNOWN: dict[str, dict] = {
    ".google.protobuf.Struct": {"type": "object", "additionalProperties": True},
    ".google.protobuf.Value": {"description": "Any JSON value."},
    ".google.protobuf.ListValue": {"type": "array", "items": {}},
    ".google.protobuf.NullValue": {"type": "null"},
    ".google.protobuf.Empty": {"type": "object"},
    ".google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    ".google.protobuf.Duration": {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?s$"},
    ".google.protobuf.FieldMask": {"type": "string"},
    ".google.protobuf.Any": {"type": "object", "properties": {"@type": {"type": "string"}}, "required": ["@type"]},
    **{f".google.protobuf.{w}Value": _nullable(_SCALARS[F.Type.Value(f"TYPE_{w.upper()}")]) for w in _WRAPPERS},
}
_ERROR_FIELDS = {
    "message": "string",
    "type": "string",
    "param": ["string", "null"],
    "code": ["string", "integer", "null"],
}
_ERROR_OBJECT = {"type": "object", "required": ["message", "type"], "properties": {}}
_ERROR_OBJECT["properties"] = {name: {"type": kind} for name, kind in _ERROR_FIELDS.items()}
_ERROR_SCHEMA = {"type": "object", "required": ["error"], "properties": {"error": _ERROR_OBJECT}}
_ERROR_SCHEMA["description"] = "Every REST error, from Envoy or a service, in the shape OpenAI clients parse."


def _described(obj: dict, description: str | None) -> dict:
    if description:
        obj["description"] = description
    return obj


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


class _Contract:
    """Index of every message and enum in the set (by `.full.name`) with its comments."""

    def __init__(self, files: descriptor_pb2.FileDescriptorSet):
        self.types: dict[str, descriptor_pb2.DescriptorProto | descriptor_pb2.EnumDescriptorProto] = {}
        self.comments: dict[tuple, str] = {}  # (file name, *source path) -> leading comment
        self.docs: dict[str | tuple[str, str], str] = {}  # type name, or (message name, field name) -> comment
        for file in files.file:
            for loc in file.source_code_info.location:
                if loc.leading_comments.strip():
                    lines = (line.strip() for line in loc.leading_comments.strip().splitlines())
                    self.comments[(file.name, *loc.path)] = "\n".join(lines)
            prefix = f".{file.package}" if file.package else ""
            for i, message in enumerate(file.message_type):
                self._add_message(file.name, prefix, message, (4, i))
            for i, enum in enumerate(file.enum_type):
                self._add(file.name, f"{prefix}.{enum.name}", enum, (5, i))

    def message(self, name: str) -> descriptor_pb2.DescriptorProto:
        message = self.types[name]
        assert isinstance(message, descriptor_pb2.DescriptorProto), f"{name} is not a message"
        return message

    def _add(self, file: str, name: str, proto, path: tuple) -> None:
        self.types[name] = proto
        self.docs[name] = self.comments.get((file, *path), "")
        if isinstance(proto, descriptor_pb2.DescriptorProto):
            for j, field in enumerate(proto.field):
                self.docs[(name, field.name)] = self.comments.get((file, *path, 2, j), "")

    def _add_message(self, file: str, prefix: str, message, path: tuple) -> None:
        name = f"{prefix}.{message.name}"
        self._add(file, name, message, path)
        for k, nested in enumerate(message.nested_type):
            self._add_message(file, name, nested, (*path, 3, k))
        for k, enum in enumerate(message.enum_type):
            self._add(file, f"{name}.{enum.name}", enum, (*path, 4, k))


class _Builder:
    def __init__(self, contract: _Contract):
        self.contract = contract
        self.schemas: dict[str, dict] = {}

    def component(self, type_name: str) -> dict:
        """A reference to the component for `.full.Name` (built on first use), or a well-known type inlined."""
        if type_name in _WELL_KNOWN:
            return dict(_WELL_KNOWN[type_name])
        name = type_name.lstrip(".").removeprefix(_PACKAGE_PREFIX)
        if name not in self.schemas:
            self.schemas[name] = {}  # placeholder: a recursive message refers to itself while it is built
            proto = self.contract.types[type_name]
            schema = (
                self._message(type_name, proto)
                if isinstance(proto, descriptor_pb2.DescriptorProto)
                else self._enum(proto)
            )
            if description := f"{self.contract.docs.get(type_name, '')} {schema.pop('description', '')}".strip():
                schema = {"description": description, **schema}
            self.schemas[name] = schema
        return _ref(name)

    @staticmethod
    def _enum(enum: descriptor_pb2.EnumDescriptorProto) -> dict:
        return {"type": "string", "enum": [value.name for value in enum.value]}

    def _message(self, type_name: str, message: descriptor_pb2.DescriptorProto) -> dict:
        properties = {}
        for field in message.field:
            schema = self.field(field)
            if description := self.contract.docs.get((type_name, field.name)):
                schema = {**schema, "description": description}
            properties[field.name] = schema
        schema: dict = {"type": "object", "properties": properties}
        for i in range(len(message.oneof_decl)):
            group = [f.name for f in message.field if f.HasField("oneof_index") and f.oneof_index == i]
            if not any(f.proto3_optional for f in message.field if f.name in group):
                schema["description"] = f"{schema.get('description', '')} At most one of: {', '.join(group)}.".strip()
        return schema

    def field(self, field: descriptor_pb2.FieldDescriptorProto) -> dict:
        entry = self.contract.types.get(field.type_name)
        if isinstance(entry, descriptor_pb2.DescriptorProto) and entry.options.map_entry:
            # JSON object keys are strings whatever the key type.
            return {"type": "object", "additionalProperties": self.field(entry.field[1])}
        if field.type in (F.TYPE_MESSAGE, F.TYPE_ENUM, F.TYPE_GROUP):
            item = self.component(field.type_name)
        else:
            item = dict(_SCALARS[field.type])
        return {"type": "array", "items": item} if field.label == F.LABEL_REPEATED else item

    def query_parameters(self, type_name: str, skip: set[str], prefix: str = "") -> list:
        """Non-body, non-path fields as query parameters; nested messages dotted (`a.b=1`), as the transcoder reads."""
        params = []
        for field in self.contract.message(type_name).field:
            name = prefix + field.name
            if name in skip:
                continue
            if field.type == F.TYPE_MESSAGE and field.type_name not in _WELL_KNOWN:
                nested = self.contract.message(field.type_name)
                if field.label != F.LABEL_REPEATED and not nested.options.map_entry and prefix.count(".") < 3:
                    params += self.query_parameters(field.type_name, skip, name + ".")
                continue
            param = {"name": name, "in": "query", "schema": self.field(field)}
            if description := self.contract.docs.get((type_name, field.name)):
                param["description"] = description
            params.append(param)
        return params

    def field_at(self, type_name: str, dotted: str) -> descriptor_pb2.FieldDescriptorProto:
        for part in dotted.split("."):
            field = next(f for f in self.contract.message(type_name).field if f.name == part)
            type_name = field.type_name
        return field

    def is_raw(self, type_name: str, field: str = "") -> bool:
        return (self.field_at(type_name, field).type_name if field else type_name) == HTTP_BODY

    def content(self, type_name: str, streaming: bool, field: str = "", many: bool = False) -> dict:
        """The media types of a body: the message (or its `field`), raw, an SSE stream, or a JSON array (`many`)."""
        schema = self.field(self.field_at(type_name, field)) if field else self.component(type_name)
        if self.is_raw(type_name, field):  # the HttpBody's bytes, sent with its content_type
            return {"*/*": {}}
        if streaming:  # OpenAPI 3.1 has no item schema for a stream (3.2's itemSchema): an extension carries it
            name = schema.get("$ref", "").rsplit("/", 1)[-1] or "message"
            return {
                "text/event-stream": {
                    "schema": {"type": "string", "description": f"Each event's `data:` is one JSON {name}."},
                    "x-sse-data": schema,
                }
            }
        return {"application/json": {"schema": {"type": "array", "items": schema} if many else schema}}


def openapi_path(template: str) -> str:
    """`/v1/models/{model=**}` -> `/v1/models/{model}`."""
    return _PATH_VAR.sub(lambda match: "{" + match.group(1) + "}", template)


def http_bindings(rule: http_pb2.HttpRule) -> Iterable[http_pb2.HttpRule]:
    """A method's google.api.http rule and its additional bindings (the gateway routes each)."""
    yield rule
    for extra in rule.additional_bindings:
        yield from http_bindings(extra)


def method_bindings(options: descriptor_pb2.MethodOptions) -> Iterable[http_pb2.HttpRule]:
    """Every REST binding of a method with these options (none without a google.api.http option)."""
    if options.HasExtension(_HTTP):
        yield from http_bindings(options.Extensions[_HTTP])


def verb_and_path(rule: http_pb2.HttpRule) -> tuple[str, str]:
    pattern = rule.WhichOneof("pattern")
    if pattern == "custom":
        return rule.custom.kind.lower(), rule.custom.path
    return pattern, getattr(rule, pattern)


def _operation(builder: _Builder, service, method, rule: http_pb2.HttpRule, path_fields: list[str]) -> dict:
    params = []
    for name in path_fields:
        schema = builder.field(builder.field_at(method.input_type, name))
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
    if rule.body != "*":
        params += builder.query_parameters(method.input_type, {*path_fields, rule.body})
    operation: dict = {"tags": [service.name], **({"parameters": params} if params else {})}
    if rule.body:
        field = "" if rule.body == "*" else rule.body
        content = builder.content(method.input_type, False, field, many=method.client_streaming)
        operation["requestBody"] = {"required": True, "content": content}
    answer = "OK"
    if method.server_streaming:
        raw = builder.is_raw(method.output_type, rule.response_body)
        answer = "The bytes of each HttpBody, as the service writes them." if raw else "A stream of server-sent events."
    content = builder.content(method.output_type, method.server_streaming, rule.response_body)
    operation["responses"] = {
        "200": {"description": answer, "content": content},
        "default": {"$ref": f"#/components/responses/{ERROR}"},
    }
    return operation


def build(files: descriptor_pb2.FileDescriptorSet, contract_files: Iterable[str], title: str = "scaleout") -> dict:
    """The OpenAPI document for every google.api.http binding of the services in `contract_files`."""
    contract = _Contract(files)
    builder = _Builder(contract)
    paths: dict[str, dict] = {}
    tags, versions = [], set()
    for file in (f for f in files.file if f.name in set(contract_files)):
        versions.add(file.package.rsplit(".", 1)[-1])
        for s, service in enumerate(file.service):
            tags.append(_described({"name": service.name}, contract.comments.get((file.name, 6, s))))
            for m, method in enumerate(service.method):
                options = descriptor_pb2.MethodOptions.FromString(method.options.SerializeToString())
                for n, rule in enumerate(method_bindings(options)):
                    verb, template = verb_and_path(rule)
                    if verb not in _METHODS:
                        continue
                    path = openapi_path(template)
                    if verb in paths.setdefault(path, {}):
                        raise ValueError(f"two RPCs bind {verb.upper()} {path}")
                    operation = {"operationId": f"{service.name}_{method.name}" + (f"_{n}" if n else "")}
                    _described(operation, contract.comments.get((file.name, 6, s, 2, m)))
                    paths[path][verb] = operation | _operation(
                        builder, service, method, rule, _PATH_VAR.findall(template)
                    )
    if ERROR in builder.schemas:
        raise ValueError(f"a message named {ERROR} collides with the error schema's name")
    builder.schemas[ERROR] = _ERROR_SCHEMA
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": ", ".join(sorted(versions))},
        "tags": sorted(tags, key=lambda tag: tag["name"]),
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(builder.schemas.items())),
            "responses": {
                ERROR: {
                    "description": "An error in the OpenAI shape, with the HTTP status of its gRPC code.",
                    "content": {"application/json": {"schema": _ref(ERROR)}},
                }
            },
        },
    }
