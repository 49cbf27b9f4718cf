from scaleout.v1 import kv_events_pb2 as _kv_events_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ResetPrefixCacheRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResetPrefixCacheResponse(_message.Message):
    __slots__ = ("blocks_dropped",)
    BLOCKS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    blocks_dropped: int
    def __init__(self, blocks_dropped: _Optional[int] = ...) -> None: ...
