"""Every stable ErrorInfo reason of the product, with its gRPC code; the HTTP status follows from the code.

Clients switch on these strings (gRPC: `ErrorInfo.reason`; REST: `error.code`), so a reason is defined here
and nowhere else: services raise `fail(Reason.X, ...)`, and a test fails if a reason string is spelled out
in any other module. The same bad input gets the same reason on every route (render, engine, one hop).

HTTP statuses are the transcoder's mapping of the gRPC code (`HTTP_STATUS`): INVALID_ARGUMENT, OUT_OF_RANGE
and FAILED_PRECONDITION are 400, NOT_FOUND 404, ALREADY_EXISTS 409, RESOURCE_EXHAUSTED 429,
UNAVAILABLE 503, INTERNAL 500. `python -m scaleout_common.reasons` prints the table.
"""

from __future__ import annotations

from enum import StrEnum

import grpc

from scaleout_common.errors import ServiceError

C = grpc.StatusCode
HTTP_STATUS = {
    C.INVALID_ARGUMENT: 400,
    C.OUT_OF_RANGE: 400,
    C.FAILED_PRECONDITION: 400,
    C.UNAUTHENTICATED: 401,
    C.PERMISSION_DENIED: 403,
    C.NOT_FOUND: 404,
    C.ALREADY_EXISTS: 409,
    C.ABORTED: 409,
    C.RESOURCE_EXHAUSTED: 429,
    C.CANCELLED: 499,
    C.UNIMPLEMENTED: 501,
    C.UNAVAILABLE: 503,
    C.DEADLINE_EXCEEDED: 504,
}


class Reason(StrEnum):
    """A reason's value is its name; `code` is its gRPC status, `when` says when it is raised."""

    code: grpc.StatusCode
    when: str
    _http: int | None

    def __new__(cls, name: str, code: grpc.StatusCode, when: str, http: int | None = None) -> Reason:
        member = str.__new__(cls, name)
        member._value_ = name
        member.code, member.when, member._http = code, when, http
        return member

    @property
    def http(self) -> int:
        """The HTTP status: the code's, unless the gateway answers this reason itself with a more exact one."""
        return self._http or HTTP_STATUS.get(self.code, 500)

    # --- request shape (render, one hop) ------------------------------------------------------------------
    MODEL_NOT_FOUND = "MODEL_NOT_FOUND", C.NOT_FOUND, "`model` is set and is not a served model name"
    RESPONSE_NOT_FOUND = (
        "RESPONSE_NOT_FOUND",
        C.NOT_FOUND,
        "a Responses id no pipeline replica holds: never stored, deleted, evicted or expired",
    )
    RESPONSE_NOT_CANCELLABLE = (
        "RESPONSE_NOT_CANCELLABLE",
        C.FAILED_PRECONDITION,
        "cancelling a stored response that is not a background one",
    )
    RESPONSE_CANCELLED = (
        "RESPONSE_CANCELLED",
        C.CANCELLED,
        "in-band: a streamed background Response whose generation `POST /v1/responses/{id}/cancel` stopped",
    )
    RESPONSE_NOT_STREAMABLE = (
        "RESPONSE_NOT_STREAMABLE",
        C.FAILED_PRECONDITION,
        "`GET /v1/responses/{id}?stream=true` of a Response not created with `background` and `stream` both true,"
        " or whose events outgrew the response store",
    )
    STARTING_AFTER_OUT_OF_RANGE = (
        "STARTING_AFTER_OUT_OF_RANGE",
        C.OUT_OF_RANGE,
        "a resumed Responses stream's `starting_after` below 0 or past the last event the response sent so far",
    )
    TOO_MANY_BACKGROUND_RESPONSES = (
        "TOO_MANY_BACKGROUND_RESPONSES",
        C.RESOURCE_EXHAUSTED,
        "a `background: true` Response while its replica runs --max-background-responses already",
    )
    MISSING_MESSAGES = "MISSING_MESSAGES", C.INVALID_ARGUMENT, "a chat request without messages"
    INVALID_ROLE = "INVALID_ROLE", C.INVALID_ARGUMENT, "a role other than system/developer/user/assistant/tool"
    INVALID_CONTENT = "INVALID_CONTENT", C.INVALID_ARGUMENT, "content that is not a string, null or text parts"
    INVALID_TOOL = "INVALID_TOOL", C.INVALID_ARGUMENT, "a tool without a function name"
    INVALID_TOOL_CALL = "INVALID_TOOL_CALL", C.INVALID_ARGUMENT, "an assistant tool call without a function name"
    INVALID_TOOL_CHOICE = "INVALID_TOOL_CHOICE", C.INVALID_ARGUMENT, "unknown tool_choice, or one naming no tool"
    CONFLICTING_OPTIONS = "CONFLICTING_OPTIONS", C.INVALID_ARGUMENT, "two options that exclude each other"
    INVALID_REQUEST = "INVALID_REQUEST", C.INVALID_ARGUMENT, "a body that is not the documented JSON shape"
    INVALID_JSON = "INVALID_JSON", C.INVALID_ARGUMENT, "the gateway could not parse the body for its route"
    UNSUPPORTED_FIELD = "UNSUPPORTED_FIELD", C.INVALID_ARGUMENT, "a field this deployment does not honour"
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE", C.INVALID_ARGUMENT, "one conversation above --max-request-bytes"
    TOO_MANY_MESSAGES = "TOO_MANY_MESSAGES", C.INVALID_ARGUMENT, "more than --max-messages messages"
    TOO_MANY_REQUESTS = "TOO_MANY_REQUESTS", C.INVALID_ARGUMENT, "a batch larger than --max-batch-size"
    MISSING_PROMPT = "MISSING_PROMPT", C.INVALID_ARGUMENT, "a completion request without any prompt"
    EMPTY_PROMPT = "EMPTY_PROMPT", C.INVALID_ARGUMENT, "a prompt of zero tokens"
    MISSING_PREVIOUS_PROMPT = "MISSING_PREVIOUS_PROMPT", C.INVALID_ARGUMENT, "BridgeChat without the previous ids"
    INVALID_PREFIX_HASH = "INVALID_PREFIX_HASH", C.INVALID_ARGUMENT, "a prefix_hash that is not a key render makes"
    THREAD_NOT_FOUND = (
        "THREAD_NOT_FOUND",
        C.NOT_FOUND,
        'an Anthropic `thread` {"type": "continue"}: no thread is kept here, so the SDK replays the whole conversation',
    )
    # --- templates ----------------------------------------------------------------------------------------
    RESERVED_TEMPLATE_KWARG = "RESERVED_TEMPLATE_KWARG", C.INVALID_ARGUMENT, "chat_template_kwargs names a reserved one"
    CHAT_TEMPLATE_NOT_TRUSTED = (
        "CHAT_TEMPLATE_NOT_TRUSTED",
        C.FAILED_PRECONDITION,
        "a request chat_template without --trust-request-chat-template",
    )
    NO_CHAT_TEMPLATE = "NO_CHAT_TEMPLATE", C.FAILED_PRECONDITION, "the model has no chat template and none was given"
    TEMPLATE_ERROR = "TEMPLATE_ERROR", C.INVALID_ARGUMENT, "the template raised (raise_exception, syntax, sandbox)"
    TEMPLATE_TIMEOUT = "TEMPLATE_TIMEOUT", C.INVALID_ARGUMENT, "rendering took longer than --template-timeout-s"
    TEMPLATE_OUTPUT_TOO_LARGE = (
        "TEMPLATE_OUTPUT_TOO_LARGE",
        C.INVALID_ARGUMENT,
        "the template built more than --max-template-output-chars or --template-memory-mb",
    )
    TEMPLATE_NOT_BRIDGEABLE = (
        "TEMPLATE_NOT_BRIDGEABLE",
        C.FAILED_PRECONDITION,
        "the template cannot append turns without re-rendering history",
    )
    # --- lengths and sampling (render, engine and derender alike) ------------------------------------------
    PROMPT_TOO_LONG = "PROMPT_TOO_LONG", C.OUT_OF_RANGE, "the prompt leaves no room to generate"
    MAX_TOKENS_TOO_LARGE = "MAX_TOKENS_TOO_LARGE", C.OUT_OF_RANGE, "prompt + max_tokens exceeds the model length"
    TRUNCATE_PROMPT_TOKENS_INVALID = (
        "TRUNCATE_PROMPT_TOKENS_INVALID",
        C.OUT_OF_RANGE,
        "truncate_prompt_tokens < 1 (and not -1) or above the model length",
    )
    INVALID_TRUNCATION_SIDE = "INVALID_TRUNCATION_SIDE", C.INVALID_ARGUMENT, 'truncation_side not "left"/"right"'
    INVALID_SAMPLING_PARAM = (
        "INVALID_SAMPLING_PARAM",
        C.INVALID_ARGUMENT,
        "a sampling knob outside its bounds (scaleout_common.sampling_rules), NaN or infinite",
    )
    TOKEN_ID_OUT_OF_VOCAB = "TOKEN_ID_OUT_OF_VOCAB", C.INVALID_ARGUMENT, "a token id outside [0, vocab size)"
    TOKENIZER_MISMATCH = "TOKENIZER_MISMATCH", C.FAILED_PRECONDITION, "rendered for another tokenizer or template"
    # --- structured outputs (render and engine alike; scaleout_common.structured_output_rules) -------------
    INVALID_GRAMMAR = (
        "INVALID_GRAMMAR",
        C.INVALID_ARGUMENT,
        "a structured-output constraint that is malformed or does not compile (schema, regex, grammar, choice, tag)",
    )
    GRAMMAR_TOO_COMPLEX = (
        "GRAMMAR_TOO_COMPLEX",
        C.INVALID_ARGUMENT,
        "a constraint above --max-grammar-bytes, or one that did not compile within --grammar-compile-timeout-s",
    )
    STRUCTURED_OUTPUTS_UNAVAILABLE = (
        "STRUCTURED_OUTPUTS_UNAVAILABLE",
        C.FAILED_PRECONDITION,
        "a constraint sent to an engine that has no tokenizer (grammars need its vocabulary)",
    )
    # --- engine -------------------------------------------------------------------------------------------
    LORA_NOT_FOUND = (
        "LORA_NOT_FOUND",
        C.NOT_FOUND,
        "a request's lora_name (or an unload's lora_name) is not an adapter the engine serves",
    )
    LORA_REFUSED = (
        "LORA_REFUSED",
        C.INVALID_ARGUMENT,
        "a LoRA adapter the engine cannot serve (its message names the field or flag), or a load of a name taken",
    )
    MISSING_REQUEST_IDS = "MISSING_REQUEST_IDS", C.INVALID_ARGUMENT, "Abort without request ids"
    DUPLICATE_REQUEST_ID = "DUPLICATE_REQUEST_ID", C.ALREADY_EXISTS, "a request id that is already running"
    QUEUE_FULL = "QUEUE_FULL", C.RESOURCE_EXHAUSTED, "the engine's waiting queue is full"
    QUEUE_WAIT_OVER_BUDGET = (
        "QUEUE_WAIT_OVER_BUDGET",
        C.RESOURCE_EXHAUSTED,
        "the engine's estimated queue wait is over --max-queue-wait-s (Retry-After says when)",
    )
    ENGINE_STEP_FAILED = "ENGINE_STEP_FAILED", C.INTERNAL, "a model step raised (a bug or a device fault)"
    ENGINE_CORE_EXITED = "ENGINE_CORE_EXITED", C.UNAVAILABLE, "the engine core process exited"
    ENGINE_PAUSED = (
        "ENGINE_PAUSED",
        C.UNAVAILABLE,
        "a request to an engine paused (abort or wait mode) or asleep: EngineControlService.Resume / WakeUp",
    )
    WEIGHT_TRANSFER_STATE = (
        "WEIGHT_TRANSFER_STATE",
        C.FAILED_PRECONDITION,
        "a weight-transfer call out of order (update before init/start, sleep during an update, ...)",
    )
    WEIGHT_TRANSFER_UNAVAILABLE = (
        "WEIGHT_TRANSFER_UNAVAILABLE",
        C.FAILED_PRECONDITION,
        "a weight transfer this engine cannot take (ipc without CUDA, fp8 projections, another backend's fields)",
    )
    INVALID_WEIGHTS = (
        "INVALID_WEIGHTS",
        C.INVALID_ARGUMENT,
        "a tensor the model does not have, of another shape, or an unreadable weights folder",
    )
    WEIGHT_TRANSFER_FAILED = (
        "WEIGHT_TRANSFER_FAILED",
        C.UNAVAILABLE,
        "the trainer's process group failed (rendezvous timeout, peer gone): init again",
    )
    METRICS_OFF = "METRICS_OFF", C.FAILED_PRECONDITION, "GetMetrics on an engine started with --metrics-port -1"
    KV_EVENTS_OFF = "KV_EVENTS_OFF", C.FAILED_PRECONDITION, "SubscribeKvEvents on an engine started without --kv-events"
    PROFILER_OFF = "PROFILER_OFF", C.FAILED_PRECONDITION, "StartProfile on an engine started without --profiler-config"
    PROFILER_STATE = (
        "PROFILER_STATE",
        C.FAILED_PRECONDITION,
        "StartProfile while a trace runs, or StopProfile with none running",
    )
    KV_EVENTS_BEHIND = (
        "KV_EVENTS_BEHIND",
        C.RESOURCE_EXHAUSTED,
        "a KV-event subscriber that fell too far behind (kv_relay.QUEUE_BATCHES); it resumes from its last batch",
    )
    # --- disaggregated prefill and decode (engine_svc/serving/kv_transfer/) ---------------------------------
    INVALID_KV_TRANSFER = (
        "INVALID_KV_TRANSFER",
        C.INVALID_ARGUMENT,
        "kv_transfer_params not in vLLM's shape (an unknown key, a wrong type), both steps at once, or with n > 1",
    )
    KV_TRANSFER_UNAVAILABLE = (
        "KV_TRANSFER_UNAVAILABLE",
        C.FAILED_PRECONDITION,
        "a P/D step this engine does not take: its --kv-role, a runner without a paged cache, a core in a process, "
        "a model whose sliding-window layers keep KV blocks of their own",
    )
    KV_HANDOFF_EXPIRED = (
        "KV_HANDOFF_EXPIRED",
        C.NOT_FOUND,
        "the prefill engine keeps no such handoff: freed after --kv-handoff-timeout-s, pulled already, never made",
    )
    KV_HANDOFF_ENGINE_GONE = (
        "KV_HANDOFF_ENGINE_GONE",
        C.UNAVAILABLE,
        "the prefill engine a handoff names does not answer, or another process serves its address now",
    )
    KV_HANDOFF_MISMATCH = (
        "KV_HANDOFF_MISMATCH",
        C.FAILED_PRECONDITION,
        "the two engines' KV layouts differ (block size, dtype, shape, model fingerprint), or the prompts do",
    )
    KV_HANDOFF_NO_ROOM = (
        "KV_HANDOFF_NO_ROOM",
        C.RESOURCE_EXHAUSTED,
        "the decode engine has too few free KV blocks to take a pulled prompt's blocks",
    )
    KV_PULL_NO_MEMORY = (
        "KV_PULL_NO_MEMORY",
        C.RESOURCE_EXHAUSTED,
        "a device ran out of memory staging, reading or landing a pulled prompt's K/V (the handoff is spent: prefill again)",
    )
    KV_PULL_FAILED = (
        "KV_PULL_FAILED",
        C.UNAVAILABLE,
        "the device copy of a pulled prompt's K/V failed (a CUDA error; the decode engine's log has it)",
    )
    KV_CACHE_REMAPPED = (
        "KV_CACHE_REMAPPED",
        C.FAILED_PRECONDITION,
        "a device-to-device pull names a KV cache generation the prefill engine no longer has (re-allocated)",
    )
    NO_TOKENIZER_FILES = (
        "NO_TOKENIZER_FILES",
        C.FAILED_PRECONDITION,
        "GetTokenizer on an engine whose model was not loaded from a folder that holds a tokenizer",
    )
    RPC_NOT_SERVED = (
        "RPC_NOT_SERVED",
        C.UNIMPLEMENTED,
        "an RPC of a foreign protocol this engine does not serve (the vLLM face's Embed, profiler, KV events)",
    )
    # --- derender -----------------------------------------------------------------------------------------
    MISSING_CONTEXT = "MISSING_CONTEXT", C.INVALID_ARGUMENT, "a derender call without its context"
    DUPLICATE_CONTEXT = "DUPLICATE_CONTEXT", C.INVALID_ARGUMENT, "a stream message after the first with a context"
    INVALID_STATE = "INVALID_STATE", C.INVALID_ARGUMENT, "a stateless-derender state this service did not produce"
    STATE_TOO_LARGE = "STATE_TOO_LARGE", C.OUT_OF_RANGE, "a derender state above --max-state-bytes"
    TOO_MANY_CHOICES = (
        "TOO_MANY_CHOICES",
        C.OUT_OF_RANGE,
        "prompts x n above 128 (render, before any engine work), or n or a choice index above --max-choices",
    )
    TOO_MANY_TOKENS = (
        "TOO_MANY_TOKENS",
        C.OUT_OF_RANGE,
        "a choice above --max-tokens-per-choice, or a reported token count outside [0, --max-reported-tokens]",
    )
    TOO_MANY_STOP_STRINGS = "TOO_MANY_STOP_STRINGS", C.OUT_OF_RANGE, "more or longer stop strings than allowed"
    PROMPT_TAIL_TOO_LONG = "PROMPT_TAIL_TOO_LONG", C.OUT_OF_RANGE, "prompt_tail_token_ids above its limit"
    LOGPROBS_MISMATCH = "LOGPROBS_MISMATCH", C.INVALID_ARGUMENT, "logprob arrays not parallel to the token ids"
    INVALID_LOGPROB = "INVALID_LOGPROB", C.INVALID_ARGUMENT, "a logprob that is NaN or +infinity"
    UNKNOWN_PARSER = "UNKNOWN_PARSER", C.INVALID_ARGUMENT, "a reasoning or tool parser name that is not known"
    INVALID_ERROR_STATUS = (
        "INVALID_ERROR_STATUS",
        C.INVALID_ARGUMENT,
        "an engine message's in-band error whose code is OK or not a gRPC status code",
    )
    # --- capacity and lifecycle (every service) -----------------------------------------------------------
    RENDER_QUEUE_FULL = (
        "RENDER_QUEUE_FULL",
        C.RESOURCE_EXHAUSTED,
        "more than --max-pending-renders large renders, or --max-pending-templates request-template renders",
    )
    TOO_MANY_STREAMS = "TOO_MANY_STREAMS", C.RESOURCE_EXHAUSTED, "more open derender streams than --max-streams"
    NOT_READY = "NOT_READY", C.UNAVAILABLE, "the server is still loading"
    PATH_NOT_SERVED = (
        "PATH_NOT_SERVED",
        C.NOT_FOUND,
        "a path a service's HTTP port does not serve (render's --http-port: vLLM's two render routes)",
    )
    ROUTE_NOT_ENABLED = (
        "ROUTE_NOT_ENABLED",
        C.NOT_FOUND,
        "a route served only behind a flag that is off (render's /tokenizer_info: --enable-tokenizer-info-endpoint)",
    )
    DECISIONS_UNAVAILABLE = (
        "DECISIONS_UNAVAILABLE",
        C.UNIMPLEMENTED,
        "/v1/decisions on a model whose chat prompt does not take each option letter as one distinct token",
    )
    DRAINING = "DRAINING", C.UNAVAILABLE, "the server is shutting down; retry on another replica"
    INVALID_MESSAGE = "INVALID_MESSAGE", C.INVALID_ARGUMENT, "request bytes that do not parse as the method's message"
    INTERNAL_ERROR = "INTERNAL_ERROR", C.INTERNAL, "a bug: an exception escaped a servicer (the log has it by incident)"
    # A downstream status without a reason keeps its code and gets one of these three (errors.untyped_reason).
    UPSTREAM_UNAVAILABLE = (
        "UPSTREAM_UNAVAILABLE",
        C.UNAVAILABLE,
        "a downstream call failed UNAVAILABLE without a reason: no healthy replica, connection refused or reset",
    )
    UPSTREAM_TIMEOUT = "UPSTREAM_TIMEOUT", C.DEADLINE_EXCEEDED, "a downstream call ran past its deadline"
    UPSTREAM_ERROR = (
        "UPSTREAM_ERROR",
        C.UNKNOWN,
        "a downstream call failed with any other code and no reason (the status keeps its code)",
    )
    # A started stream whose downstream broke off without a reason ends in-band with this one (pipeline_svc/hops.py).
    UPSTREAM_LOST = (
        "UPSTREAM_LOST",
        C.UNAVAILABLE,
        "a stream's upstream broke off after it started (its replica died, the connection broke): in-band, retry",
    )
    # --- the gateway's own answers (gateway/envoy.yaml.j2) --------------------------------------------------
    REQUEST_BODY_TOO_LARGE = (
        "REQUEST_BODY_TOO_LARGE",
        C.RESOURCE_EXHAUSTED,
        "a REST body above the gateway's --max-body-mb (the services' message size)",
        413,
    )
    REQUEST_HEADERS_TOO_LARGE = (
        "REQUEST_HEADERS_TOO_LARGE",
        C.RESOURCE_EXHAUSTED,
        "request headers above the gateway's size or count limit",
        431,
    )
    INVALID_HTTP = (
        "INVALID_HTTP",
        C.INVALID_ARGUMENT,
        "HTTP the gateway refuses before any route (a header name with an underscore, an invalid header or framing); "
        "the message names Envoy's detail",
    )
    METHOD_NOT_ALLOWED = (
        "METHOD_NOT_ALLOWED",
        C.UNIMPLEMENTED,
        "an HTTP method a REST path does not take (GET on a POST route): Allow names the ones it does",
        405,
    )
    INVALID_API_KEY = "INVALID_API_KEY", C.UNAUTHENTICATED, "no API key, or one the gateway's keys file does not hold"
    IDENTITY_REQUIRED = (
        "IDENTITY_REQUIRED",
        C.UNAUTHENTICATED,
        "a call without the gateway's identity header to a service run with --require-identity (keys are on)",
    )
    NOT_PERMITTED = (
        "NOT_PERMITTED",
        C.PERMISSION_DENIED,
        "an admin RPC or a priority above the key's allowance, without an admin key",
    )
    RATE_LIMITED = "RATE_LIMITED", C.RESOURCE_EXHAUSTED, "an API key above its --rate-limit-rps (Retry-After says when)"
    # The gateway's own refusals are GATEWAY_<Envoy response flags>: GATEWAY_UH (no healthy replica),
    # GATEWAY_NR (no route), GATEWAY_UF (connection failure), ...
    GATEWAY_ERROR = "GATEWAY_ERROR", C.UNAVAILABLE, "the gateway refused: GATEWAY_ + Envoy's response flags"


def fail(reason: Reason, message: str, field: str | None = None, **metadata: str) -> ServiceError:
    """The typed error for `reason`, naming the offending field (a BadRequest violation) when there is one."""
    return ServiceError(reason.code, reason, message, [(field, message)] if field else [], metadata)


def table() -> str:
    rows = [f"| {r.value:<31}| {r.code.name:<20}| {r.http} | {r.when} |" for r in Reason]
    return "\n".join(["| reason | gRPC code | HTTP | when |", "|---|---|---|---|", *rows])


if __name__ == "__main__":
    print(table())
