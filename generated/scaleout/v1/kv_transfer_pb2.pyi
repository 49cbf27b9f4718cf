from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class KvTransfer(_message.Message):
    __slots__ = ("hand_off", "pull")
    HAND_OFF_FIELD_NUMBER: _ClassVar[int]
    PULL_FIELD_NUMBER: _ClassVar[int]
    hand_off: bool
    pull: KvHandoff
    def __init__(self, hand_off: _Optional[bool] = ..., pull: _Optional[_Union[KvHandoff, _Mapping]] = ...) -> None: ...

class KvHandoff(_message.Message):
    __slots__ = ("engine_id", "host", "port", "handoff_id", "block_ids", "num_tokens", "tp_size")
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    HANDOFF_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCK_IDS_FIELD_NUMBER: _ClassVar[int]
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TP_SIZE_FIELD_NUMBER: _ClassVar[int]
    engine_id: str
    host: str
    port: int
    handoff_id: str
    block_ids: _containers.RepeatedScalarFieldContainer[int]
    num_tokens: int
    tp_size: int
    def __init__(self, engine_id: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., handoff_id: _Optional[str] = ..., block_ids: _Optional[_Iterable[int]] = ..., num_tokens: _Optional[int] = ..., tp_size: _Optional[int] = ...) -> None: ...

class KvLayout(_message.Message):
    __slots__ = ("block_size", "dtype", "num_layers", "num_kv_heads", "head_dim", "fingerprint")
    BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_LAYERS_FIELD_NUMBER: _ClassVar[int]
    NUM_KV_HEADS_FIELD_NUMBER: _ClassVar[int]
    HEAD_DIM_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    block_size: int
    dtype: str
    num_layers: int
    num_kv_heads: int
    head_dim: int
    fingerprint: str
    def __init__(self, block_size: _Optional[int] = ..., dtype: _Optional[str] = ..., num_layers: _Optional[int] = ..., num_kv_heads: _Optional[int] = ..., head_dim: _Optional[int] = ..., fingerprint: _Optional[str] = ...) -> None: ...

class PullKvBlocksRequest(_message.Message):
    __slots__ = ("engine_id", "handoff_id", "block_ids", "layout", "token_ids", "cache_generation")
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    HANDOFF_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCK_IDS_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    CACHE_GENERATION_FIELD_NUMBER: _ClassVar[int]
    engine_id: str
    handoff_id: str
    block_ids: _containers.RepeatedScalarFieldContainer[int]
    layout: KvLayout
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    cache_generation: int
    def __init__(self, engine_id: _Optional[str] = ..., handoff_id: _Optional[str] = ..., block_ids: _Optional[_Iterable[int]] = ..., layout: _Optional[_Union[KvLayout, _Mapping]] = ..., token_ids: _Optional[_Iterable[int]] = ..., cache_generation: _Optional[int] = ...) -> None: ...

class KvDevice(_message.Message):
    __slots__ = ("host_id", "device_uuid", "process_id")
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_UUID_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    host_id: str
    device_uuid: str
    process_id: str
    def __init__(self, host_id: _Optional[str] = ..., device_uuid: _Optional[str] = ..., process_id: _Optional[str] = ...) -> None: ...

class ShareKvCacheRequest(_message.Message):
    __slots__ = ("engine_id", "layout", "device")
    ENGINE_ID_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    engine_id: str
    layout: KvLayout
    device: KvDevice
    def __init__(self, engine_id: _Optional[str] = ..., layout: _Optional[_Union[KvLayout, _Mapping]] = ..., device: _Optional[_Union[KvDevice, _Mapping]] = ...) -> None: ...

class ShareKvCacheResponse(_message.Message):
    __slots__ = ("device", "cache_generation", "layers")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    CACHE_GENERATION_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    device: KvDevice
    cache_generation: int
    layers: _containers.RepeatedCompositeFieldContainer[CudaIpcTensor]
    def __init__(self, device: _Optional[_Union[KvDevice, _Mapping]] = ..., cache_generation: _Optional[int] = ..., layers: _Optional[_Iterable[_Union[CudaIpcTensor, _Mapping]]] = ...) -> None: ...

class CudaIpcTensor(_message.Message):
    __slots__ = ("handle", "storage_size_bytes", "storage_offset_bytes", "ref_counter_handle", "ref_counter_offset", "event_handle", "event_sync_required", "shape", "stride", "offset")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    STORAGE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    STORAGE_OFFSET_BYTES_FIELD_NUMBER: _ClassVar[int]
    REF_COUNTER_HANDLE_FIELD_NUMBER: _ClassVar[int]
    REF_COUNTER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EVENT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    EVENT_SYNC_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    STRIDE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    handle: bytes
    storage_size_bytes: int
    storage_offset_bytes: int
    ref_counter_handle: bytes
    ref_counter_offset: int
    event_handle: bytes
    event_sync_required: bool
    shape: _containers.RepeatedScalarFieldContainer[int]
    stride: _containers.RepeatedScalarFieldContainer[int]
    offset: int
    def __init__(self, handle: _Optional[bytes] = ..., storage_size_bytes: _Optional[int] = ..., storage_offset_bytes: _Optional[int] = ..., ref_counter_handle: _Optional[bytes] = ..., ref_counter_offset: _Optional[int] = ..., event_handle: _Optional[bytes] = ..., event_sync_required: _Optional[bool] = ..., shape: _Optional[_Iterable[int]] = ..., stride: _Optional[_Iterable[int]] = ..., offset: _Optional[int] = ...) -> None: ...

class KvBlockChunk(_message.Message):
    __slots__ = ("first_block", "data")
    FIRST_BLOCK_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    first_block: int
    data: bytes
    def __init__(self, first_block: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...
