"""RagService and IndexService: convert proto -> domain, call the domain, convert back. Transport only."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from ragsvc import domain
from ragsvc.answering.cache import AnswerStore
from ragsvc.answering.service import AnsweringService
from ragsvc.errors import NotFound
from ragsvc.ingest.indexer import Indexer
from ragsvc.sanitize import validate_document_id, validate_documents
from ragsvc.server.boundary import call_context, call_state, stream_boundary, unary_boundary
from ragsvc.server.interceptors import Context
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc as index_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc as rag_grpc
from ragsvc.wire import convert


class RagServicer(rag_grpc.RagServiceServicer):
    def __init__(self, answering: AnsweringService) -> None:
        self._answering = answering

    @unary_boundary
    async def Ask(self, request: pb.AskRequest, context: Context) -> pb.AskResponse:
        call = call_context(context)
        question = convert.question_from_proto(request, call.request_id)
        async with contextlib.aclosing(self._answering.answer(question, call)) as events:
            async for event in events:
                if isinstance(event, domain.Answer):
                    return pb.AskResponse(answer=convert.answer_to_proto(event))
        raise RuntimeError("the answering service ended without an answer")

    @stream_boundary
    async def AskStream(
        self, request: pb.AskStreamRequest, context: Context
    ) -> AsyncIterator[pb.AskStreamResponse]:
        call = call_context(context)
        question = convert.question_from_proto(request, call.request_id)
        # aclosing: a cancelled call closes the answering (and the upstream LLM stream) at once.
        async with contextlib.aclosing(self._answering.answer(question, call)) as events:
            async for event in events:
                yield convert.event_to_proto(event)


class IndexServicer(index_grpc.IndexServiceServicer):
    def __init__(self, indexer: Indexer, *, default_tenant: str, cache: AnswerStore | None = None) -> None:
        self._indexer = indexer
        self._default_tenant = default_tenant
        self._cache = cache  # answers of a tenant are dropped when its documents change

    def _tenant_default(self, context: Context) -> str:
        """The tenant of a request that names none: the caller's key's, else the server's default."""
        principal = call_state(context).principal
        return principal.tenant_id if principal is not None else self._default_tenant

    async def _invalidate(self, tenant: str) -> None:
        if self._cache is not None:
            await self._cache.invalidate_tenant(tenant)

    @unary_boundary
    async def IngestDocuments(
        self, request: index_pb.IngestDocumentsRequest, context: Context
    ) -> index_pb.IngestDocumentsResponse:
        documents = convert.documents_from_proto(request, self._tenant_default(context))
        validate_documents(documents)
        try:
            results = [await self._indexer.ingest(document) for document in documents]
        finally:
            for tenant in {document.tenant_id for document in documents}:
                await self._invalidate(tenant)
        return index_pb.IngestDocumentsResponse(results=[convert.ingest_result_to_proto(r) for r in results])

    @unary_boundary
    async def DeleteDocument(
        self, request: index_pb.DeleteDocumentRequest, context: Context
    ) -> index_pb.DeleteDocumentResponse:
        validate_document_id(request.document_id)
        tenant = request.tenant_id.strip() or self._tenant_default(context)
        try:
            deleted = await self._indexer.delete(tenant, request.document_id)
        finally:
            await self._invalidate(tenant)
        if not deleted:
            raise NotFound(f"no document {request.document_id!r} in tenant {tenant!r}")
        return index_pb.DeleteDocumentResponse(chunks_deleted=deleted)
