"""Long-running operations on the wire: a stored operation as a google.longrunning.Operation, and the packing of
what an operation stores (its response as a google.protobuf.Any)."""

from __future__ import annotations

import re

from google.longrunning import operations_proto_pb2 as lro
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import status_pb2

from ragsvc.storage.operations import OperationKind, OperationRecord, OperationState
from ragsvc.v1 import operations_pb2 as ops_pb
from ragsvc.wire.convert import timestamp_of

# "operations/" and 32 hex digits: what OperationRunner names them.
NAME = re.compile(r"operations/[0-9a-f]{32}")
_STATES = {
    OperationState.QUEUED: ops_pb.OPERATION_STATE_QUEUED,
    OperationState.RUNNING: ops_pb.OPERATION_STATE_RUNNING,
    OperationState.CANCELLING: ops_pb.OPERATION_STATE_CANCELLING,
    OperationState.SUCCEEDED: ops_pb.OPERATION_STATE_SUCCEEDED,
    OperationState.FAILED: ops_pb.OPERATION_STATE_FAILED,
    OperationState.CANCELLED: ops_pb.OPERATION_STATE_CANCELLED,
}


def packed(message: Message) -> bytes:
    """`message` packed into a google.protobuf.Any, serialized: what an operation stores as its response."""
    wrapper = any_pb2.Any()
    wrapper.Pack(message)
    return wrapper.SerializeToString()


def operation_to_proto(record: OperationRecord) -> lro.Operation:
    operation = lro.Operation(name=record.name, done=record.done)
    operation.metadata.Pack(metadata_of(record))
    if record.response is not None:
        operation.response.CopyFrom(any_pb2.Any.FromString(record.response))
    elif record.error is not None:
        operation.error.CopyFrom(status_pb2.Status.FromString(record.error))
    return operation


def metadata_of(record: OperationRecord) -> ops_pb.AskOperationMetadata | ops_pb.IngestOperationMetadata:
    """The operation's metadata message: AskOperationMetadata or IngestOperationMetadata, by its kind."""
    times = ops_pb.OperationTimes(
        create_time=timestamp_of(record.created_at),
        start_time=None if record.started_at is None else timestamp_of(record.started_at),
        update_time=timestamp_of(record.updated_at),
        end_time=None if record.finished_at is None else timestamp_of(record.finished_at),
    )
    state, tenant, digest = _STATES[record.state], record.tenant_id, record.request_sha256
    if record.kind is OperationKind.ASK:
        return ops_pb.AskOperationMetadata(state=state, times=times, tenant_id=tenant, request_sha256=digest)
    progress = record.progress
    return ops_pb.IngestOperationMetadata(
        state=state,
        times=times,
        tenant_id=tenant,
        request_sha256=digest,
        documents_done=progress.documents_done,
        documents_total=progress.documents_total,
        chunks_done=progress.chunks_done,
        chunks_total=progress.chunks_total,
        current_document_id=progress.current_document_id,
    )
