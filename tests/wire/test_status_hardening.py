"""The status mapping of the errors issue 6 added: codes, details, and the round trip back to the domain error."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from ragsvc import errors
from ragsvc.wire.status import from_rpc_error, to_status
from tests.wire.test_status import _FakeCall

CASES = [
    (errors.Unauthenticated("missing bearer token"), grpc.StatusCode.UNAUTHENTICATED),
    (errors.PermissionDenied("no", metadata={"tenant": "globex"}), grpc.StatusCode.PERMISSION_DENIED),
    (errors.InjectionSuspected([errors.FieldViolation("query", "injection")]), grpc.StatusCode.INVALID_ARGUMENT),
    (
        errors.RateLimited("slow down", retry_after_s=12.5, metadata={"client": "key:a", "quota": "60 per minute"}),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ),
    (errors.Overloaded("busy", retry_after_s=1.0, metadata={"limit": "10"}), grpc.StatusCode.RESOURCE_EXHAUSTED),
]


@pytest.mark.parametrize(("error", "code"), CASES, ids=lambda c: type(c).__name__)
def test_round_trip(error: errors.RagError, code: grpc.StatusCode) -> None:
    status = to_status(error)
    assert status.code == code
    back = from_rpc_error(_FakeCall(status))
    assert type(back) is type(error) and back.message == error.message and back.metadata == error.metadata
    assert getattr(back, "retry_after_s", None) == getattr(error, "retry_after_s", None)


def test_rate_limited_carries_quota_failure_and_retry_info() -> None:
    error = errors.RateLimited("slow", retry_after_s=3.0, metadata={"client": "peer:ipv4:1.2.3.4", "quota": "5 rpm"})
    status = rpc_status.from_call(_FakeCall(to_status(error)))
    quota, retry = error_details_pb2.QuotaFailure(), error_details_pb2.RetryInfo()
    assert any(d.Unpack(quota) for d in status.details if d.Is(quota.DESCRIPTOR))
    assert any(d.Unpack(retry) for d in status.details if d.Is(retry.DESCRIPTOR))
    assert [(v.subject, v.description) for v in quota.violations] == [("peer:ipv4:1.2.3.4", "5 rpm")]
    assert retry.retry_delay.seconds == 3
