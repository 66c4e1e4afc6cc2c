"""The one mapping between ragsvc's exception tree and gRPC status codes with google.rpc details.

`to_status` is used by the servicers' boundary; `from_rpc_error` by clients (the CLI), so a status decodes back
into the same domain error on the other side. A long-running operation's `error` is the same google.rpc.Status
(`to_rpc_status`, `from_rpc_status`).
"""

from __future__ import annotations

import logging

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from ragsvc import errors

DOMAIN = "ragsvc.v1"
_log = logging.getLogger(__name__)

# Most specific first: the first class an error is an instance of decides its code.
_CODES: tuple[tuple[type[errors.RagError], grpc.StatusCode], ...] = (
    (errors.InvalidRequest, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.ModelUnavailable, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.BuiltInTemplate, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.IdempotencyKeyReused, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.ReadOnlyIndex, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.OperationDone, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.OperationCancelled, grpc.StatusCode.CANCELLED),
    (errors.OperationAbandoned, grpc.StatusCode.ABORTED),
    (errors.IndexOutdated, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (errors.DependencyUnavailable, grpc.StatusCode.UNAVAILABLE),
    (errors.StageTimeout, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (errors.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
)


def _all_errors(cls: type[errors.RagError]) -> list[type[errors.RagError]]:
    return [cls, *(sub for direct in cls.__subclasses__() for sub in _all_errors(direct))]


_BY_REASON = {cls.reason: cls for cls in _all_errors(errors.RagError)}


def _pack(message: Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def code_for(exc: errors.RagError) -> grpc.StatusCode:
    """The status code of a domain error (INTERNAL for one no class of the table covers)."""
    return next((code for cls, code in _CODES if isinstance(exc, cls)), grpc.StatusCode.INTERNAL)


def domain_error(exc: BaseException) -> errors.RagError:
    """`exc` as a domain error: itself when it is one; anything else is an INTERNAL error, logged with its
    traceback, whose text is never sent to the caller."""
    if isinstance(exc, errors.RagError):
        return exc
    _log.error("internal error", exc_info=exc)
    return errors.RagError("internal error")


def to_status(exc: errors.RagError) -> grpc.Status:
    """The gRPC status for a domain error (see `domain_error` for any other exception)."""
    return rpc_status.to_status(to_rpc_status(exc))


def to_rpc_status(exc: errors.RagError) -> status_pb2.Status:
    """The google.rpc.Status of a domain error, with its details: what `to_status` sends, and what a long-running
    operation that failed stores as its `error`."""
    code = code_for(exc)
    details = [_pack(error_details_pb2.ErrorInfo(reason=exc.reason, domain=DOMAIN, metadata=exc.metadata))]
    if isinstance(exc, errors.InvalidRequest):
        violations = [
            error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description) for v in exc.violations
        ]
        details.append(_pack(error_details_pb2.BadRequest(field_violations=violations)))
    if isinstance(exc, errors.RetryableError):
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(exc.retry_after_s * 1e9))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    if isinstance(exc, errors.IdempotencyKeyReused):
        violation = error_details_pb2.PreconditionFailure.Violation(
            type=exc.reason, subject="idempotency_key", description=exc.message
        )
        details.append(_pack(error_details_pb2.PreconditionFailure(violations=[violation])))
    if isinstance(exc, errors.RateLimited):
        violation = error_details_pb2.QuotaFailure.Violation(
            subject=exc.metadata.get("client", ""), description=exc.metadata.get("quota", exc.message)
        )
        details.append(_pack(error_details_pb2.QuotaFailure(violations=[violation])))
    return status_pb2.Status(code=getattr(code_pb2, code.name), message=exc.message, details=details)


def from_rpc_error(error: grpc.RpcError) -> errors.RagError:
    """The domain error a ragsvc status stands for (RagError with reason INTERNAL when it is not one of ours)."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]  # every RpcError a stub raises is also a Call
    return from_rpc_status(status, str(error.details()))


def from_rpc_status(status: status_pb2.Status | None, fallback_message: str = "") -> errors.RagError:
    """The domain error a google.rpc.Status stands for: a failed call's, or a long-running operation's `error`."""
    message = status.message if status else fallback_message
    info = error_details_pb2.ErrorInfo()
    violations: list[errors.FieldViolation] = []
    retry_after = 1.0
    for detail in status.details if status else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            detail.Unpack(info)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations = [errors.FieldViolation(v.field, v.description) for v in bad.field_violations]
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            retry_after = retry.retry_delay.ToNanoseconds() / 1e9
    cls = _BY_REASON.get(info.reason, errors.RagError) if info.domain == DOMAIN else errors.RagError
    metadata = dict(info.metadata)
    if issubclass(cls, errors.InvalidRequest):
        return cls(violations, message)
    if issubclass(cls, errors.StageTimeout):
        return cls(metadata.get("stage", ""), message)
    if issubclass(cls, errors.RetryableError):
        return cls(message, retry_after_s=retry_after, metadata=metadata)
    return cls(message, metadata=metadata)
