"""OpenAI's error object, `{"error": {"message", "type", "param", "code"}}`, from a typed error.

One owner for the shape every REST error takes: the pipeline writes it for in-band stream errors, and the
gateway's Lua filter (gateway/openai_errors.lua, its `type` tables rendered from `TYPES` and `ANTHROPIC_TYPES`)
writes it for every error status. `code` is the stable ErrorInfo reason; `param` the first field violation.
Under `ANTHROPIC_PATH_PREFIX` (Anthropic's Messages API and its render route) the same object is wrapped as
Anthropic's `{"type": "error", "error": {...}}`, its `type` named as Anthropic names error types, and a reason
Anthropic's SDKs act on carries their `error.details.error_code` (`ANTHROPIC_ERROR_CODES`: `thread_not_found`
makes a message thread replay the whole conversation under a new thread). On SGLang's weight routes
(`SGLANG_OUTCOME_PATHS`) the object also carries SGLang's `{"success": false, "message"}`. On vLLM's scale-out
routes and its pooling routes beyond OpenAI's (`VLLM_PATHS`) it is vLLM's ErrorResponse: `code` the HTTP status as
an integer, `type` vLLM's name for it (`VLLM_TYPES`); the stable reason stays in `details` (the status details, as
on every route).
"""

from __future__ import annotations

import json
from http import HTTPStatus

from scaleout_common.errors import ServiceError
from scaleout_common.reasons import HTTP_STATUS, Reason

# HTTP status -> OpenAI's error `type`; other 4xx (404 too: OpenAI's unknown model or path) are
# invalid_request_error, 5xx server_error.
TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    409: "conflict_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}

# Anthropic's error `type` per HTTP status; other 4xx are invalid_request_error, 5xx api_error.
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
ANTHROPIC_PATH_PREFIX = "/v1/messages"
# Reason -> Anthropic's `error.details.error_code`, which its SDKs recover by (anthropic/lib/threads/).
ANTHROPIC_ERROR_CODES = {Reason.THREAD_NOT_FOUND.value: "thread_not_found"}
# SGLang's weight routes answer a failure `{"success": false, "message"}` (its http_server.py): on these paths the
# error object carries those two keys too (`message` the error's).
SGLANG_OUTCOME_PATHS = (
    "/update_weights_from_disk",
    "/init_weights_update_group",
    "/update_weights_from_distributed",
    "/destroy_weights_update_group",
    "/update_weights_from_tensor",
)

# vLLM's scale-out routes (render, derender, token-in token-out; vllm/entrypoints/scale_out/) and its pooling routes
# beyond OpenAI's (score, rerank, pooling, Cohere's embed; vllm/entrypoints/pooling/) and its label reads
# (generative scoring, structured decisions; vllm/entrypoints/generate/), whose errors are vLLM's
# ErrorResponse; `/v1/messages/render` among them, not under Anthropic's error shape.
VLLM_PATHS = (
    "/v1/chat/completions/render",
    "/v1/completions/render",
    "/v1/messages/render",
    "/v1/responses/render",
    "/v1/chat/completions/derender",
    "/v1/completions/derender",
    "/inference/v1/generate",
    "/inference/v1/abort_requests",
    "/score",
    "/v1/score",
    "/rerank",
    "/v1/rerank",
    "/v2/rerank",
    "/pooling",
    "/v2/embed",
    "/generative_scoring",
    "/v1/systemone",
)
# HTTP status -> vLLM's error `type` (its create_error_response names; a status it raises as an HTTPException
# is named by its phrase, as vLLM's handler names it).
VLLM_TYPES = {status.value: status.phrase for status in HTTPStatus if status.value >= 400} | {
    400: "BadRequestError",
    404: "NotFoundError",
    422: "UnprocessableEntityError",
    500: "InternalServerError",
    501: "NotImplementedError",
    503: "ServiceUnavailableError",
}


def error_type(http: int) -> str:
    return TYPES.get(http, "server_error" if http >= 500 else "invalid_request_error")


def error_object(failure: ServiceError) -> dict:
    http = HTTP_STATUS.get(failure.code, 500)
    param = failure.violations[0][0] if failure.violations else None
    return {"error": {"message": failure.message, "type": error_type(http), "param": param, "code": failure.reason}}


def vllm_error_object(failure: ServiceError) -> dict:
    """vLLM's ErrorResponse: `code` the HTTP status, `type` vLLM's name for it (the reason: the caller's details)."""
    http = HTTP_STATUS.get(failure.code, 500)
    shaped = error_object(failure)
    shaped["error"] |= {"type": VLLM_TYPES.get(http, "InternalServerError"), "code": http}
    return shaped


def anthropic_error_type(http: int) -> str:
    return ANTHROPIC_TYPES.get(http, "api_error" if http >= 500 else "invalid_request_error")


def anthropic_error_object(failure: ServiceError) -> dict:
    """Anthropic's `{"type": "error", "error": {"type", "message", ...}}`, keeping `param` and `code`."""
    inner = error_object(failure)["error"]
    inner["type"] = anthropic_error_type(HTTP_STATUS.get(failure.code, 500))
    if failure.reason in ANTHROPIC_ERROR_CODES:
        inner["details"] = {"error_code": ANTHROPIC_ERROR_CODES[failure.reason]}
    return {"type": "error", "error": inner}


def lua_table(table: dict[int, str] | dict[str, str] | dict[str, bool] = TYPES) -> str:
    """A status -> type (or reason -> error code) table as a Lua table literal, for the gateway's filter."""
    return "{" + ", ".join(f"[{json.dumps(key)}] = {json.dumps(value)}" for key, value in sorted(table.items())) + "}"
