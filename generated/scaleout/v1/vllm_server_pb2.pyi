from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class VllmGetLoadRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VllmKvEventSourcesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VllmResetPrefixCacheRequest(_message.Message):
    __slots__ = ("reset_running_requests", "reset_external")
    RESET_RUNNING_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    RESET_EXTERNAL_FIELD_NUMBER: _ClassVar[int]
    reset_running_requests: bool
    reset_external: bool
    def __init__(self, reset_running_requests: _Optional[bool] = ..., reset_external: _Optional[bool] = ...) -> None: ...
