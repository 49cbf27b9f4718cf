from google.api import annotations_pb2 as _annotations_pb2
from scaleout.v1 import derender_pb2 as _derender_pb2
from scaleout.v1 import render_pb2 as _render_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateChatCompletionRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _render_pb2.RenderChatRequest
    def __init__(self, request: _Optional[_Union[_render_pb2.RenderChatRequest, _Mapping]] = ...) -> None: ...

class CreateChatCompletionResponse(_message.Message):
    __slots__ = ("completion",)
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    completion: _derender_pb2.ChatCompletion
    def __init__(self, completion: _Optional[_Union[_derender_pb2.ChatCompletion, _Mapping]] = ...) -> None: ...

class StreamChatCompletionRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _render_pb2.RenderChatRequest
    def __init__(self, request: _Optional[_Union[_render_pb2.RenderChatRequest, _Mapping]] = ...) -> None: ...

class StreamChatCompletionResponse(_message.Message):
    __slots__ = ("chunk",)
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    chunk: _derender_pb2.ChatCompletionChunk
    def __init__(self, chunk: _Optional[_Union[_derender_pb2.ChatCompletionChunk, _Mapping]] = ...) -> None: ...
