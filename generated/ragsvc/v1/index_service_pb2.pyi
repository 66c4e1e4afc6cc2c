import datetime

from google.protobuf import duration_pb2 as _duration_pb2
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
    __slots__ = ("document_id", "name", "content", "media_type", "tags", "source_url", "title", "trust", "published_date", "confidential")
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
    def __init__(self, document_id: _Optional[str] = ..., name: _Optional[str] = ..., content: _Optional[bytes] = ..., media_type: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., source_url: _Optional[str] = ..., title: _Optional[str] = ..., trust: _Optional[float] = ..., published_date: _Optional[str] = ..., confidential: _Optional[bool] = ...) -> None: ...

class IngestDocumentsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DocumentResult]
    def __init__(self, results: _Optional[_Iterable[_Union[DocumentResult, _Mapping]]] = ...) -> None: ...

class DocumentResult(_message.Message):
    __slots__ = ("document_id", "chunks_created", "chunks_indexed", "elapsed", "error")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_CREATED_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_INDEXED_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    chunks_created: int
    chunks_indexed: int
    elapsed: _duration_pb2.Duration
    error: str
    def __init__(self, document_id: _Optional[str] = ..., chunks_created: _Optional[int] = ..., chunks_indexed: _Optional[int] = ..., elapsed: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

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
