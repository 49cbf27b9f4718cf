from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetResponseRequest(_message.Message):
    __slots__ = ("response_id", "stream", "starting_after", "include_obfuscation")
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STARTING_AFTER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_OBFUSCATION_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    stream: bool
    starting_after: int
    include_obfuscation: bool
    def __init__(self, response_id: _Optional[str] = ..., stream: _Optional[bool] = ..., starting_after: _Optional[int] = ..., include_obfuscation: _Optional[bool] = ...) -> None: ...

class DeleteResponseRequest(_message.Message):
    __slots__ = ("response_id",)
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    def __init__(self, response_id: _Optional[str] = ...) -> None: ...

class CancelResponseRequest(_message.Message):
    __slots__ = ("response_id",)
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    def __init__(self, response_id: _Optional[str] = ...) -> None: ...

class FetchStoredResponseRequest(_message.Message):
    __slots__ = ("response_id",)
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    def __init__(self, response_id: _Optional[str] = ...) -> None: ...

class StoredResponse(_message.Message):
    __slots__ = ("response_json", "input_items_json")
    RESPONSE_JSON_FIELD_NUMBER: _ClassVar[int]
    INPUT_ITEMS_JSON_FIELD_NUMBER: _ClassVar[int]
    response_json: str
    input_items_json: str
    def __init__(self, response_json: _Optional[str] = ..., input_items_json: _Optional[str] = ...) -> None: ...

class DeleteStoredResponseRequest(_message.Message):
    __slots__ = ("response_id",)
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    def __init__(self, response_id: _Optional[str] = ...) -> None: ...

class DeleteStoredResponseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CancelStoredResponseRequest(_message.Message):
    __slots__ = ("response_id",)
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    def __init__(self, response_id: _Optional[str] = ...) -> None: ...
