from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.rpc import status_pb2 as _status_pb2
from scaleout.v1 import common_pb2 as _common_pb2
from scaleout.v1 import engine_pb2 as _engine_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Endpoint(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENDPOINT_UNSPECIFIED: _ClassVar[Endpoint]
    ENDPOINT_CHAT: _ClassVar[Endpoint]
    ENDPOINT_COMPLETION: _ClassVar[Endpoint]

class ToolChoiceMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_CHOICE_MODE_UNSPECIFIED: _ClassVar[ToolChoiceMode]
    TOOL_CHOICE_MODE_NONE: _ClassVar[ToolChoiceMode]
    TOOL_CHOICE_MODE_AUTO: _ClassVar[ToolChoiceMode]
    TOOL_CHOICE_MODE_REQUIRED: _ClassVar[ToolChoiceMode]
    TOOL_CHOICE_MODE_NAMED: _ClassVar[ToolChoiceMode]

class ReasoningDelivery(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASONING_DELIVERY_UNSPECIFIED: _ClassVar[ReasoningDelivery]
    REASONING_DELIVERY_WHOLE: _ClassVar[ReasoningDelivery]
    REASONING_DELIVERY_OMITTED: _ClassVar[ReasoningDelivery]
ENDPOINT_UNSPECIFIED: Endpoint
ENDPOINT_CHAT: Endpoint
ENDPOINT_COMPLETION: Endpoint
TOOL_CHOICE_MODE_UNSPECIFIED: ToolChoiceMode
TOOL_CHOICE_MODE_NONE: ToolChoiceMode
TOOL_CHOICE_MODE_AUTO: ToolChoiceMode
TOOL_CHOICE_MODE_REQUIRED: ToolChoiceMode
TOOL_CHOICE_MODE_NAMED: ToolChoiceMode
REASONING_DELIVERY_UNSPECIFIED: ReasoningDelivery
REASONING_DELIVERY_WHOLE: ReasoningDelivery
REASONING_DELIVERY_OMITTED: ReasoningDelivery

class CheckReasoningRequest(_message.Message):
    __slots__ = ("reasoning_parser", "reasoning_started", "token_ids", "tokenizer_fingerprint")
    REASONING_PARSER_FIELD_NUMBER: _ClassVar[int]
    REASONING_STARTED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    reasoning_parser: str
    reasoning_started: bool
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    tokenizer_fingerprint: str
    def __init__(self, reasoning_parser: _Optional[str] = ..., reasoning_started: _Optional[bool] = ..., token_ids: _Optional[_Iterable[int]] = ..., tokenizer_fingerprint: _Optional[str] = ...) -> None: ...

class CheckReasoningResponse(_message.Message):
    __slots__ = ("is_reasoning_end", "content_token_ids", "reasoning_tokens", "tokens")
    IS_REASONING_END_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    is_reasoning_end: bool
    content_token_ids: _containers.RepeatedScalarFieldContainer[int]
    reasoning_tokens: int
    tokens: _common_pb2.ReasoningTokens
    def __init__(self, is_reasoning_end: _Optional[bool] = ..., content_token_ids: _Optional[_Iterable[int]] = ..., reasoning_tokens: _Optional[int] = ..., tokens: _Optional[_Union[_common_pb2.ReasoningTokens, _Mapping]] = ...) -> None: ...

class DerenderContext(_message.Message):
    __slots__ = ("endpoint", "model", "id", "created", "tokenizer_fingerprint", "tools", "tool_choice", "tool_choice_function", "parallel_tool_calls", "skip_special_tokens", "spaces_between_special_tokens", "stop", "include_stop_str_in_output", "prompt_tail_token_ids", "reasoning_parser", "tool_parser", "reasoning_started", "chat_template_kwargs", "top_logprobs", "echo", "prompt_text", "num_prompt_tokens", "include_usage", "continuous_usage_stats", "prompt_index", "n", "prompt_token_ids", "reasoning_delivery", "return_token_ids", "return_tokens_as_token_ids", "prompt_logprobs", "stop_regex", "logprob_token_ids")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FUNCTION_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    SKIP_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SPACES_BETWEEN_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_STOP_STR_IN_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TAIL_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    REASONING_PARSER_FIELD_NUMBER: _ClassVar[int]
    TOOL_PARSER_FIELD_NUMBER: _ClassVar[int]
    REASONING_STARTED_FIELD_NUMBER: _ClassVar[int]
    CHAT_TEMPLATE_KWARGS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    ECHO_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEXT_FIELD_NUMBER: _ClassVar[int]
    NUM_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_USAGE_FIELD_NUMBER: _ClassVar[int]
    CONTINUOUS_USAGE_STATS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_INDEX_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    REASONING_DELIVERY_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKENS_AS_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    STOP_REGEX_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    endpoint: Endpoint
    model: str
    id: str
    created: int
    tokenizer_fingerprint: str
    tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tool]
    tool_choice: ToolChoiceMode
    tool_choice_function: str
    parallel_tool_calls: bool
    skip_special_tokens: bool
    spaces_between_special_tokens: bool
    stop: _containers.RepeatedScalarFieldContainer[str]
    include_stop_str_in_output: bool
    prompt_tail_token_ids: _containers.RepeatedScalarFieldContainer[int]
    reasoning_parser: str
    tool_parser: str
    reasoning_started: bool
    chat_template_kwargs: _struct_pb2.Struct
    top_logprobs: int
    echo: bool
    prompt_text: str
    num_prompt_tokens: int
    include_usage: bool
    continuous_usage_stats: bool
    prompt_index: int
    n: int
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    reasoning_delivery: ReasoningDelivery
    return_token_ids: bool
    return_tokens_as_token_ids: bool
    prompt_logprobs: int
    stop_regex: _containers.RepeatedScalarFieldContainer[str]
    logprob_token_ids: bool
    def __init__(self, endpoint: _Optional[_Union[Endpoint, str]] = ..., model: _Optional[str] = ..., id: _Optional[str] = ..., created: _Optional[int] = ..., tokenizer_fingerprint: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_common_pb2.Tool, _Mapping]]] = ..., tool_choice: _Optional[_Union[ToolChoiceMode, str]] = ..., tool_choice_function: _Optional[str] = ..., parallel_tool_calls: _Optional[bool] = ..., skip_special_tokens: _Optional[bool] = ..., spaces_between_special_tokens: _Optional[bool] = ..., stop: _Optional[_Iterable[str]] = ..., include_stop_str_in_output: _Optional[bool] = ..., prompt_tail_token_ids: _Optional[_Iterable[int]] = ..., reasoning_parser: _Optional[str] = ..., tool_parser: _Optional[str] = ..., reasoning_started: _Optional[bool] = ..., chat_template_kwargs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., top_logprobs: _Optional[int] = ..., echo: _Optional[bool] = ..., prompt_text: _Optional[str] = ..., num_prompt_tokens: _Optional[int] = ..., include_usage: _Optional[bool] = ..., continuous_usage_stats: _Optional[bool] = ..., prompt_index: _Optional[int] = ..., n: _Optional[int] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., reasoning_delivery: _Optional[_Union[ReasoningDelivery, str]] = ..., return_token_ids: _Optional[bool] = ..., return_tokens_as_token_ids: _Optional[bool] = ..., prompt_logprobs: _Optional[int] = ..., stop_regex: _Optional[_Iterable[str]] = ..., logprob_token_ids: _Optional[bool] = ...) -> None: ...

class DerenderChatRequest(_message.Message):
    __slots__ = ("context", "results")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    context: DerenderContext
    results: _containers.RepeatedCompositeFieldContainer[_engine_pb2.GenerateResponse]
    def __init__(self, context: _Optional[_Union[DerenderContext, _Mapping]] = ..., results: _Optional[_Iterable[_Union[_engine_pb2.GenerateResponse, _Mapping]]] = ...) -> None: ...

class DerenderCompletionRequest(_message.Message):
    __slots__ = ("prompts",)
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    prompts: _containers.RepeatedCompositeFieldContainer[CompletionResult]
    def __init__(self, prompts: _Optional[_Iterable[_Union[CompletionResult, _Mapping]]] = ...) -> None: ...

class CompletionResult(_message.Message):
    __slots__ = ("context", "results")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    context: DerenderContext
    results: _containers.RepeatedCompositeFieldContainer[_engine_pb2.GenerateResponse]
    def __init__(self, context: _Optional[_Union[DerenderContext, _Mapping]] = ..., results: _Optional[_Iterable[_Union[_engine_pb2.GenerateResponse, _Mapping]]] = ...) -> None: ...

class DerenderStreamRequest(_message.Message):
    __slots__ = ("context", "engine_output")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ENGINE_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    context: DerenderContext
    engine_output: _engine_pb2.GenerateResponse
    def __init__(self, context: _Optional[_Union[DerenderContext, _Mapping]] = ..., engine_output: _Optional[_Union[_engine_pb2.GenerateResponse, _Mapping]] = ...) -> None: ...

class DerenderStreamResponse(_message.Message):
    __slots__ = ("chat", "completion", "stop_generation")
    CHAT_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    STOP_GENERATION_FIELD_NUMBER: _ClassVar[int]
    chat: ChatCompletionChunk
    completion: Completion
    stop_generation: bool
    def __init__(self, chat: _Optional[_Union[ChatCompletionChunk, _Mapping]] = ..., completion: _Optional[_Union[Completion, _Mapping]] = ..., stop_generation: _Optional[bool] = ...) -> None: ...

class DerenderChunkRequest(_message.Message):
    __slots__ = ("context", "engine_output", "state")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ENGINE_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    context: DerenderContext
    engine_output: _engine_pb2.GenerateResponse
    state: bytes
    def __init__(self, context: _Optional[_Union[DerenderContext, _Mapping]] = ..., engine_output: _Optional[_Union[_engine_pb2.GenerateResponse, _Mapping]] = ..., state: _Optional[bytes] = ...) -> None: ...

class DerenderChunkResponse(_message.Message):
    __slots__ = ("chat", "completion", "stop_generation", "state")
    CHAT_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    STOP_GENERATION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    chat: ChatCompletionChunk
    completion: Completion
    stop_generation: bool
    state: bytes
    def __init__(self, chat: _Optional[_Union[ChatCompletionChunk, _Mapping]] = ..., completion: _Optional[_Union[Completion, _Mapping]] = ..., stop_generation: _Optional[bool] = ..., state: _Optional[bytes] = ...) -> None: ...

class ChatCompletion(_message.Message):
    __slots__ = ("id", "object", "created", "model", "choices", "usage", "prompt_token_ids", "prompt_logprobs")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    choices: _containers.RepeatedCompositeFieldContainer[ChatChoice]
    usage: _common_pb2.Usage
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    prompt_logprobs: _containers.RepeatedCompositeFieldContainer[PromptPositionLogprobs]
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[ChatChoice, _Mapping]]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., prompt_logprobs: _Optional[_Iterable[_Union[PromptPositionLogprobs, _Mapping]]] = ...) -> None: ...

class ChatChoice(_message.Message):
    __slots__ = ("index", "message", "logprobs", "finish_reason", "stop_token_id", "stop_str", "token_ids", "end_token_id")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    STOP_STR_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    END_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    index: int
    message: ChatCompletionMessage
    logprobs: ChatLogprobs
    finish_reason: str
    stop_token_id: int
    stop_str: str
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    end_token_id: int
    def __init__(self, index: _Optional[int] = ..., message: _Optional[_Union[ChatCompletionMessage, _Mapping]] = ..., logprobs: _Optional[_Union[ChatLogprobs, _Mapping]] = ..., finish_reason: _Optional[str] = ..., stop_token_id: _Optional[int] = ..., stop_str: _Optional[str] = ..., token_ids: _Optional[_Iterable[int]] = ..., end_token_id: _Optional[int] = ...) -> None: ...

class ChatCompletionMessage(_message.Message):
    __slots__ = ("role", "content", "reasoning_content", "tool_calls", "reasoning")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    REASONING_CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    reasoning_content: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolCall]
    reasoning: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., reasoning_content: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[_common_pb2.ToolCall, _Mapping]]] = ..., reasoning: _Optional[str] = ...) -> None: ...

class ChatLogprobs(_message.Message):
    __slots__ = ("content",)
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    content: _containers.RepeatedCompositeFieldContainer[ChatLogprob]
    def __init__(self, content: _Optional[_Iterable[_Union[ChatLogprob, _Mapping]]] = ...) -> None: ...

class ChatLogprob(_message.Message):
    __slots__ = ("token", "logprob", "bytes", "top_logprobs")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    token: str
    logprob: float
    bytes: _containers.RepeatedScalarFieldContainer[int]
    top_logprobs: _containers.RepeatedCompositeFieldContainer[ChatTopLogprob]
    def __init__(self, token: _Optional[str] = ..., logprob: _Optional[float] = ..., bytes: _Optional[_Iterable[int]] = ..., top_logprobs: _Optional[_Iterable[_Union[ChatTopLogprob, _Mapping]]] = ...) -> None: ...

class ChatTopLogprob(_message.Message):
    __slots__ = ("token", "logprob", "bytes")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    token: str
    logprob: float
    bytes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, token: _Optional[str] = ..., logprob: _Optional[float] = ..., bytes: _Optional[_Iterable[int]] = ...) -> None: ...

class ChatCompletionChunk(_message.Message):
    __slots__ = ("id", "object", "created", "model", "choices", "usage", "error", "prompt_token_ids")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    choices: _containers.RepeatedCompositeFieldContainer[ChatChunkChoice]
    usage: _common_pb2.Usage
    error: _status_pb2.Status
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[ChatChunkChoice, _Mapping]]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class ChatChunkChoice(_message.Message):
    __slots__ = ("index", "delta", "logprobs", "finish_reason", "stop_token_id", "stop_str", "token_ids", "end_token_id")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    STOP_STR_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    END_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    index: int
    delta: ChatDelta
    logprobs: ChatLogprobs
    finish_reason: str
    stop_token_id: int
    stop_str: str
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    end_token_id: int
    def __init__(self, index: _Optional[int] = ..., delta: _Optional[_Union[ChatDelta, _Mapping]] = ..., logprobs: _Optional[_Union[ChatLogprobs, _Mapping]] = ..., finish_reason: _Optional[str] = ..., stop_token_id: _Optional[int] = ..., stop_str: _Optional[str] = ..., token_ids: _Optional[_Iterable[int]] = ..., end_token_id: _Optional[int] = ...) -> None: ...

class ChatDelta(_message.Message):
    __slots__ = ("role", "content", "reasoning_content", "tool_calls", "reasoning")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    REASONING_CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    reasoning_content: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolCall]
    reasoning: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., reasoning_content: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[_common_pb2.ToolCall, _Mapping]]] = ..., reasoning: _Optional[str] = ...) -> None: ...

class Completion(_message.Message):
    __slots__ = ("id", "object", "created", "model", "choices", "usage", "error")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    choices: _containers.RepeatedCompositeFieldContainer[CompletionChoice]
    usage: _common_pb2.Usage
    error: _status_pb2.Status
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[CompletionChoice, _Mapping]]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class CompletionChoice(_message.Message):
    __slots__ = ("index", "text", "logprobs", "finish_reason", "stop_token_id", "stop_str", "reasoning_content", "prompt_token_ids", "token_ids", "end_token_id", "prompt_logprobs")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    STOP_STR_FIELD_NUMBER: _ClassVar[int]
    REASONING_CONTENT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    END_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    index: int
    text: str
    logprobs: CompletionLogprobs
    finish_reason: str
    stop_token_id: int
    stop_str: str
    reasoning_content: str
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    end_token_id: int
    prompt_logprobs: _containers.RepeatedCompositeFieldContainer[PromptPositionLogprobs]
    def __init__(self, index: _Optional[int] = ..., text: _Optional[str] = ..., logprobs: _Optional[_Union[CompletionLogprobs, _Mapping]] = ..., finish_reason: _Optional[str] = ..., stop_token_id: _Optional[int] = ..., stop_str: _Optional[str] = ..., reasoning_content: _Optional[str] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., token_ids: _Optional[_Iterable[int]] = ..., end_token_id: _Optional[int] = ..., prompt_logprobs: _Optional[_Iterable[_Union[PromptPositionLogprobs, _Mapping]]] = ...) -> None: ...

class PromptPositionLogprobs(_message.Message):
    __slots__ = ("token_ids", "logprobs", "ranks", "decoded_tokens")
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    DECODED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    ranks: _containers.RepeatedScalarFieldContainer[int]
    decoded_tokens: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, token_ids: _Optional[_Iterable[int]] = ..., logprobs: _Optional[_Iterable[float]] = ..., ranks: _Optional[_Iterable[int]] = ..., decoded_tokens: _Optional[_Iterable[str]] = ...) -> None: ...

class CompletionLogprobs(_message.Message):
    __slots__ = ("tokens", "token_logprobs", "top_logprobs", "text_offset", "unscored_tokens")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    UNSCORED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedScalarFieldContainer[str]
    token_logprobs: _containers.RepeatedScalarFieldContainer[float]
    top_logprobs: _containers.RepeatedCompositeFieldContainer[CompletionTopLogprobs]
    text_offset: _containers.RepeatedScalarFieldContainer[int]
    unscored_tokens: int
    def __init__(self, tokens: _Optional[_Iterable[str]] = ..., token_logprobs: _Optional[_Iterable[float]] = ..., top_logprobs: _Optional[_Iterable[_Union[CompletionTopLogprobs, _Mapping]]] = ..., text_offset: _Optional[_Iterable[int]] = ..., unscored_tokens: _Optional[int] = ...) -> None: ...

class CompletionTopLogprobs(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[ChatTopLogprob]
    def __init__(self, entries: _Optional[_Iterable[_Union[ChatTopLogprob, _Mapping]]] = ...) -> None: ...
