from scaleout.v1 import common_pb2 as _common_pb2
from scaleout.v1 import kv_events_pb2 as _kv_events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PauseMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PAUSE_MODE_UNSPECIFIED: _ClassVar[PauseMode]
    PAUSE_MODE_ABORT: _ClassVar[PauseMode]
    PAUSE_MODE_WAIT: _ClassVar[PauseMode]
    PAUSE_MODE_KEEP: _ClassVar[PauseMode]

class SleepTag(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SLEEP_TAG_UNSPECIFIED: _ClassVar[SleepTag]
    SLEEP_TAG_WEIGHTS: _ClassVar[SleepTag]
    SLEEP_TAG_KV_CACHE: _ClassVar[SleepTag]
    SLEEP_TAG_SCHEDULING: _ClassVar[SleepTag]

class ProfileActivity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROFILE_ACTIVITY_UNSPECIFIED: _ClassVar[ProfileActivity]
    PROFILE_ACTIVITY_CPU: _ClassVar[ProfileActivity]
    PROFILE_ACTIVITY_CUDA: _ClassVar[ProfileActivity]
PAUSE_MODE_UNSPECIFIED: PauseMode
PAUSE_MODE_ABORT: PauseMode
PAUSE_MODE_WAIT: PauseMode
PAUSE_MODE_KEEP: PauseMode
SLEEP_TAG_UNSPECIFIED: SleepTag
SLEEP_TAG_WEIGHTS: SleepTag
SLEEP_TAG_KV_CACHE: SleepTag
SLEEP_TAG_SCHEDULING: SleepTag
PROFILE_ACTIVITY_UNSPECIFIED: ProfileActivity
PROFILE_ACTIVITY_CPU: ProfileActivity
PROFILE_ACTIVITY_CUDA: ProfileActivity

class PauseRequest(_message.Message):
    __slots__ = ("mode",)
    MODE_FIELD_NUMBER: _ClassVar[int]
    mode: PauseMode
    def __init__(self, mode: _Optional[_Union[PauseMode, str]] = ...) -> None: ...

class PauseResponse(_message.Message):
    __slots__ = ("aborted",)
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    aborted: int
    def __init__(self, aborted: _Optional[int] = ...) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResumeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPauseStateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPauseStateResponse(_message.Message):
    __slots__ = ("paused", "mode")
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    paused: bool
    mode: PauseMode
    def __init__(self, paused: _Optional[bool] = ..., mode: _Optional[_Union[PauseMode, str]] = ...) -> None: ...

class SleepRequest(_message.Message):
    __slots__ = ("level", "mode")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    level: int
    mode: PauseMode
    def __init__(self, level: _Optional[int] = ..., mode: _Optional[_Union[PauseMode, str]] = ...) -> None: ...

class SleepResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WakeUpRequest(_message.Message):
    __slots__ = ("tags",)
    TAGS_FIELD_NUMBER: _ClassVar[int]
    tags: _containers.RepeatedScalarFieldContainer[SleepTag]
    def __init__(self, tags: _Optional[_Iterable[_Union[SleepTag, str]]] = ...) -> None: ...

class WakeUpResponse(_message.Message):
    __slots__ = ("awake",)
    AWAKE_FIELD_NUMBER: _ClassVar[int]
    awake: bool
    def __init__(self, awake: _Optional[bool] = ...) -> None: ...

class GetSleepStateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSleepStateResponse(_message.Message):
    __slots__ = ("sleeping", "level", "asleep")
    SLEEPING_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    ASLEEP_FIELD_NUMBER: _ClassVar[int]
    sleeping: bool
    level: int
    asleep: _containers.RepeatedScalarFieldContainer[SleepTag]
    def __init__(self, sleeping: _Optional[bool] = ..., level: _Optional[int] = ..., asleep: _Optional[_Iterable[_Union[SleepTag, str]]] = ...) -> None: ...

class InitWeightTransferRequest(_message.Message):
    __slots__ = ("master_address", "master_port", "rank", "world_size", "packed", "packed_buffer_size_bytes", "nccl_unique_id", "group_name", "group_backend")
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_PORT_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    PACKED_FIELD_NUMBER: _ClassVar[int]
    PACKED_BUFFER_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NCCL_UNIQUE_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    GROUP_BACKEND_FIELD_NUMBER: _ClassVar[int]
    master_address: str
    master_port: int
    rank: int
    world_size: int
    packed: bool
    packed_buffer_size_bytes: int
    nccl_unique_id: bytes
    group_name: str
    group_backend: str
    def __init__(self, master_address: _Optional[str] = ..., master_port: _Optional[int] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., packed: _Optional[bool] = ..., packed_buffer_size_bytes: _Optional[int] = ..., nccl_unique_id: _Optional[bytes] = ..., group_name: _Optional[str] = ..., group_backend: _Optional[str] = ...) -> None: ...

class InitWeightTransferResponse(_message.Message):
    __slots__ = ("backend",)
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    backend: str
    def __init__(self, backend: _Optional[str] = ...) -> None: ...

class StartWeightUpdateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StartWeightUpdateResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TensorShape(_message.Message):
    __slots__ = ("dims",)
    DIMS_FIELD_NUMBER: _ClassVar[int]
    dims: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dims: _Optional[_Iterable[int]] = ...) -> None: ...

class UpdateWeightsRequest(_message.Message):
    __slots__ = ("names", "dtypes", "shapes", "path", "ipc_handles_pickled", "tensor_sizes")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    DTYPES_FIELD_NUMBER: _ClassVar[int]
    SHAPES_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    IPC_HANDLES_PICKLED_FIELD_NUMBER: _ClassVar[int]
    TENSOR_SIZES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    dtypes: _containers.RepeatedScalarFieldContainer[str]
    shapes: _containers.RepeatedCompositeFieldContainer[TensorShape]
    path: str
    ipc_handles_pickled: bytes
    tensor_sizes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, names: _Optional[_Iterable[str]] = ..., dtypes: _Optional[_Iterable[str]] = ..., shapes: _Optional[_Iterable[_Union[TensorShape, _Mapping]]] = ..., path: _Optional[str] = ..., ipc_handles_pickled: _Optional[bytes] = ..., tensor_sizes: _Optional[_Iterable[int]] = ...) -> None: ...

class UpdateWeightsResponse(_message.Message):
    __slots__ = ("tensors",)
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    tensors: int
    def __init__(self, tensors: _Optional[int] = ...) -> None: ...

class FinishWeightUpdateRequest(_message.Message):
    __slots__ = ("weight_version",)
    WEIGHT_VERSION_FIELD_NUMBER: _ClassVar[int]
    weight_version: str
    def __init__(self, weight_version: _Optional[str] = ...) -> None: ...

class FinishWeightUpdateResponse(_message.Message):
    __slots__ = ("weight_version", "blocks_dropped")
    WEIGHT_VERSION_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    weight_version: str
    blocks_dropped: int
    def __init__(self, weight_version: _Optional[str] = ..., blocks_dropped: _Optional[int] = ...) -> None: ...

class SetWeightVersionRequest(_message.Message):
    __slots__ = ("weight_version",)
    WEIGHT_VERSION_FIELD_NUMBER: _ClassVar[int]
    weight_version: str
    def __init__(self, weight_version: _Optional[str] = ...) -> None: ...

class SetWeightVersionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWeightInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWeightInfoResponse(_message.Message):
    __slots__ = ("weight_version", "backend", "world_size", "group_name")
    WEIGHT_VERSION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    weight_version: str
    backend: str
    world_size: int
    group_name: str
    def __init__(self, weight_version: _Optional[str] = ..., backend: _Optional[str] = ..., world_size: _Optional[int] = ..., group_name: _Optional[str] = ...) -> None: ...

class ShutdownWeightTransferRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShutdownWeightTransferResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWeightChecksumsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWeightChecksumsResponse(_message.Message):
    __slots__ = ("checksums",)
    class ChecksumsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CHECKSUMS_FIELD_NUMBER: _ClassVar[int]
    checksums: _containers.ScalarMap[str, str]
    def __init__(self, checksums: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ZeroWeightsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ZeroWeightsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AbortRequestsRequest(_message.Message):
    __slots__ = ("request_ids",)
    REQUEST_IDS_FIELD_NUMBER: _ClassVar[int]
    request_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, request_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class AbortRequestsResponse(_message.Message):
    __slots__ = ("aborted",)
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    aborted: int
    def __init__(self, aborted: _Optional[int] = ...) -> None: ...

class ReleaseKvCacheRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReleaseKvCacheResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResetPrefixCacheRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResetPrefixCacheResponse(_message.Message):
    __slots__ = ("blocks_dropped",)
    BLOCKS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    blocks_dropped: int
    def __init__(self, blocks_dropped: _Optional[int] = ...) -> None: ...

class StartProfileRequest(_message.Message):
    __slots__ = ("prefix", "delay_steps", "max_steps", "activities", "with_stack", "record_shapes", "with_memory", "directory")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    DELAY_STEPS_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    ACTIVITIES_FIELD_NUMBER: _ClassVar[int]
    WITH_STACK_FIELD_NUMBER: _ClassVar[int]
    RECORD_SHAPES_FIELD_NUMBER: _ClassVar[int]
    WITH_MEMORY_FIELD_NUMBER: _ClassVar[int]
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    delay_steps: int
    max_steps: int
    activities: _containers.RepeatedScalarFieldContainer[ProfileActivity]
    with_stack: bool
    record_shapes: bool
    with_memory: bool
    directory: str
    def __init__(self, prefix: _Optional[str] = ..., delay_steps: _Optional[int] = ..., max_steps: _Optional[int] = ..., activities: _Optional[_Iterable[_Union[ProfileActivity, str]]] = ..., with_stack: _Optional[bool] = ..., record_shapes: _Optional[bool] = ..., with_memory: _Optional[bool] = ..., directory: _Optional[str] = ...) -> None: ...

class StartProfileResponse(_message.Message):
    __slots__ = ("trace_file",)
    TRACE_FILE_FIELD_NUMBER: _ClassVar[int]
    trace_file: str
    def __init__(self, trace_file: _Optional[str] = ...) -> None: ...

class StopProfileRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StopProfileResponse(_message.Message):
    __slots__ = ("trace_file", "steps")
    TRACE_FILE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    trace_file: str
    steps: int
    def __init__(self, trace_file: _Optional[str] = ..., steps: _Optional[int] = ...) -> None: ...
