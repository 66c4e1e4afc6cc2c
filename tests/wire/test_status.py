"""The error boundary: every domain error maps to its code with decodable details, and back."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from ragsvc import errors
from ragsvc.wire.status import domain_error, from_rpc_error, to_status

CASES = [
    (errors.InvalidRequest([errors.FieldViolation("query", "must not be empty")]), grpc.StatusCode.INVALID_ARGUMENT),
    (errors.ModelNotAllowed([errors.FieldViolation("generation.model", "no")]), grpc.StatusCode.INVALID_ARGUMENT),
    (errors.TokenBudgetExceeded([errors.FieldViolation("query", "too long")]), grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound("no such document"), grpc.StatusCode.NOT_FOUND),
    (errors.ModelUnavailable("not served"), grpc.StatusCode.FAILED_PRECONDITION),
    (errors.IndexOutdated("terms of analyser 1, this is 2"), grpc.StatusCode.FAILED_PRECONDITION),
    (errors.LLMUnavailable("down", retry_after_s=2.5), grpc.StatusCode.UNAVAILABLE),
    (errors.EmbeddingFailed("onnx"), grpc.StatusCode.UNAVAILABLE),
    (errors.RetrievalUnavailable("engine"), grpc.StatusCode.UNAVAILABLE),
    (errors.LLMTimeout("generation"), grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.StageTimeout("retrieval"), grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.RateLimited("slow down", retry_after_s=30), grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.Overloaded("busy"), grpc.StatusCode.RESOURCE_EXHAUSTED),
]


class _FakeCall(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """An RpcError carrying a status the way a client receives it (code, details, trailing metadata)."""

    def __init__(self, status: grpc.Status) -> None:
        self._status = status

    def code(self) -> grpc.StatusCode:
        return self._status.code

    def details(self) -> str:
        return self._status.details

    def trailing_metadata(self):
        return self._status.trailing_metadata

    def initial_metadata(self): ...
    def is_active(self): ...
    def time_remaining(self): ...
    def cancel(self): ...
    def add_callback(self, callback): ...


@pytest.mark.parametrize(("error", "code"), CASES, ids=lambda c: type(c).__name__)
def test_round_trip(error: errors.RagError, code: grpc.StatusCode) -> None:
    status = to_status(error)
    assert status.code == code
    back = from_rpc_error(_FakeCall(status))
    assert type(back) is type(error)
    assert back.reason == error.reason and back.message == error.message
    assert getattr(back, "violations", None) == getattr(error, "violations", None)
    assert getattr(back, "retry_after_s", None) == getattr(error, "retry_after_s", None)
    assert getattr(back, "stage", None) == getattr(error, "stage", None)


def test_dependency_errors_carry_retry_info() -> None:
    status = rpc_status.from_call(_FakeCall(to_status(errors.LLMUnavailable("down", retry_after_s=2.5))))
    retry = error_details_pb2.RetryInfo()
    assert any(d.Unpack(retry) for d in status.details if d.Is(retry.DESCRIPTOR))
    assert retry.retry_delay.ToMilliseconds() == 2500


def test_unexpected_exception_is_internal_without_leaking_its_text() -> None:
    error = domain_error(KeyError("secret path /etc/shadow"))
    assert type(error) is errors.RagError and error.reason == "INTERNAL"
    status = to_status(error)
    assert status.code == grpc.StatusCode.INTERNAL
    assert "shadow" not in status.details


@pytest.mark.parametrize(("error", "code"), CASES, ids=lambda c: type(c).__name__)
def test_a_domain_error_stays_itself(error: errors.RagError, code: grpc.StatusCode) -> None:
    assert domain_error(error) is error
