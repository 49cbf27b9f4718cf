from google.api import annotations_pb2 as _annotations_pb2
from google.rpc import status_pb2 as _status_pb2
from scaleout.v1 import control_pb2 as _control_pb2
from scaleout.v1 import engine_pb2 as _engine_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetLoadsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EngineLoad(_message.Message):
    __slots__ = ("engine", "load", "error")
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    engine: str
    load: _engine_pb2.GetLoadResponse
    error: _status_pb2.Status
    def __init__(self, engine: _Optional[str] = ..., load: _Optional[_Union[_engine_pb2.GetLoadResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class GetLoadsResponse(_message.Message):
    __slots__ = ("engines",)
    ENGINES_FIELD_NUMBER: _ClassVar[int]
    engines: _containers.RepeatedCompositeFieldContainer[EngineLoad]
    def __init__(self, engines: _Optional[_Iterable[_Union[EngineLoad, _Mapping]]] = ...) -> None: ...

class FleetResetPrefixCacheRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EngineCacheReset(_message.Message):
    __slots__ = ("engine", "reset", "error")
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    engine: str
    reset: _control_pb2.ResetPrefixCacheResponse
    error: _status_pb2.Status
    def __init__(self, engine: _Optional[str] = ..., reset: _Optional[_Union[_control_pb2.ResetPrefixCacheResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class FleetResetPrefixCacheResponse(_message.Message):
    __slots__ = ("engines",)
    ENGINES_FIELD_NUMBER: _ClassVar[int]
    engines: _containers.RepeatedCompositeFieldContainer[EngineCacheReset]
    def __init__(self, engines: _Optional[_Iterable[_Union[EngineCacheReset, _Mapping]]] = ...) -> None: ...
