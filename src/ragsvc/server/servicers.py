"""The gRPC servicers: convert proto -> domain, run the domain code, convert back. Errors cross at one boundary."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from ragsvc import domain
from ragsvc.errors import NotFound
from ragsvc.ingest.indexer import Indexer
from ragsvc.pipeline import Pipeline
from ragsvc.sanitize import validate_document_id, validate_documents
from ragsvc.server import convert
from ragsvc.server.cache import AnswerCache
from ragsvc.server.front import AskFront
from ragsvc.server.interceptors import current_call
from ragsvc.server.status import to_status
from ragsvc.storage.answers import AnswerLog
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc as index_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc as rag_grpc

Request = TypeVar("Request")
Response = TypeVar("Response")
REQUEST_ID_KEY = "x-request-id"


def unary_boundary(
    handler: Callable[[Any, Request, grpc.aio.ServicerContext], Awaitable[Response]],
) -> Callable[[Any, Request, grpc.aio.ServicerContext], Awaitable[Response]]:
    """Turn any exception of a unary handler into its gRPC status."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Request, context: grpc.aio.ServicerContext) -> Response:
        try:
            return await handler(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - the boundary: every error becomes a status
            await context.abort_with_status(to_status(exc))
            raise  # unreachable: abort_with_status raises

    return wrapper


def stream_boundary(
    handler: Callable[[Any, Request, grpc.aio.ServicerContext], AsyncIterator[Response]],
) -> Callable[[Any, Request, grpc.aio.ServicerContext], AsyncIterator[Response]]:
    """Turn any exception of a server-streaming handler into its gRPC status (after what was already sent)."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Request, context: grpc.aio.ServicerContext) -> AsyncIterator[Response]:
        try:
            async for response in handler(self, request, context):
                yield response
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - the boundary: every error becomes a status
            await context.abort_with_status(to_status(exc))

    return wrapper


def request_id_of(context: grpc.aio.ServicerContext) -> str:
    """The caller's x-request-id, or a new one (the interceptors' when the call is intercepted)."""
    call = current_call()
    if call is not None and call.request_id:
        return call.request_id
    for key, value in context.invocation_metadata() or ():
        if key == REQUEST_ID_KEY and value:
            return str(value)[:128]
    return uuid.uuid4().hex


class RagServicer(rag_grpc.RagServiceServicer):
    def __init__(self, pipeline: Pipeline, *, front: AskFront | None = None, answers: AnswerLog | None = None) -> None:
        self._pipeline = pipeline
        # Around the pipeline: principal, edge validation, injection flag, answer cache (server/front.py).
        self._front = front
        # Around all of it: the audit log, one row per request whatever its outcome.
        self._answers = answers

    async def _events(
        self, request: pb.AskRequest | pb.AskStreamRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[domain.Event]:
        question = convert.question_from_proto(request, request_id_of(context))
        call = current_call()
        if call is not None and call.principal is not None and not question.tenant_id:
            # Recorded under the caller's tenant (the front checks what the caller may do).
            question = dataclasses.replace(question, tenant_id=call.principal.tenant_id)
        # The caller's deadline, on the loop's clock, bounds the pipeline's generation stage.
        remaining = context.time_remaining()
        deadline = None if remaining is None else asyncio.get_running_loop().time() + remaining
        # aclosing: a cancelled call closes the pipeline (and the upstream LLM stream) at once.
        run = functools.partial(self._pipeline.run, deadline=deadline)
        answering = run(question) if self._front is None else self._front.events(question, run)
        if self._answers is not None:
            answering = self._answers.recorded(question, answering)
        async with contextlib.aclosing(answering) as events:
            async for event in events:
                yield event

    @unary_boundary
    async def Ask(self, request: pb.AskRequest, context: grpc.aio.ServicerContext) -> pb.AskResponse:
        async with contextlib.aclosing(self._events(request, context)) as events:
            async for event in events:
                if isinstance(event, domain.Answer):
                    return pb.AskResponse(answer=convert.answer_to_proto(event))
        raise RuntimeError("the pipeline ended without an answer")

    @stream_boundary
    async def AskStream(
        self, request: pb.AskStreamRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.AskStreamResponse]:
        async with contextlib.aclosing(self._events(request, context)) as events:
            async for event in events:
                yield convert.event_to_proto(event)


class IndexServicer(index_grpc.IndexServiceServicer):
    def __init__(self, indexer: Indexer, *, default_tenant: str, cache: AnswerCache | None = None) -> None:
        self._indexer = indexer
        self._default_tenant = default_tenant
        self._cache = cache  # answers of a tenant are dropped when its documents change

    def _tenant_default(self) -> str:
        """The tenant of a request that names none: the caller's key's, else the server's default."""
        call = current_call()
        return call.principal.tenant_id if call is not None and call.principal is not None else self._default_tenant

    def _invalidate(self, tenant: str) -> None:
        if self._cache is not None:
            self._cache.invalidate_tenant(tenant)

    @unary_boundary
    async def IngestDocuments(
        self, request: index_pb.IngestDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> index_pb.IngestDocumentsResponse:
        documents = convert.documents_from_proto(request, self._tenant_default())
        validate_documents(documents)
        try:
            results = [await self._indexer.ingest(document) for document in documents]
        finally:
            for tenant in {document.tenant_id for document in documents}:
                self._invalidate(tenant)
        return index_pb.IngestDocumentsResponse(results=[convert.ingest_result_to_proto(r) for r in results])

    @unary_boundary
    async def DeleteDocument(
        self, request: index_pb.DeleteDocumentRequest, context: grpc.aio.ServicerContext
    ) -> index_pb.DeleteDocumentResponse:
        validate_document_id(request.document_id)
        tenant = request.tenant_id.strip() or self._tenant_default()
        try:
            deleted = await self._indexer.delete(tenant, request.document_id)
        finally:
            self._invalidate(tenant)
        if not deleted:
            raise NotFound(f"no document {request.document_id!r} in tenant {tenant!r}")
        return index_pb.DeleteDocumentResponse(chunks_deleted=deleted)
