from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from scaleout.v1 import common_pb2 as _common_pb2
from scaleout.v1 import derender_pb2 as _derender_pb2
from scaleout.v1 import engine_pb2 as _engine_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RenderChatRequest(_message.Message):
    __slots__ = ("model", "messages", "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "add_generation_prompt", "continue_final_message", "add_special_tokens", "documents", "chat_template", "truncate_prompt_tokens", "truncation_side", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "repetition_penalty", "presence_penalty", "frequency_penalty", "logit_bias", "allowed_token_ids", "min_tokens", "ignore_eos", "n", "stop", "stop_token_ids", "include_stop_str_in_output", "skip_special_tokens", "spaces_between_special_tokens", "logprobs", "top_logprobs", "prompt_logprobs", "cache_salt", "priority", "kv_transfer_params", "request_id", "stream", "stream_options", "return_prompt_text", "return_token_offsets", "stream_interval", "echo", "response_format", "structured_outputs", "bad_words", "thinking_token_budget", "prompt_cache_key", "separate_reasoning", "stream_reasoning", "include_reasoning", "no_stop_trim", "return_hidden_states", "return_token_ids", "regex", "ebnf", "return_tokens_as_token_ids", "stop_regex", "logprob_token_ids", "prompt_token_ids")
    class LogitBiasEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: float
        def __init__(self, key: _Optional[int] = ..., value: _Optional[float] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    CHAT_TEMPLATE_KWARGS_FIELD_NUMBER: _ClassVar[int]
    ADD_GENERATION_PROMPT_FIELD_NUMBER: _ClassVar[int]
    CONTINUE_FINAL_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ADD_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    CHAT_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_SIDE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MIN_P_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    REPETITION_PENALTY_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    LOGIT_BIAS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    MIN_TOKENS_FIELD_NUMBER: _ClassVar[int]
    IGNORE_EOS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_STOP_STR_IN_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SKIP_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SPACES_BETWEEN_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    CACHE_SALT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSFER_PARAMS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    RETURN_PROMPT_TEXT_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKEN_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    STREAM_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    ECHO_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    BAD_WORDS_FIELD_NUMBER: _ClassVar[int]
    THINKING_TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_KEY_FIELD_NUMBER: _ClassVar[int]
    SEPARATE_REASONING_FIELD_NUMBER: _ClassVar[int]
    STREAM_REASONING_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_REASONING_FIELD_NUMBER: _ClassVar[int]
    NO_STOP_TRIM_FIELD_NUMBER: _ClassVar[int]
    RETURN_HIDDEN_STATES_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    EBNF_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKENS_AS_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    STOP_REGEX_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    model: str
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tool]
    tool_choice: _struct_pb2.Value
    parallel_tool_calls: bool
    chat_template_kwargs: _struct_pb2.Struct
    add_generation_prompt: bool
    continue_final_message: bool
    add_special_tokens: bool
    documents: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    chat_template: str
    truncate_prompt_tokens: int
    truncation_side: str
    max_tokens: int
    max_completion_tokens: int
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    seed: int
    repetition_penalty: float
    presence_penalty: float
    frequency_penalty: float
    logit_bias: _containers.ScalarMap[int, float]
    allowed_token_ids: _containers.RepeatedScalarFieldContainer[int]
    min_tokens: int
    ignore_eos: bool
    n: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    stop_token_ids: _containers.RepeatedScalarFieldContainer[int]
    include_stop_str_in_output: bool
    skip_special_tokens: bool
    spaces_between_special_tokens: bool
    logprobs: bool
    top_logprobs: int
    prompt_logprobs: int
    cache_salt: str
    priority: int
    kv_transfer_params: _struct_pb2.Struct
    request_id: str
    stream: bool
    stream_options: StreamOptions
    return_prompt_text: bool
    return_token_offsets: bool
    stream_interval: int
    echo: bool
    response_format: _struct_pb2.Value
    structured_outputs: StructuredOutputsParams
    bad_words: _containers.RepeatedScalarFieldContainer[str]
    thinking_token_budget: int
    prompt_cache_key: str
    separate_reasoning: bool
    stream_reasoning: bool
    include_reasoning: bool
    no_stop_trim: bool
    return_hidden_states: bool
    return_token_ids: bool
    regex: str
    ebnf: str
    return_tokens_as_token_ids: bool
    stop_regex: _containers.RepeatedScalarFieldContainer[str]
    logprob_token_ids: _containers.RepeatedScalarFieldContainer[int]
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, model: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_common_pb2.ChatMessage, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[_common_pb2.Tool, _Mapping]]] = ..., tool_choice: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., parallel_tool_calls: _Optional[bool] = ..., chat_template_kwargs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., add_generation_prompt: _Optional[bool] = ..., continue_final_message: _Optional[bool] = ..., add_special_tokens: _Optional[bool] = ..., documents: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., chat_template: _Optional[str] = ..., truncate_prompt_tokens: _Optional[int] = ..., truncation_side: _Optional[str] = ..., max_tokens: _Optional[int] = ..., max_completion_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[int] = ..., min_p: _Optional[float] = ..., seed: _Optional[int] = ..., repetition_penalty: _Optional[float] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., logit_bias: _Optional[_Mapping[int, float]] = ..., allowed_token_ids: _Optional[_Iterable[int]] = ..., min_tokens: _Optional[int] = ..., ignore_eos: _Optional[bool] = ..., n: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., stop_token_ids: _Optional[_Iterable[int]] = ..., include_stop_str_in_output: _Optional[bool] = ..., skip_special_tokens: _Optional[bool] = ..., spaces_between_special_tokens: _Optional[bool] = ..., logprobs: _Optional[bool] = ..., top_logprobs: _Optional[int] = ..., prompt_logprobs: _Optional[int] = ..., cache_salt: _Optional[str] = ..., priority: _Optional[int] = ..., kv_transfer_params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., request_id: _Optional[str] = ..., stream: _Optional[bool] = ..., stream_options: _Optional[_Union[StreamOptions, _Mapping]] = ..., return_prompt_text: _Optional[bool] = ..., return_token_offsets: _Optional[bool] = ..., stream_interval: _Optional[int] = ..., echo: _Optional[bool] = ..., response_format: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., structured_outputs: _Optional[_Union[StructuredOutputsParams, _Mapping]] = ..., bad_words: _Optional[_Iterable[str]] = ..., thinking_token_budget: _Optional[int] = ..., prompt_cache_key: _Optional[str] = ..., separate_reasoning: _Optional[bool] = ..., stream_reasoning: _Optional[bool] = ..., include_reasoning: _Optional[bool] = ..., no_stop_trim: _Optional[bool] = ..., return_hidden_states: _Optional[bool] = ..., return_token_ids: _Optional[bool] = ..., regex: _Optional[str] = ..., ebnf: _Optional[str] = ..., return_tokens_as_token_ids: _Optional[bool] = ..., stop_regex: _Optional[_Iterable[str]] = ..., logprob_token_ids: _Optional[_Iterable[int]] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class StreamOptions(_message.Message):
    __slots__ = ("include_usage", "continuous_usage_stats")
    INCLUDE_USAGE_FIELD_NUMBER: _ClassVar[int]
    CONTINUOUS_USAGE_STATS_FIELD_NUMBER: _ClassVar[int]
    include_usage: bool
    continuous_usage_stats: bool
    def __init__(self, include_usage: _Optional[bool] = ..., continuous_usage_stats: _Optional[bool] = ...) -> None: ...

class RenderChatResponse(_message.Message):
    __slots__ = ("generate_request", "derender_context", "prompt_text", "token_offsets")
    GENERATE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    DERENDER_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    generate_request: _engine_pb2.GenerateRequest
    derender_context: _derender_pb2.DerenderContext
    prompt_text: str
    token_offsets: _containers.RepeatedCompositeFieldContainer[TokenOffset]
    def __init__(self, generate_request: _Optional[_Union[_engine_pb2.GenerateRequest, _Mapping]] = ..., derender_context: _Optional[_Union[_derender_pb2.DerenderContext, _Mapping]] = ..., prompt_text: _Optional[str] = ..., token_offsets: _Optional[_Iterable[_Union[TokenOffset, _Mapping]]] = ...) -> None: ...

class CountMessageTokensResponse(_message.Message):
    __slots__ = ("input_tokens",)
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ...) -> None: ...

class CountResponseTokensResponse(_message.Message):
    __slots__ = ("object", "input_tokens")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    object: str
    input_tokens: int
    def __init__(self, object: _Optional[str] = ..., input_tokens: _Optional[int] = ...) -> None: ...

class TokenOffset(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class RenderChatBatchRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[RenderChatRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[RenderChatRequest, _Mapping]]] = ...) -> None: ...

class RenderChatBatchResponse(_message.Message):
    __slots__ = ("responses",)
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[RenderChatResponse]
    def __init__(self, responses: _Optional[_Iterable[_Union[RenderChatResponse, _Mapping]]] = ...) -> None: ...

class BridgeChatRequest(_message.Message):
    __slots__ = ("previous_prompt_token_ids", "completion_token_ids", "request", "prefix_hash")
    PREVIOUS_PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    PREFIX_HASH_FIELD_NUMBER: _ClassVar[int]
    previous_prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    completion_token_ids: _containers.RepeatedScalarFieldContainer[int]
    request: RenderChatRequest
    prefix_hash: str
    def __init__(self, previous_prompt_token_ids: _Optional[_Iterable[int]] = ..., completion_token_ids: _Optional[_Iterable[int]] = ..., request: _Optional[_Union[RenderChatRequest, _Mapping]] = ..., prefix_hash: _Optional[str] = ...) -> None: ...

class RenderCompletionRequest(_message.Message):
    __slots__ = ("model", "prompts", "prompt_token_ids", "add_special_tokens", "truncate_prompt_tokens", "truncation_side", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "repetition_penalty", "presence_penalty", "frequency_penalty", "logit_bias", "allowed_token_ids", "min_tokens", "ignore_eos", "n", "stop", "stop_token_ids", "include_stop_str_in_output", "skip_special_tokens", "spaces_between_special_tokens", "logprobs", "prompt_logprobs", "echo", "cache_salt", "priority", "kv_transfer_params", "request_id", "stream", "stream_options", "return_prompt_text", "return_token_offsets", "stream_interval", "suffix", "response_format", "structured_outputs", "bad_words", "no_stop_trim", "return_hidden_states", "return_token_ids", "regex", "ebnf", "json_schema", "return_tokens_as_token_ids", "stop_regex", "logprob_token_ids")
    class LogitBiasEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: float
        def __init__(self, key: _Optional[int] = ..., value: _Optional[float] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    ADD_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_SIDE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MIN_P_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    REPETITION_PENALTY_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    LOGIT_BIAS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    MIN_TOKENS_FIELD_NUMBER: _ClassVar[int]
    IGNORE_EOS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_STOP_STR_IN_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SKIP_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SPACES_BETWEEN_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    ECHO_FIELD_NUMBER: _ClassVar[int]
    CACHE_SALT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSFER_PARAMS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    RETURN_PROMPT_TEXT_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKEN_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    STREAM_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    SUFFIX_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    BAD_WORDS_FIELD_NUMBER: _ClassVar[int]
    NO_STOP_TRIM_FIELD_NUMBER: _ClassVar[int]
    RETURN_HIDDEN_STATES_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    EBNF_FIELD_NUMBER: _ClassVar[int]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKENS_AS_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    STOP_REGEX_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    model: str
    prompts: _containers.RepeatedScalarFieldContainer[str]
    prompt_token_ids: _containers.RepeatedCompositeFieldContainer[TokenIds]
    add_special_tokens: bool
    truncate_prompt_tokens: int
    truncation_side: str
    max_tokens: int
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    seed: int
    repetition_penalty: float
    presence_penalty: float
    frequency_penalty: float
    logit_bias: _containers.ScalarMap[int, float]
    allowed_token_ids: _containers.RepeatedScalarFieldContainer[int]
    min_tokens: int
    ignore_eos: bool
    n: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    stop_token_ids: _containers.RepeatedScalarFieldContainer[int]
    include_stop_str_in_output: bool
    skip_special_tokens: bool
    spaces_between_special_tokens: bool
    logprobs: int
    prompt_logprobs: int
    echo: bool
    cache_salt: str
    priority: int
    kv_transfer_params: _struct_pb2.Struct
    request_id: str
    stream: bool
    stream_options: StreamOptions
    return_prompt_text: bool
    return_token_offsets: bool
    stream_interval: int
    suffix: str
    response_format: _struct_pb2.Value
    structured_outputs: StructuredOutputsParams
    bad_words: _containers.RepeatedScalarFieldContainer[str]
    no_stop_trim: bool
    return_hidden_states: bool
    return_token_ids: bool
    regex: str
    ebnf: str
    json_schema: str
    return_tokens_as_token_ids: bool
    stop_regex: _containers.RepeatedScalarFieldContainer[str]
    logprob_token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, model: _Optional[str] = ..., prompts: _Optional[_Iterable[str]] = ..., prompt_token_ids: _Optional[_Iterable[_Union[TokenIds, _Mapping]]] = ..., add_special_tokens: _Optional[bool] = ..., truncate_prompt_tokens: _Optional[int] = ..., truncation_side: _Optional[str] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[int] = ..., min_p: _Optional[float] = ..., seed: _Optional[int] = ..., repetition_penalty: _Optional[float] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., logit_bias: _Optional[_Mapping[int, float]] = ..., allowed_token_ids: _Optional[_Iterable[int]] = ..., min_tokens: _Optional[int] = ..., ignore_eos: _Optional[bool] = ..., n: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., stop_token_ids: _Optional[_Iterable[int]] = ..., include_stop_str_in_output: _Optional[bool] = ..., skip_special_tokens: _Optional[bool] = ..., spaces_between_special_tokens: _Optional[bool] = ..., logprobs: _Optional[int] = ..., prompt_logprobs: _Optional[int] = ..., echo: _Optional[bool] = ..., cache_salt: _Optional[str] = ..., priority: _Optional[int] = ..., kv_transfer_params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., request_id: _Optional[str] = ..., stream: _Optional[bool] = ..., stream_options: _Optional[_Union[StreamOptions, _Mapping]] = ..., return_prompt_text: _Optional[bool] = ..., return_token_offsets: _Optional[bool] = ..., stream_interval: _Optional[int] = ..., suffix: _Optional[str] = ..., response_format: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., structured_outputs: _Optional[_Union[StructuredOutputsParams, _Mapping]] = ..., bad_words: _Optional[_Iterable[str]] = ..., no_stop_trim: _Optional[bool] = ..., return_hidden_states: _Optional[bool] = ..., return_token_ids: _Optional[bool] = ..., regex: _Optional[str] = ..., ebnf: _Optional[str] = ..., json_schema: _Optional[str] = ..., return_tokens_as_token_ids: _Optional[bool] = ..., stop_regex: _Optional[_Iterable[str]] = ..., logprob_token_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class StructuredOutputsParams(_message.Message):
    __slots__ = ("json", "regex", "choice", "grammar", "json_object", "disable_fallback", "disable_any_whitespace", "disable_additional_properties", "whitespace_pattern", "structural_tag")
    JSON_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    GRAMMAR_FIELD_NUMBER: _ClassVar[int]
    JSON_OBJECT_FIELD_NUMBER: _ClassVar[int]
    DISABLE_FALLBACK_FIELD_NUMBER: _ClassVar[int]
    DISABLE_ANY_WHITESPACE_FIELD_NUMBER: _ClassVar[int]
    DISABLE_ADDITIONAL_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    WHITESPACE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    STRUCTURAL_TAG_FIELD_NUMBER: _ClassVar[int]
    json: _struct_pb2.Value
    regex: str
    choice: _containers.RepeatedScalarFieldContainer[str]
    grammar: str
    json_object: bool
    disable_fallback: bool
    disable_any_whitespace: bool
    disable_additional_properties: bool
    whitespace_pattern: str
    structural_tag: str
    def __init__(self, json: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., regex: _Optional[str] = ..., choice: _Optional[_Iterable[str]] = ..., grammar: _Optional[str] = ..., json_object: _Optional[bool] = ..., disable_fallback: _Optional[bool] = ..., disable_any_whitespace: _Optional[bool] = ..., disable_additional_properties: _Optional[bool] = ..., whitespace_pattern: _Optional[str] = ..., structural_tag: _Optional[str] = ...) -> None: ...

class TokenIds(_message.Message):
    __slots__ = ("token_ids",)
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, token_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class RenderCompletionResponse(_message.Message):
    __slots__ = ("prompts",)
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    prompts: _containers.RepeatedCompositeFieldContainer[RenderedCompletion]
    def __init__(self, prompts: _Optional[_Iterable[_Union[RenderedCompletion, _Mapping]]] = ...) -> None: ...

class RenderedCompletion(_message.Message):
    __slots__ = ("generate_request", "derender_context", "prompt_text", "token_offsets")
    GENERATE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    DERENDER_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    generate_request: _engine_pb2.GenerateRequest
    derender_context: _derender_pb2.DerenderContext
    prompt_text: str
    token_offsets: _containers.RepeatedCompositeFieldContainer[TokenOffset]
    def __init__(self, generate_request: _Optional[_Union[_engine_pb2.GenerateRequest, _Mapping]] = ..., derender_context: _Optional[_Union[_derender_pb2.DerenderContext, _Mapping]] = ..., prompt_text: _Optional[str] = ..., token_offsets: _Optional[_Iterable[_Union[TokenOffset, _Mapping]]] = ...) -> None: ...

class TokenizeRequest(_message.Message):
    __slots__ = ("model", "prompt", "messages", "add_special_tokens", "add_generation_prompt", "continue_final_message", "return_token_strs", "tools", "chat_template_kwargs", "return_token_offsets")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    ADD_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ADD_GENERATION_PROMPT_FIELD_NUMBER: _ClassVar[int]
    CONTINUE_FINAL_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKEN_STRS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    CHAT_TEMPLATE_KWARGS_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKEN_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    model: str
    prompt: str
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    add_special_tokens: bool
    add_generation_prompt: bool
    continue_final_message: bool
    return_token_strs: bool
    tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tool]
    chat_template_kwargs: _struct_pb2.Struct
    return_token_offsets: bool
    def __init__(self, model: _Optional[str] = ..., prompt: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_common_pb2.ChatMessage, _Mapping]]] = ..., add_special_tokens: _Optional[bool] = ..., add_generation_prompt: _Optional[bool] = ..., continue_final_message: _Optional[bool] = ..., return_token_strs: _Optional[bool] = ..., tools: _Optional[_Iterable[_Union[_common_pb2.Tool, _Mapping]]] = ..., chat_template_kwargs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., return_token_offsets: _Optional[bool] = ...) -> None: ...

class TokenizeResponse(_message.Message):
    __slots__ = ("count", "max_model_len", "tokens", "token_strs", "token_offsets")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_LEN_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_STRS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    count: int
    max_model_len: int
    tokens: _containers.RepeatedScalarFieldContainer[int]
    token_strs: _containers.RepeatedScalarFieldContainer[str]
    token_offsets: _containers.RepeatedCompositeFieldContainer[TokenOffset]
    def __init__(self, count: _Optional[int] = ..., max_model_len: _Optional[int] = ..., tokens: _Optional[_Iterable[int]] = ..., token_strs: _Optional[_Iterable[str]] = ..., token_offsets: _Optional[_Iterable[_Union[TokenOffset, _Mapping]]] = ...) -> None: ...

class TokenizerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DetokenizeRequest(_message.Message):
    __slots__ = ("model", "tokens", "skip_special_tokens")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    SKIP_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    model: str
    tokens: _containers.RepeatedScalarFieldContainer[int]
    skip_special_tokens: bool
    def __init__(self, model: _Optional[str] = ..., tokens: _Optional[_Iterable[int]] = ..., skip_special_tokens: _Optional[bool] = ...) -> None: ...

class DetokenizeResponse(_message.Message):
    __slots__ = ("prompt",)
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    def __init__(self, prompt: _Optional[str] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ("limit", "after_id", "before_id")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_ID_FIELD_NUMBER: _ClassVar[int]
    limit: int
    after_id: str
    before_id: str
    def __init__(self, limit: _Optional[int] = ..., after_id: _Optional[str] = ..., before_id: _Optional[str] = ...) -> None: ...

class GetModelRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("object", "data", "has_more", "first_id", "last_id")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    FIRST_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    object: str
    data: _containers.RepeatedCompositeFieldContainer[ModelCard]
    has_more: bool
    first_id: str
    last_id: str
    def __init__(self, object: _Optional[str] = ..., data: _Optional[_Iterable[_Union[ModelCard, _Mapping]]] = ..., has_more: _Optional[bool] = ..., first_id: _Optional[str] = ..., last_id: _Optional[str] = ...) -> None: ...

class ModelCard(_message.Message):
    __slots__ = ("id", "object", "created", "owned_by", "root", "max_model_len", "tokenizer_fingerprint", "type", "display_name", "created_at", "parent")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    OWNED_BY_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_LEN_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    owned_by: str
    root: str
    max_model_len: int
    tokenizer_fingerprint: str
    type: str
    display_name: str
    created_at: str
    parent: str
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., owned_by: _Optional[str] = ..., root: _Optional[str] = ..., max_model_len: _Optional[int] = ..., tokenizer_fingerprint: _Optional[str] = ..., type: _Optional[str] = ..., display_name: _Optional[str] = ..., created_at: _Optional[str] = ..., parent: _Optional[str] = ...) -> None: ...

class RenderEmbeddingRequest(_message.Message):
    __slots__ = ("model", "inputs", "input_token_ids", "add_special_tokens", "truncate_prompt_tokens", "truncation_side", "dimensions", "use_activation", "priority", "request_id", "max_text_tokens", "pad_to_max_length")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    ADD_SPECIAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_SIDE_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    USE_ACTIVATION_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_TEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PAD_TO_MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    model: str
    inputs: _containers.RepeatedScalarFieldContainer[str]
    input_token_ids: _containers.RepeatedCompositeFieldContainer[TokenIds]
    add_special_tokens: bool
    truncate_prompt_tokens: int
    truncation_side: str
    dimensions: int
    use_activation: bool
    priority: int
    request_id: str
    max_text_tokens: int
    pad_to_max_length: bool
    def __init__(self, model: _Optional[str] = ..., inputs: _Optional[_Iterable[str]] = ..., input_token_ids: _Optional[_Iterable[_Union[TokenIds, _Mapping]]] = ..., add_special_tokens: _Optional[bool] = ..., truncate_prompt_tokens: _Optional[int] = ..., truncation_side: _Optional[str] = ..., dimensions: _Optional[int] = ..., use_activation: _Optional[bool] = ..., priority: _Optional[int] = ..., request_id: _Optional[str] = ..., max_text_tokens: _Optional[int] = ..., pad_to_max_length: _Optional[bool] = ...) -> None: ...

class RenderEmbeddingResponse(_message.Message):
    __slots__ = ("embed_request",)
    EMBED_REQUEST_FIELD_NUMBER: _ClassVar[int]
    embed_request: _engine_pb2.EmbedRequest
    def __init__(self, embed_request: _Optional[_Union[_engine_pb2.EmbedRequest, _Mapping]] = ...) -> None: ...
