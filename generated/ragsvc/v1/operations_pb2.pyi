import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OperationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATION_STATE_UNSPECIFIED: _ClassVar[OperationState]
    OPERATION_STATE_QUEUED: _ClassVar[OperationState]
    OPERATION_STATE_RUNNING: _ClassVar[OperationState]
    OPERATION_STATE_CANCELLING: _ClassVar[OperationState]
    OPERATION_STATE_SUCCEEDED: _ClassVar[OperationState]
    OPERATION_STATE_FAILED: _ClassVar[OperationState]
    OPERATION_STATE_CANCELLED: _ClassVar[OperationState]
OPERATION_STATE_UNSPECIFIED: OperationState
OPERATION_STATE_QUEUED: OperationState
OPERATION_STATE_RUNNING: OperationState
OPERATION_STATE_CANCELLING: OperationState
OPERATION_STATE_SUCCEEDED: OperationState
OPERATION_STATE_FAILED: OperationState
OPERATION_STATE_CANCELLED: OperationState

class OperationTimes(_message.Message):
    __slots__ = ("create_time", "start_time", "update_time", "end_time")
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    create_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AskOperationMetadata(_message.Message):
    __slots__ = ("state", "times", "tenant_id", "request_sha256")
    STATE_FIELD_NUMBER: _ClassVar[int]
    TIMES_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_SHA256_FIELD_NUMBER: _ClassVar[int]
    state: OperationState
    times: OperationTimes
    tenant_id: str
    request_sha256: str
    def __init__(self, state: _Optional[_Union[OperationState, str]] = ..., times: _Optional[_Union[OperationTimes, _Mapping]] = ..., tenant_id: _Optional[str] = ..., request_sha256: _Optional[str] = ...) -> None: ...

class IngestOperationMetadata(_message.Message):
    __slots__ = ("state", "times", "tenant_id", "request_sha256", "documents_done", "documents_total", "chunks_done", "chunks_total", "current_document_id")
    STATE_FIELD_NUMBER: _ClassVar[int]
    TIMES_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_SHA256_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_DONE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_DONE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CURRENT_DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    state: OperationState
    times: OperationTimes
    tenant_id: str
    request_sha256: str
    documents_done: int
    documents_total: int
    chunks_done: int
    chunks_total: int
    current_document_id: str
    def __init__(self, state: _Optional[_Union[OperationState, str]] = ..., times: _Optional[_Union[OperationTimes, _Mapping]] = ..., tenant_id: _Optional[str] = ..., request_sha256: _Optional[str] = ..., documents_done: _Optional[int] = ..., documents_total: _Optional[int] = ..., chunks_done: _Optional[int] = ..., chunks_total: _Optional[int] = ..., current_document_id: _Optional[str] = ...) -> None: ...
