from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubscribeKvEventsRequest(_message.Message):
    __slots__ = ("resume_from", "instance_id")
    RESUME_FROM_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    resume_from: int
    instance_id: str
    def __init__(self, resume_from: _Optional[int] = ..., instance_id: _Optional[str] = ...) -> None: ...

class KvEventBatch(_message.Message):
    __slots__ = ("sequence", "timestamp", "instance_id", "block_size", "snapshot", "events")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    timestamp: float
    instance_id: str
    block_size: int
    snapshot: bool
    events: _containers.RepeatedCompositeFieldContainer[KvEvent]
    def __init__(self, sequence: _Optional[int] = ..., timestamp: _Optional[float] = ..., instance_id: _Optional[str] = ..., block_size: _Optional[int] = ..., snapshot: _Optional[bool] = ..., events: _Optional[_Iterable[_Union[KvEvent, _Mapping]]] = ...) -> None: ...

class KvEvent(_message.Message):
    __slots__ = ("blocks_stored", "blocks_removed", "all_blocks_cleared")
    BLOCKS_STORED_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    ALL_BLOCKS_CLEARED_FIELD_NUMBER: _ClassVar[int]
    blocks_stored: BlocksStored
    blocks_removed: BlocksRemoved
    all_blocks_cleared: AllBlocksCleared
    def __init__(self, blocks_stored: _Optional[_Union[BlocksStored, _Mapping]] = ..., blocks_removed: _Optional[_Union[BlocksRemoved, _Mapping]] = ..., all_blocks_cleared: _Optional[_Union[AllBlocksCleared, _Mapping]] = ...) -> None: ...

class BlocksStored(_message.Message):
    __slots__ = ("block_hashes", "parent_block_hash", "token_ids", "cache_salt", "lora_id", "lora_name")
    BLOCK_HASHES_FIELD_NUMBER: _ClassVar[int]
    PARENT_BLOCK_HASH_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    CACHE_SALT_FIELD_NUMBER: _ClassVar[int]
    LORA_ID_FIELD_NUMBER: _ClassVar[int]
    LORA_NAME_FIELD_NUMBER: _ClassVar[int]
    block_hashes: _containers.RepeatedScalarFieldContainer[bytes]
    parent_block_hash: bytes
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    cache_salt: str
    lora_id: int
    lora_name: str
    def __init__(self, block_hashes: _Optional[_Iterable[bytes]] = ..., parent_block_hash: _Optional[bytes] = ..., token_ids: _Optional[_Iterable[int]] = ..., cache_salt: _Optional[str] = ..., lora_id: _Optional[int] = ..., lora_name: _Optional[str] = ...) -> None: ...

class BlocksRemoved(_message.Message):
    __slots__ = ("block_hashes",)
    BLOCK_HASHES_FIELD_NUMBER: _ClassVar[int]
    block_hashes: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, block_hashes: _Optional[_Iterable[bytes]] = ...) -> None: ...

class AllBlocksCleared(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetKvEventSourcesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetKvEventSourcesResponse(_message.Message):
    __slots__ = ("source",)
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    source: KvEventSource
    def __init__(self, source: _Optional[_Union[KvEventSource, _Mapping]] = ...) -> None: ...

class KvEventSource(_message.Message):
    __slots__ = ("enable_kv_cache_events", "publisher", "endpoint", "replay_endpoint", "buffer_steps", "hwm", "max_queue_size", "topic")
    ENABLE_KV_CACHE_EVENTS_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    REPLAY_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    BUFFER_STEPS_FIELD_NUMBER: _ClassVar[int]
    HWM_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_SIZE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    enable_kv_cache_events: bool
    publisher: str
    endpoint: str
    replay_endpoint: str
    buffer_steps: int
    hwm: int
    max_queue_size: int
    topic: str
    def __init__(self, enable_kv_cache_events: _Optional[bool] = ..., publisher: _Optional[str] = ..., endpoint: _Optional[str] = ..., replay_endpoint: _Optional[str] = ..., buffer_steps: _Optional[int] = ..., hwm: _Optional[int] = ..., max_queue_size: _Optional[int] = ..., topic: _Optional[str] = ...) -> None: ...
