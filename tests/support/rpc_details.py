"""Decode a failed call's google.rpc status the way any client does (grpc_status.rpc_status.from_call)."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


@dataclass
class Details:
    code: grpc.StatusCode
    message: str
    error_info: error_details_pb2.ErrorInfo | None = None
    retry_info: error_details_pb2.RetryInfo | None = None
    quota_failure: error_details_pb2.QuotaFailure | None = None
    bad_request: error_details_pb2.BadRequest | None = None
    types: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return self.error_info.reason if self.error_info is not None else ""

    @property
    def retry_after_s(self) -> float | None:
        return self.retry_info.retry_delay.ToNanoseconds() / 1e9 if self.retry_info is not None else None


_KINDS = {
    "error_info": error_details_pb2.ErrorInfo,
    "retry_info": error_details_pb2.RetryInfo,
    "quota_failure": error_details_pb2.QuotaFailure,
    "bad_request": error_details_pb2.BadRequest,
}


def details_of(error: grpc.aio.AioRpcError) -> Details:
    """The status of `error` with its details unpacked; a status without details has none of them."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    details = Details(error.code(), status.message if status else error.details() or "")
    for any_detail in status.details if status else ():
        details.types.append(any_detail.type_url.rsplit("/", 1)[-1])
        for attribute, kind in _KINDS.items():
            if any_detail.Is(kind.DESCRIPTOR):
                message = kind()
                any_detail.Unpack(message)
                setattr(details, attribute, message)
    return details
