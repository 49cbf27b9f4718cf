"""Stable ErrorInfo reasons of render_svc: clients (and the REST gateway) switch on these strings.

| reason                        | gRPC code           | HTTP | when                                                               |
|-------------------------------|---------------------|------|--------------------------------------------------------------------|
| MODEL_NOT_FOUND               | NOT_FOUND           | 404  | `model` is set and is not one of the served model names            |
| MISSING_MESSAGES              | INVALID_ARGUMENT    | 400  | a chat request without messages                                    |
| INVALID_ROLE                  | INVALID_ARGUMENT    | 400  | a role other than system/developer/user/assistant/tool             |
| INVALID_CONTENT               | INVALID_ARGUMENT    | 400  | content that is not a string, null or a list of text parts         |
| INVALID_TOOL                  | INVALID_ARGUMENT    | 400  | a tool without a function name                                     |
| INVALID_TOOL_CALL             | INVALID_ARGUMENT    | 400  | an assistant tool call without a name or with non-JSON arguments   |
| INVALID_TOOL_CHOICE           | INVALID_ARGUMENT    | 400  | unknown tool_choice, or required/named without (that) tool         |
| CONFLICTING_OPTIONS           | INVALID_ARGUMENT    | 400  | add_generation_prompt with continue_final_message, two prompt forms|
| RESERVED_TEMPLATE_KWARG       | INVALID_ARGUMENT    | 400  | chat_template_kwargs names a reserved variable (chat_template, ...)|
| CHAT_TEMPLATE_NOT_TRUSTED     | FAILED_PRECONDITION | 400  | a request chat_template without --trust-request-chat-template      |
| NO_CHAT_TEMPLATE              | FAILED_PRECONDITION | 400  | the model has no chat template and none was given                  |
| TEMPLATE_ERROR                | INVALID_ARGUMENT    | 400  | the template raised (raise_exception, bad syntax, sandbox refusal) |
| TEMPLATE_TIMEOUT              | INVALID_ARGUMENT    | 400  | rendering took longer than --template-timeout-s                    |
| TEMPLATE_OUTPUT_TOO_LARGE     | INVALID_ARGUMENT    | 400  | the template built more than --max-template-output-chars           |
| TOO_MANY_MESSAGES             | INVALID_ARGUMENT    | 400  | more than --max-messages messages                                  |
| TOO_MANY_REQUESTS             | INVALID_ARGUMENT    | 400  | a batch larger than --max-batch-size                               |
| REQUEST_TOO_LARGE             | INVALID_ARGUMENT    | 400  | a request (one conversation) larger than --max-request-bytes       |
| MISSING_PROMPT                | INVALID_ARGUMENT    | 400  | a completion request without any prompt                            |
| EMPTY_PROMPT                  | INVALID_ARGUMENT    | 400  | a prompt that renders to zero tokens                               |
| PROMPT_TOO_LONG               | OUT_OF_RANGE        | 400  | the prompt exceeds --max-prompt-tokens or leaves no room to generate|
| MAX_TOKENS_TOO_LARGE          | OUT_OF_RANGE        | 400  | prompt + max_tokens exceeds the model length                       |
| TRUNCATE_PROMPT_TOKENS_INVALID| OUT_OF_RANGE        | 400  | truncate_prompt_tokens < 1 (and not -1) or above the model length  |
| INVALID_TRUNCATION_SIDE       | INVALID_ARGUMENT    | 400  | truncation_side other than "left" / "right"                        |
| INVALID_SAMPLING_PARAM        | INVALID_ARGUMENT    | 400  | negative max_tokens, temperature < 0, top_p outside (0, 1], ...    |
| TOKEN_ID_OUT_OF_RANGE         | INVALID_ARGUMENT    | 400  | a token id outside the vocabulary (prompt, stop, bias, allowed ids)|
| UNSUPPORTED_FIELD             | INVALID_ARGUMENT    | 400  | a field render_svc does not implement (suffix, bridge offsets)     |
| MISSING_PREVIOUS_PROMPT       | INVALID_ARGUMENT    | 400  | BridgeChat without previous_prompt_token_ids                       |
| TEMPLATE_NOT_BRIDGEABLE       | FAILED_PRECONDITION | 400  | the template cannot append new turns without re-rendering history  |
| RENDER_QUEUE_FULL             | RESOURCE_EXHAUSTED  | 429  | more than --max-pending-renders large renders are waiting          |

Errors of one conversation in RenderChatBatch name it in the field path (`requests[3].messages`) and in
ErrorInfo metadata (`index`).
"""

from __future__ import annotations

import grpc

from scaleout_common.errors import ServiceError, failed_precondition, invalid_argument, out_of_range

MODEL_NOT_FOUND = "MODEL_NOT_FOUND"
MISSING_MESSAGES = "MISSING_MESSAGES"
INVALID_ROLE = "INVALID_ROLE"
INVALID_CONTENT = "INVALID_CONTENT"
INVALID_TOOL = "INVALID_TOOL"
INVALID_TOOL_CALL = "INVALID_TOOL_CALL"
INVALID_TOOL_CHOICE = "INVALID_TOOL_CHOICE"
CONFLICTING_OPTIONS = "CONFLICTING_OPTIONS"
RESERVED_TEMPLATE_KWARG = "RESERVED_TEMPLATE_KWARG"
CHAT_TEMPLATE_NOT_TRUSTED = "CHAT_TEMPLATE_NOT_TRUSTED"
NO_CHAT_TEMPLATE = "NO_CHAT_TEMPLATE"
TEMPLATE_ERROR = "TEMPLATE_ERROR"
TEMPLATE_TIMEOUT = "TEMPLATE_TIMEOUT"
TEMPLATE_OUTPUT_TOO_LARGE = "TEMPLATE_OUTPUT_TOO_LARGE"
TOO_MANY_MESSAGES = "TOO_MANY_MESSAGES"
TOO_MANY_REQUESTS = "TOO_MANY_REQUESTS"
REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
MISSING_PROMPT = "MISSING_PROMPT"
EMPTY_PROMPT = "EMPTY_PROMPT"
PROMPT_TOO_LONG = "PROMPT_TOO_LONG"
MAX_TOKENS_TOO_LARGE = "MAX_TOKENS_TOO_LARGE"
TRUNCATE_PROMPT_TOKENS_INVALID = "TRUNCATE_PROMPT_TOKENS_INVALID"
INVALID_TRUNCATION_SIDE = "INVALID_TRUNCATION_SIDE"
INVALID_SAMPLING_PARAM = "INVALID_SAMPLING_PARAM"
TOKEN_ID_OUT_OF_RANGE = "TOKEN_ID_OUT_OF_RANGE"
UNSUPPORTED_FIELD = "UNSUPPORTED_FIELD"
MISSING_PREVIOUS_PROMPT = "MISSING_PREVIOUS_PROMPT"
TEMPLATE_NOT_BRIDGEABLE = "TEMPLATE_NOT_BRIDGEABLE"
RENDER_QUEUE_FULL = "RENDER_QUEUE_FULL"


def bad(reason: str, message: str, field: str | None = None) -> ServiceError:
    return invalid_argument(reason, message, field)


def too_far(reason: str, message: str, field: str | None = None) -> ServiceError:
    return out_of_range(reason, message, field)


def precondition(reason: str, message: str) -> ServiceError:
    return failed_precondition(reason, message)


def model_not_found(name: str, served: list[str]) -> ServiceError:
    return ServiceError(
        grpc.StatusCode.NOT_FOUND,
        MODEL_NOT_FOUND,
        f"model {name!r} is not served here (serving {served})",
        [("model", "unknown model")],
    )


def check_token_ids(ids, vocab_size: int, field: str) -> None:
    """Every id must be in the vocabulary (TOKEN_ID_OUT_OF_RANGE names the first one that is not)."""
    for i, token in enumerate(ids):
        if not 0 <= token < vocab_size:
            raise bad(TOKEN_ID_OUT_OF_RANGE, f"{field} has id {token}, outside [0, {vocab_size})", f"{field}[{i}]")


def in_batch(error: ServiceError, index: int) -> ServiceError:
    """The same error, naming the conversation of a batch it came from."""
    violations = [
        (f"requests[{index}].{path}" if path else f"requests[{index}]", text) for path, text in error.violations
    ]
    return ServiceError(
        error.code,
        error.reason,
        f"requests[{index}]: {error.message}",
        violations or [(f"requests[{index}]", error.message)],
        {**error.metadata, "index": str(index)},
    )
