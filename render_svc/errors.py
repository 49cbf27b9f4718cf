"""Render's own error shapes: an unknown model, and an error of one conversation inside a batch.

Reasons and their codes live in `scaleout_common.reasons`; this module only words render's two composites.
Errors of one conversation in RenderChatBatch name it in the field path (`requests[3].messages`) and in
ErrorInfo metadata (`index`).
"""

from __future__ import annotations

from scaleout_common.errors import ServiceError, quote
from scaleout_common.reasons import Reason, fail


def model_not_found(name: str, served: list[str]) -> ServiceError:
    return fail(Reason.MODEL_NOT_FOUND, f"model {quote(name)} is not served here (serving {served})", "model")


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
