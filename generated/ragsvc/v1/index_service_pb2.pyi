import datetime

from google.longrunning import operations_pb2 as _operations_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IngestDocumentsRequest(_message.Message):
    __slots__ = ("tenant_id", "documents")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    def __init__(self, tenant_id: _Optional[str] = ..., documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("document_id", "name", "content", "media_type", "tags", "source_url", "title", "trust", "published_date", "confidential", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: MetadataValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[MetadataValue, _Mapping]] = ...) -> None: ...
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TRUST_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_DATE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENTIAL_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    name: str
    content: bytes
    media_type: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    source_url: str
    title: str
    trust: float
    published_date: str
    confidential: bool
    metadata: _containers.MessageMap[str, MetadataValue]
    def __init__(self, document_id: _Optional[str] = ..., name: _Optional[str] = ..., content: _Optional[bytes] = ..., media_type: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., source_url: _Optional[str] = ..., title: _Optional[str] = ..., trust: _Optional[float] = ..., published_date: _Optional[str] = ..., confidential: _Optional[bool] = ..., metadata: _Optional[_Mapping[str, MetadataValue]] = ...) -> None: ...

class MetadataValue(_message.Message):
    __slots__ = ("string_value", "number_value", "bool_value", "timestamp_value")
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    NUMBER_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_VALUE_FIELD_NUMBER: _ClassVar[int]
    string_value: str
    number_value: float
    bool_value: bool
    timestamp_value: _timestamp_pb2.Timestamp
    def __init__(self, string_value: _Optional[str] = ..., number_value: _Optional[float] = ..., bool_value: _Optional[bool] = ..., timestamp_value: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class IngestDocumentsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DocumentResult]
    def __init__(self, results: _Optional[_Iterable[_Union[DocumentResult, _Mapping]]] = ...) -> None: ...

class DocumentResult(_message.Message):
    __slots__ = ("document_id", "chunks_created", "chunks_indexed", "elapsed", "error", "unchanged", "failure", "encoding")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_CREATED_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_INDEXED_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    chunks_created: int
    chunks_indexed: int
    elapsed: _duration_pb2.Duration
    error: str
    unchanged: bool
    failure: DocumentFailure
    encoding: str
    def __init__(self, document_id: _Optional[str] = ..., chunks_created: _Optional[int] = ..., chunks_indexed: _Optional[int] = ..., elapsed: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., error: _Optional[str] = ..., unchanged: _Optional[bool] = ..., failure: _Optional[_Union[DocumentFailure, _Mapping]] = ..., encoding: _Optional[str] = ...) -> None: ...

class DocumentFailure(_message.Message):
    __slots__ = ("code", "message", "reason", "metadata", "field_violations")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class FieldViolation(_message.Message):
        __slots__ = ("field", "description")
        FIELD_FIELD_NUMBER: _ClassVar[int]
        DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
        field: str
        description: str
        def __init__(self, field: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    FIELD_VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    reason: str
    metadata: _containers.ScalarMap[str, str]
    field_violations: _containers.RepeatedCompositeFieldContainer[DocumentFailure.FieldViolation]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., field_violations: _Optional[_Iterable[_Union[DocumentFailure.FieldViolation, _Mapping]]] = ...) -> None: ...

class DeleteDocumentRequest(_message.Message):
    __slots__ = ("tenant_id", "document_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    document_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., document_id: _Optional[str] = ...) -> None: ...

class DeleteDocumentResponse(_message.Message):
    __slots__ = ("chunks_deleted",)
    CHUNKS_DELETED_FIELD_NUMBER: _ClassVar[int]
    chunks_deleted: int
    def __init__(self, chunks_deleted: _Optional[int] = ...) -> None: ...

class ListDocumentsRequest(_message.Message):
    __slots__ = ("tenant_id", "page_size", "page_token")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    page_size: int
    page_token: str
    def __init__(self, tenant_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListDocumentsResponse(_message.Message):
    __slots__ = ("documents", "next_page_token")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[IndexedDocument]
    next_page_token: str
    def __init__(self, documents: _Optional[_Iterable[_Union[IndexedDocument, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class IndexedDocument(_message.Message):
    __slots__ = ("document_id", "name", "title", "media_type", "tags", "source_url", "confidential", "chunk_count", "size_bytes", "content_sha256", "ingest_time", "metadata", "trust", "encoding")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: MetadataValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[MetadataValue, _Mapping]] = ...) -> None: ...
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    CONFIDENTIAL_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    INGEST_TIME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TRUST_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    name: str
    title: str
    media_type: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    source_url: str
    confidential: bool
    chunk_count: int
    size_bytes: int
    content_sha256: str
    ingest_time: _timestamp_pb2.Timestamp
    metadata: _containers.MessageMap[str, MetadataValue]
    trust: float
    encoding: str
    def __init__(self, document_id: _Optional[str] = ..., name: _Optional[str] = ..., title: _Optional[str] = ..., media_type: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., source_url: _Optional[str] = ..., confidential: _Optional[bool] = ..., chunk_count: _Optional[int] = ..., size_bytes: _Optional[int] = ..., content_sha256: _Optional[str] = ..., ingest_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Mapping[str, MetadataValue]] = ..., trust: _Optional[float] = ..., encoding: _Optional[str] = ...) -> None: ...

class GetDocumentRequest(_message.Message):
    __slots__ = ("tenant_id", "document_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    document_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., document_id: _Optional[str] = ...) -> None: ...

class GetDocumentResponse(_message.Message):
    __slots__ = ("document",)
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    document: IndexedDocument
    def __init__(self, document: _Optional[_Union[IndexedDocument, _Mapping]] = ...) -> None: ...

class GetIndexStatsRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class GetIndexStatsResponse(_message.Message):
    __slots__ = ("document_count", "chunk_count", "content_bytes", "engine", "metadata_keys")
    DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    METADATA_KEYS_FIELD_NUMBER: _ClassVar[int]
    document_count: int
    chunk_count: int
    content_bytes: int
    engine: str
    metadata_keys: _containers.RepeatedCompositeFieldContainer[MetadataKey]
    def __init__(self, document_count: _Optional[int] = ..., chunk_count: _Optional[int] = ..., content_bytes: _Optional[int] = ..., engine: _Optional[str] = ..., metadata_keys: _Optional[_Iterable[_Union[MetadataKey, _Mapping]]] = ...) -> None: ...

class MetadataKey(_message.Message):
    __slots__ = ("name", "type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ...) -> None: ...

class UploadDocumentRequest(_message.Message):
    __slots__ = ("tenant_id", "document", "write_offset", "data", "finish_write", "content_sha256", "long_running")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    WRITE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FINISH_WRITE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    LONG_RUNNING_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    document: Document
    write_offset: int
    data: bytes
    finish_write: bool
    content_sha256: str
    long_running: bool
    def __init__(self, tenant_id: _Optional[str] = ..., document: _Optional[_Union[Document, _Mapping]] = ..., write_offset: _Optional[int] = ..., data: _Optional[bytes] = ..., finish_write: _Optional[bool] = ..., content_sha256: _Optional[str] = ..., long_running: _Optional[bool] = ...) -> None: ...

class UploadDocumentResponse(_message.Message):
    __slots__ = ("committed_size", "result", "operation")
    COMMITTED_SIZE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    committed_size: int
    result: DocumentResult
    operation: _operations_pb2.Operation
    def __init__(self, committed_size: _Optional[int] = ..., result: _Optional[_Union[DocumentResult, _Mapping]] = ..., operation: _Optional[_Union[_operations_pb2.Operation, _Mapping]] = ...) -> None: ...

class GetUploadStatusRequest(_message.Message):
    __slots__ = ("tenant_id", "document_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    document_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., document_id: _Optional[str] = ...) -> None: ...

class GetUploadStatusResponse(_message.Message):
    __slots__ = ("committed_size",)
    COMMITTED_SIZE_FIELD_NUMBER: _ClassVar[int]
    committed_size: int
    def __init__(self, committed_size: _Optional[int] = ...) -> None: ...
