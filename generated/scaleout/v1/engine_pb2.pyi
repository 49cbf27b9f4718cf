from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.rpc import status_pb2 as _status_pb2
from scaleout.v1 import common_pb2 as _common_pb2
from scaleout.v1 import kv_transfer_pb2 as _kv_transfer_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GenerateRequest(_message.Message):
    __slots__ = ("request_id", "token_ids", "sampling_params", "n", "model", "tokenizer_fingerprint", "stream_interval", "cache_salt", "priority", "kv_transfer_params", "prefix_hash", "kv_transfer", "lora_name")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_PARAMS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    STREAM_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    CACHE_SALT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSFER_PARAMS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_HASH_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSFER_FIELD_NUMBER: _ClassVar[int]
    LORA_NAME_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    sampling_params: _common_pb2.SamplingParams
    n: int
    model: str
    tokenizer_fingerprint: str
    stream_interval: int
    cache_salt: str
    priority: int
    kv_transfer_params: _struct_pb2.Struct
    prefix_hash: str
    kv_transfer: _kv_transfer_pb2.KvTransfer
    lora_name: str
    def __init__(self, request_id: _Optional[str] = ..., token_ids: _Optional[_Iterable[int]] = ..., sampling_params: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ..., n: _Optional[int] = ..., model: _Optional[str] = ..., tokenizer_fingerprint: _Optional[str] = ..., stream_interval: _Optional[int] = ..., cache_salt: _Optional[str] = ..., priority: _Optional[int] = ..., kv_transfer_params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., prefix_hash: _Optional[str] = ..., kv_transfer: _Optional[_Union[_kv_transfer_pb2.KvTransfer, _Mapping]] = ..., lora_name: _Optional[str] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("request_id", "choices", "prompt", "usage", "finished", "error", "weight_version", "kv_handoff", "kv_transfer_params", "timings")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_VERSION_FIELD_NUMBER: _ClassVar[int]
    KV_HANDOFF_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSFER_PARAMS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    choices: _containers.RepeatedCompositeFieldContainer[GenerateChoice]
    prompt: PromptInfo
    usage: _common_pb2.Usage
    finished: bool
    error: _status_pb2.Status
    weight_version: str
    kv_handoff: _kv_transfer_pb2.KvHandoff
    kv_transfer_params: _struct_pb2.Struct
    timings: RequestTimings
    def __init__(self, request_id: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[GenerateChoice, _Mapping]]] = ..., prompt: _Optional[_Union[PromptInfo, _Mapping]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ..., finished: _Optional[bool] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ..., weight_version: _Optional[str] = ..., kv_handoff: _Optional[_Union[_kv_transfer_pb2.KvHandoff, _Mapping]] = ..., kv_transfer_params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., timings: _Optional[_Union[RequestTimings, _Mapping]] = ...) -> None: ...

class RequestTimings(_message.Message):
    __slots__ = ("queue_seconds", "prefill_seconds", "decode_seconds")
    QUEUE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PREFILL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DECODE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    queue_seconds: float
    prefill_seconds: float
    decode_seconds: float
    def __init__(self, queue_seconds: _Optional[float] = ..., prefill_seconds: _Optional[float] = ..., decode_seconds: _Optional[float] = ...) -> None: ...

class GenerateChoice(_message.Message):
    __slots__ = ("index", "token_ids", "logprobs", "finish_reason", "stop_token_id", "stop_str", "speculation")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    STOP_STR_FIELD_NUMBER: _ClassVar[int]
    SPECULATION_FIELD_NUMBER: _ClassVar[int]
    index: int
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    logprobs: _common_pb2.TokenLogprobs
    finish_reason: _common_pb2.FinishReason
    stop_token_id: int
    stop_str: str
    speculation: SpeculationCounts
    def __init__(self, index: _Optional[int] = ..., token_ids: _Optional[_Iterable[int]] = ..., logprobs: _Optional[_Union[_common_pb2.TokenLogprobs, _Mapping]] = ..., finish_reason: _Optional[_Union[_common_pb2.FinishReason, str]] = ..., stop_token_id: _Optional[int] = ..., stop_str: _Optional[str] = ..., speculation: _Optional[_Union[SpeculationCounts, _Mapping]] = ...) -> None: ...

class SpeculationCounts(_message.Message):
    __slots__ = ("acceptance_histogram", "num_draft_tokens", "num_spec_tokens", "per_step_accepted", "per_step_drafted")
    ACCEPTANCE_HISTOGRAM_FIELD_NUMBER: _ClassVar[int]
    NUM_DRAFT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    NUM_SPEC_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PER_STEP_ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    PER_STEP_DRAFTED_FIELD_NUMBER: _ClassVar[int]
    acceptance_histogram: _containers.RepeatedScalarFieldContainer[int]
    num_draft_tokens: int
    num_spec_tokens: int
    per_step_accepted: _containers.RepeatedScalarFieldContainer[int]
    per_step_drafted: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, acceptance_histogram: _Optional[_Iterable[int]] = ..., num_draft_tokens: _Optional[int] = ..., num_spec_tokens: _Optional[int] = ..., per_step_accepted: _Optional[_Iterable[int]] = ..., per_step_drafted: _Optional[_Iterable[int]] = ...) -> None: ...

class PromptInfo(_message.Message):
    __slots__ = ("num_tokens", "logprobs", "cached_tokens", "kv_transport", "token_id_logprobs")
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    num_tokens: int
    logprobs: _common_pb2.TokenLogprobs
    cached_tokens: int
    kv_transport: str
    token_id_logprobs: _containers.RepeatedCompositeFieldContainer[PromptTokenIdLogprobs]
    def __init__(self, num_tokens: _Optional[int] = ..., logprobs: _Optional[_Union[_common_pb2.TokenLogprobs, _Mapping]] = ..., cached_tokens: _Optional[int] = ..., kv_transport: _Optional[str] = ..., token_id_logprobs: _Optional[_Iterable[_Union[PromptTokenIdLogprobs, _Mapping]]] = ...) -> None: ...

class PromptTokenIdLogprobs(_message.Message):
    __slots__ = ("logprobs",)
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, logprobs: _Optional[_Iterable[float]] = ...) -> None: ...

class AbortRequest(_message.Message):
    __slots__ = ("request_ids",)
    REQUEST_IDS_FIELD_NUMBER: _ClassVar[int]
    request_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, request_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class AbortResponse(_message.Message):
    __slots__ = ("aborted", "not_found")
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    aborted: _containers.RepeatedScalarFieldContainer[str]
    not_found: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, aborted: _Optional[_Iterable[str]] = ..., not_found: _Optional[_Iterable[str]] = ...) -> None: ...

class GetModelInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetModelInfoResponse(_message.Message):
    __slots__ = ("model", "vocab_size", "eos_token_ids", "max_model_len", "tokenizer_fingerprint", "architecture", "dtype", "device", "backend", "quantization", "kv_cache_dtype", "kv_block_size", "num_kv_blocks", "max_running", "logprobs_mode", "head_dtype", "weight_version", "kv_role", "kv_layout", "weight_transfer_backend", "speculative_config", "runner", "lora_config")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    EOS_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_LEN_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    ARCHITECTURE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    QUANTIZATION_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_DTYPE_FIELD_NUMBER: _ClassVar[int]
    KV_BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_KV_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_MODE_FIELD_NUMBER: _ClassVar[int]
    HEAD_DTYPE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_VERSION_FIELD_NUMBER: _ClassVar[int]
    KV_ROLE_FIELD_NUMBER: _ClassVar[int]
    KV_LAYOUT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_TRANSFER_BACKEND_FIELD_NUMBER: _ClassVar[int]
    SPECULATIVE_CONFIG_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    LORA_CONFIG_FIELD_NUMBER: _ClassVar[int]
    model: str
    vocab_size: int
    eos_token_ids: _containers.RepeatedScalarFieldContainer[int]
    max_model_len: int
    tokenizer_fingerprint: str
    architecture: str
    dtype: str
    device: str
    backend: str
    quantization: str
    kv_cache_dtype: str
    kv_block_size: int
    num_kv_blocks: int
    max_running: int
    logprobs_mode: str
    head_dtype: str
    weight_version: str
    kv_role: str
    kv_layout: _kv_transfer_pb2.KvLayout
    weight_transfer_backend: str
    speculative_config: SpeculativeConfig
    runner: str
    lora_config: LoraConfig
    def __init__(self, model: _Optional[str] = ..., vocab_size: _Optional[int] = ..., eos_token_ids: _Optional[_Iterable[int]] = ..., max_model_len: _Optional[int] = ..., tokenizer_fingerprint: _Optional[str] = ..., architecture: _Optional[str] = ..., dtype: _Optional[str] = ..., device: _Optional[str] = ..., backend: _Optional[str] = ..., quantization: _Optional[str] = ..., kv_cache_dtype: _Optional[str] = ..., kv_block_size: _Optional[int] = ..., num_kv_blocks: _Optional[int] = ..., max_running: _Optional[int] = ..., logprobs_mode: _Optional[str] = ..., head_dtype: _Optional[str] = ..., weight_version: _Optional[str] = ..., kv_role: _Optional[str] = ..., kv_layout: _Optional[_Union[_kv_transfer_pb2.KvLayout, _Mapping]] = ..., weight_transfer_backend: _Optional[str] = ..., speculative_config: _Optional[_Union[SpeculativeConfig, _Mapping]] = ..., runner: _Optional[str] = ..., lora_config: _Optional[_Union[LoraConfig, _Mapping]] = ...) -> None: ...

class LoraConfig(_message.Message):
    __slots__ = ("max_lora_rank", "max_loras", "max_cpu_loras")
    MAX_LORA_RANK_FIELD_NUMBER: _ClassVar[int]
    MAX_LORAS_FIELD_NUMBER: _ClassVar[int]
    MAX_CPU_LORAS_FIELD_NUMBER: _ClassVar[int]
    max_lora_rank: int
    max_loras: int
    max_cpu_loras: int
    def __init__(self, max_lora_rank: _Optional[int] = ..., max_loras: _Optional[int] = ..., max_cpu_loras: _Optional[int] = ...) -> None: ...

class SpeculativeConfig(_message.Message):
    __slots__ = ("method", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max", "model", "draft_sample_method")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NUM_SPECULATIVE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOOKUP_MIN_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOOKUP_MAX_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DRAFT_SAMPLE_METHOD_FIELD_NUMBER: _ClassVar[int]
    method: str
    num_speculative_tokens: int
    prompt_lookup_min: int
    prompt_lookup_max: int
    model: str
    draft_sample_method: str
    def __init__(self, method: _Optional[str] = ..., num_speculative_tokens: _Optional[int] = ..., prompt_lookup_min: _Optional[int] = ..., prompt_lookup_max: _Optional[int] = ..., model: _Optional[str] = ..., draft_sample_method: _Optional[str] = ...) -> None: ...

class GetLoadRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLoadResponse(_message.Message):
    __slots__ = ("running", "waiting", "kv_blocks_used", "kv_blocks_free", "kv_block_size", "max_running", "max_waiting", "prefix_caching", "kv_blocks_cached", "prefix_cache_queried_tokens", "prefix_cache_hit_tokens", "generated_tokens_per_s", "pending_prefill_tokens", "utilization", "prompt_tokens_computed", "prompt_tokens_transferred", "spec_decode_num_drafts", "spec_decode_num_draft_tokens", "spec_decode_num_accepted_tokens", "spec_decode_num_accepted_tokens_per_pos", "preemptions", "max_loras", "running_lora_adapters", "waiting_lora_adapters")
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    KV_BLOCKS_USED_FIELD_NUMBER: _ClassVar[int]
    KV_BLOCKS_FREE_FIELD_NUMBER: _ClassVar[int]
    KV_BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    MAX_WAITING_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CACHING_FIELD_NUMBER: _ClassVar[int]
    KV_BLOCKS_CACHED_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CACHE_QUERIED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CACHE_HIT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TOKENS_PER_S_FIELD_NUMBER: _ClassVar[int]
    PENDING_PREFILL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_COMPUTED_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_TRANSFERRED_FIELD_NUMBER: _ClassVar[int]
    SPEC_DECODE_NUM_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    SPEC_DECODE_NUM_DRAFT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SPEC_DECODE_NUM_ACCEPTED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_LORAS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_LORA_ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    WAITING_LORA_ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    running: int
    waiting: int
    kv_blocks_used: int
    kv_blocks_free: int
    kv_block_size: int
    max_running: int
    max_waiting: int
    prefix_caching: bool
    kv_blocks_cached: int
    prefix_cache_queried_tokens: int
    prefix_cache_hit_tokens: int
    generated_tokens_per_s: float
    pending_prefill_tokens: int
    utilization: float
    prompt_tokens_computed: int
    prompt_tokens_transferred: int
    spec_decode_num_drafts: int
    spec_decode_num_draft_tokens: int
    spec_decode_num_accepted_tokens: int
    spec_decode_num_accepted_tokens_per_pos: _containers.RepeatedScalarFieldContainer[int]
    preemptions: int
    max_loras: int
    running_lora_adapters: _containers.RepeatedScalarFieldContainer[str]
    waiting_lora_adapters: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, running: _Optional[int] = ..., waiting: _Optional[int] = ..., kv_blocks_used: _Optional[int] = ..., kv_blocks_free: _Optional[int] = ..., kv_block_size: _Optional[int] = ..., max_running: _Optional[int] = ..., max_waiting: _Optional[int] = ..., prefix_caching: _Optional[bool] = ..., kv_blocks_cached: _Optional[int] = ..., prefix_cache_queried_tokens: _Optional[int] = ..., prefix_cache_hit_tokens: _Optional[int] = ..., generated_tokens_per_s: _Optional[float] = ..., pending_prefill_tokens: _Optional[int] = ..., utilization: _Optional[float] = ..., prompt_tokens_computed: _Optional[int] = ..., prompt_tokens_transferred: _Optional[int] = ..., spec_decode_num_drafts: _Optional[int] = ..., spec_decode_num_draft_tokens: _Optional[int] = ..., spec_decode_num_accepted_tokens: _Optional[int] = ..., spec_decode_num_accepted_tokens_per_pos: _Optional[_Iterable[int]] = ..., preemptions: _Optional[int] = ..., max_loras: _Optional[int] = ..., running_lora_adapters: _Optional[_Iterable[str]] = ..., waiting_lora_adapters: _Optional[_Iterable[str]] = ...) -> None: ...

class GetMetricsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EmbedRequest(_message.Message):
    __slots__ = ("request_id", "inputs", "model", "tokenizer_fingerprint", "dimensions", "use_activation", "priority")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    USE_ACTIVATION_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    inputs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TokenSequence]
    model: str
    tokenizer_fingerprint: str
    dimensions: int
    use_activation: bool
    priority: int
    def __init__(self, request_id: _Optional[str] = ..., inputs: _Optional[_Iterable[_Union[_common_pb2.TokenSequence, _Mapping]]] = ..., model: _Optional[str] = ..., tokenizer_fingerprint: _Optional[str] = ..., dimensions: _Optional[int] = ..., use_activation: _Optional[bool] = ..., priority: _Optional[int] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("request_id", "embeddings", "prompt_tokens")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    embeddings: _containers.RepeatedCompositeFieldContainer[Embedding]
    prompt_tokens: int
    def __init__(self, request_id: _Optional[str] = ..., embeddings: _Optional[_Iterable[_Union[Embedding, _Mapping]]] = ..., prompt_tokens: _Optional[int] = ...) -> None: ...

class Embedding(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...
