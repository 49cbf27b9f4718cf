from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class VllmShutdownWeightTransferEngineRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VllmReleaseKvCacheMemoryRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VllmPauseRequest(_message.Message):
    __slots__ = ("mode", "clear_cache")
    MODE_FIELD_NUMBER: _ClassVar[int]
    CLEAR_CACHE_FIELD_NUMBER: _ClassVar[int]
    mode: str
    clear_cache: bool
    def __init__(self, mode: _Optional[str] = ..., clear_cache: _Optional[bool] = ...) -> None: ...

class VllmResumeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VllmIsPausedRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VllmSleepRequest(_message.Message):
    __slots__ = ("level", "mode")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    level: int
    mode: str
    def __init__(self, level: _Optional[int] = ..., mode: _Optional[str] = ...) -> None: ...

class VllmWakeUpRequest(_message.Message):
    __slots__ = ("tags",)
    TAGS_FIELD_NUMBER: _ClassVar[int]
    tags: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tags: _Optional[_Iterable[str]] = ...) -> None: ...

class VllmIsSleepingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VllmWeightInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VllmGetWorldSizeRequest(_message.Message):
    __slots__ = ("include_dp",)
    INCLUDE_DP_FIELD_NUMBER: _ClassVar[int]
    include_dp: bool
    def __init__(self, include_dp: _Optional[bool] = ...) -> None: ...

class VllmGetLoadRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VllmServerInfoRequest(_message.Message):
    __slots__ = ("config_format",)
    CONFIG_FORMAT_FIELD_NUMBER: _ClassVar[int]
    config_format: str
    def __init__(self, config_format: _Optional[str] = ...) -> None: ...

class VllmGetServerLoadRequest(_message.Message):
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
