from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SGLangModelInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SGLangServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SGLangHealthGenerateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SGLangLoadsRequest(_message.Message):
    __slots__ = ("model", "include", "dp_rank", "format")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    DP_RANK_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    model: str
    include: str
    dp_rank: int
    format: str
    def __init__(self, model: _Optional[str] = ..., include: _Optional[str] = ..., dp_rank: _Optional[int] = ..., format: _Optional[str] = ...) -> None: ...

class SGLangFlushCacheRequest(_message.Message):
    __slots__ = ("timeout",)
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    timeout: float
    def __init__(self, timeout: _Optional[float] = ...) -> None: ...
