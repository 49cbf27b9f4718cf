"""Typed errors: a gRPC status code plus google.rpc.Status details (ErrorInfo reason, BadRequest violations).

Raise a `ServiceError` (`scaleout_common.reasons.fail` makes one from a reason) anywhere in a servicer; the error interceptor turns it into a
rich status. Anything else escaping a servicer is a bug and becomes INTERNAL with reason INTERNAL_ERROR.

A downstream status without an ErrorInfo (Envoy's own UNAVAILABLE "no healthy upstream", a deadline, a reset)
keeps its code and gets the table's reason for that code's family (`untyped_reason`): every reason passed on
is one of the table, and `typed` says whether the downstream gave it.

No client value travels unbounded into an error: a message quotes a client's value through `quote` (its first
100 characters and its length), and every text a `ServiceError` carries (message, violations, metadata, whoever
built it, a downstream included) is cut to `MAX_TEXT_CHARS` here. gRPC sends the message and the details in
trailers, which Envoy bounds: a 30,000-character `role` echoed twice once overflowed a header and reset the
whole upstream connection, failing every tenant's request multiplexed on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import grpc
from google.protobuf import any_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

if TYPE_CHECKING:
    from scaleout_common.reasons import Reason

DOMAIN = "scaleout.v1"
QUOTE_CHARS = 100  # of a client's value quoted in a message
MAX_TEXT_CHARS = 1000  # of a message, a violation's field or description, a metadata value
RETRY_AFTER = "retry_after_s"  # ErrorInfo metadata: seconds to wait before trying again (to_rpc_status)


def clip(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """`text`, or its head and its length in at most `limit` characters (so clipping twice changes nothing)."""
    if len(text) <= limit:
        return text
    suffix = f"… ({len(text)} characters)"
    return text[: limit - len(suffix)] + suffix


def quote(value: object) -> str:
    """A client's value as an error message quotes it: its repr, of its first 100 characters when longer."""
    if isinstance(value, (str, bytes)) and len(value) > QUOTE_CHARS:
        return f"{value[:QUOTE_CHARS]!r}… ({len(value)} {'characters' if isinstance(value, str) else 'bytes'})"
    return clip(repr(value), QUOTE_CHARS + 20)


@dataclass
class ServiceError(Exception):
    code: grpc.StatusCode
    reason: str  # stable, UPPER_SNAKE: clients switch on it
    message: str
    violations: list[tuple[str, str]] = field(default_factory=list)  # (field path, description)
    metadata: dict[str, str] = field(default_factory=dict)
    typed: bool = True  # False: a downstream status that carried no reason; `reason` is untyped_reason(code)

    def __post_init__(self) -> None:
        self.message = clip(self.message)
        self.violations = [(clip(f), clip(d)) for f, d in self.violations]
        self.metadata = {clip(k): clip(v) for k, v in self.metadata.items()}

    def __str__(self) -> str:
        return f"{self.code.name} {self.reason}: {self.message}"

    def to_status(self) -> status_pb2.Status:
        details: list[Message] = [
            error_details_pb2.ErrorInfo(reason=self.reason, domain=DOMAIN, metadata=self.metadata)
        ]
        if self.violations:
            details.append(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(field=f, description=d, reason=self.reason)
                        for f, d in self.violations
                    ]
                )
            )
        packed = []
        for detail in details:
            any_detail = any_pb2.Any()
            any_detail.Pack(detail)
            packed.append(any_detail)
        return status_pb2.Status(code=self.code.value[0], message=self.message, details=packed)

    def to_rpc_status(self) -> grpc.Status:
        """The status to end a call with; an error that says when to come back (ErrorInfo `retry_after_s`) also
        carries it as `retry-after` metadata, which the gateway's REST answers show as the Retry-After header."""
        status = rpc_status.to_status(self.to_status())
        if RETRY_AFTER in self.metadata:
            extra = (("retry-after", self.metadata[RETRY_AFTER]),)
            return status._replace(trailing_metadata=(*status.trailing_metadata, *extra))  # pyright: ignore
        return status

    @classmethod
    def from_status(cls, status: status_pb2.Status) -> ServiceError:
        """Rebuild an error received in-band (a stream's terminal message) or from a downstream call."""
        # OK is no error (gRPC refuses to end a call with it) and an unknown number no status: both are UNKNOWN.
        code = next((c for c in grpc.StatusCode if c.value[0] == status.code and status.code), grpc.StatusCode.UNKNOWN)
        reason, violations, metadata = "", [], {}
        # protobuf's stubs type Message.DESCRIPTOR as `Descriptor | upb Descriptor` but Any.Is as taking only
        # the former; at runtime Is takes either.
        for detail in status.details:
            if detail.Is(cast(Descriptor, error_details_pb2.ErrorInfo.DESCRIPTOR)):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reason, metadata = info.reason, dict(info.metadata)
            elif detail.Is(cast(Descriptor, error_details_pb2.BadRequest.DESCRIPTOR)):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                violations = [(v.field, v.description) for v in bad.field_violations]
        if not reason:
            return cls(code, untyped_reason(code), status.message, violations, metadata, typed=False)
        return cls(code, reason, status.message, violations, metadata)

    @classmethod
    def of(cls, error: Exception) -> ServiceError:
        """A ServiceError as it is; a downstream call's grpc error with its code, reason and violations."""
        if isinstance(error, ServiceError):
            return error
        assert isinstance(error, grpc.RpcError), error
        return cls.from_rpc_error(error)

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> ServiceError:
        """Keep a downstream service's typed error (code, reason, violations) when passing it on."""
        # grpc_status's stub asks for a grpc.Call, but from_call only reads code(), details() and
        # trailing_metadata(), which every RpcError gRPC raises (sync or aio) has.
        status = rpc_status.from_call(cast(grpc.Call, error))
        if status is not None:
            return cls.from_status(status)
        return cls(error.code(), untyped_reason(error.code()), error.details() or "", typed=False)


def untyped_reason(code: grpc.StatusCode) -> Reason:
    """The reason of a downstream status that carries none, by its code's family (the gateway's Lua filter gets
    the same table: gateway/envoy_config.py)."""
    # Imported here: the table's `fail` builds a ServiceError, so reasons imports this module.
    from scaleout_common.reasons import Reason

    if code == grpc.StatusCode.UNAVAILABLE:
        return Reason.UPSTREAM_UNAVAILABLE  # no healthy replica, a refused or reset connection
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Reason.UPSTREAM_TIMEOUT
    return Reason.UPSTREAM_ERROR


assert grpc.StatusCode.INVALID_ARGUMENT.value[0] == code_pb2.INVALID_ARGUMENT
