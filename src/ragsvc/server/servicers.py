"""RagService and IndexService: convert proto -> domain, call the domain, convert back. Transport only.

A session's turns are read and deleted by `answering.conversation.Conversation`, bound to the caller as the Asks
that stored them were. IndexService calls are bounded by the tags of the caller's key (`_reader`): the engine
lists, reads, counts and deletes only the documents those tags show (`AccessPolicy.shows`), and an unfinished
upload of a document they do not show is, to that key, no upload at all."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import AsyncIterator

from google.longrunning import operations_proto_pb2 as lro

from ragsvc import domain
from ragsvc.answering.cache import AnswerStore
from ragsvc.answering.context import AnswerReport, CallContext
from ragsvc.answering.conversation import Conversation
from ragsvc.answering.service import AnsweringService
from ragsvc.errors import FieldViolation, InvalidRequest, NotFound, RagError
from ragsvc.ingest.indexer import Indexer, ProgressSink
from ragsvc.ingest.limits import ChunkLimit
from ragsvc.ingest.uploads import Upload, UploadStaging
from ragsvc.retrieval.base import VectorEngine
from ragsvc.retrieval.schema import MetadataSchema
from ragsvc.sanitize import validate_document_id, validate_documents, validate_session_id, validate_tenant_id
from ragsvc.server.boundary import call_context, call_state, stream_boundary, unary_boundary
from ragsvc.server.interceptors import Context
from ragsvc.server.operation_runner import OperationControl, OperationRunner
from ragsvc.server.pages import BAD_PAGE_TOKEN, page_after, page_size_of, page_token
from ragsvc.storage.operations import OperationKind
from ragsvc.storage.sessions import SessionKey
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc as index_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc as rag_grpc
from ragsvc.wire import convert
from ragsvc.wire.operations import operation_to_proto, packed


class RagServicer(rag_grpc.RagServiceServicer):
    def __init__(
        self,
        answering: AnsweringService,
        conversation: Conversation,
        operations: OperationRunner,
        *,
        default_tenant: str,
    ) -> None:
        self._answering = answering
        self._conversation = conversation  # stored sessions, read back and deleted
        self._operations = operations
        self._default_tenant = default_tenant

    @unary_boundary
    async def Ask(self, request: pb.AskRequest, context: Context) -> pb.AskResponse:
        call = call_context(context)
        return await self._ask(convert.question_from_proto(request, call.request_id), call)

    async def _ask(self, question: domain.Question, call: CallContext) -> pb.AskResponse:
        async with contextlib.aclosing(self._answering.answer(question, call)) as events:
            async for event in events:
                if isinstance(event, domain.Answer):
                    return pb.AskResponse(answer=convert.answer_to_proto(event))
        raise RuntimeError("the answering service ended without an answer")

    @unary_boundary
    async def SubmitAsk(self, request: pb.AskRequest, context: Context) -> lro.Operation:
        call = call_context(context)
        question = convert.question_from_proto(request, call.request_id)
        admitted, _ = await self._answering.admit(question, call)  # a refused question fails this call, as Ask would
        # The answer outlives this call: no deadline but the pipeline's own, and a report of its own.
        background = CallContext(call.request_id, call.principal, None, AnswerReport(), call.peer)

        async def work(_: OperationControl) -> bytes:
            return packed(await self._ask(question, background))

        record = await self._operations.submit(
            OperationKind.ASK,
            owner=call.caller,
            tenant_id=admitted.tenant_id,
            request_sha256=hashlib.sha256(request.SerializeToString(deterministic=True)).hexdigest(),
            work=work,
            interruptible=True,
        )
        return operation_to_proto(record)

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

    def _session(self, tenant_id: str, session_id: str, call: CallContext) -> SessionKey:
        """The session a request names: in the key's tenant (the interceptor refused another), else the one it
        names or the server's default."""
        validate_tenant_id(tenant_id)
        validate_session_id(session_id)
        tenant = call.principal.tenant_id if call.principal is not None else tenant_id.strip()
        return SessionKey(tenant or self._default_tenant, session_id)

    @unary_boundary
    async def GetSession(self, request: pb.GetSessionRequest, context: Context) -> pb.GetSessionResponse:
        call = call_context(context)
        key = self._session(request.tenant_id, request.session_id, call)
        tags = tuple(tag.strip() for tag in request.user_tags)
        if call.principal is not None:
            tags = call.principal.reading_tags(tags)
        size = page_size_of(request.page_size)
        scope = f"{key.tenant_id}/{key.session_id}"
        after = page_after(request.page_token, scope)
        if not after.isdigit() and after:
            raise InvalidRequest([BAD_PAGE_TOKEN])
        page = await self._conversation.read(key, call.caller, tags, after_seq=int(after or 0), limit=size)
        token = "" if page.next_after is None else page_token(scope, str(page.next_after))
        return pb.GetSessionResponse(session=convert.session_to_proto(page), next_page_token=token)

    @unary_boundary
    async def DeleteSession(self, request: pb.DeleteSessionRequest, context: Context) -> pb.DeleteSessionResponse:
        call = call_context(context)
        key = self._session(request.tenant_id, request.session_id, call)
        admin = call.principal is not None and call.principal.can_admin
        forgotten = await self._conversation.forget(key, call.caller, tenant_admin=admin)
        return pb.DeleteSessionResponse(turns_deleted=forgotten.turns, audit_records_erased=forgotten.audit_records)


class IndexServicer(index_grpc.IndexServiceServicer):
    def __init__(
        self,
        indexer: Indexer,
        engine: VectorEngine,
        uploads: UploadStaging,
        schema: MetadataSchema,
        operations: OperationRunner,
        *,
        default_tenant: str,
        chunk_limit: ChunkLimit,
        cache: AnswerStore | None = None,
    ) -> None:
        self._indexer = indexer
        self._engine = engine
        self._uploads = uploads
        self._schema = schema
        self._operations = operations
        self._default_tenant = default_tenant
        self._chunk_limit = chunk_limit  # of one document ingested within a call
        self._cache = cache  # answers of a tenant are dropped when its documents change

    def _tenant(self, requested: str, context: Context) -> str:
        """The request's tenant; when it names none, the caller's key's, else the server's default. Raises
        InvalidRequest for a malformed one."""
        validate_tenant_id(requested)
        if requested.strip():
            return requested.strip()
        principal = call_state(context).principal
        return principal.tenant_id if principal is not None else self._default_tenant

    @staticmethod
    def _reader(context: Context) -> frozenset[str] | None:
        """The tags of the key calling (None: a key of any tag, or no authentication): the documents it may touch."""
        principal = call_state(context).principal
        return principal.tags if principal is not None else None

    def _shows(self, upload_tags: tuple[str, ...] | None, reader: frozenset[str] | None) -> bool:
        """Whether a key holding `reader` sees an upload of a document tagged `upload_tags` (None: not recorded)."""
        return reader is None or (upload_tags is not None and self._engine.access.shows(upload_tags, reader))

    async def _invalidate(self, tenant: str) -> None:
        if self._cache is not None:
            await self._cache.invalidate_tenant(tenant)

    async def _ingest(
        self,
        documents: list[domain.SourceDocument],
        reader: frozenset[str] | None,
        *,
        within_call: bool = True,
        progress: ProgressSink | None = None,
    ) -> list[domain.IngestResult]:
        """Index `documents` for a key holding `reader`'s tags; `within_call`, the call's chunk limit applies
        (IngestDocuments, UploadDocument), else (an operation) only the limits' own."""
        validate_documents(documents, self._indexer.sources)
        try:
            limit = self._chunk_limit if within_call else None
            return await self._indexer.ingest_many(documents, tags=reader, chunk_limit=limit, progress=progress)
        finally:
            for tenant in {document.tenant_id for document in documents}:
                await self._invalidate(tenant)

    @unary_boundary
    async def IngestDocuments(
        self, request: index_pb.IngestDocumentsRequest, context: Context
    ) -> index_pb.IngestDocumentsResponse:
        documents = convert.documents_from_proto(request, self._tenant(request.tenant_id, context))
        results = await self._ingest(documents, self._reader(context))
        return index_pb.IngestDocumentsResponse(
            results=[convert.ingest_result_to_proto(r, f"documents[{i}]") for i, r in enumerate(results)]
        )

    @unary_boundary
    async def SubmitIngest(self, request: index_pb.IngestDocumentsRequest, context: Context) -> lro.Operation:
        tenant = self._tenant(request.tenant_id, context)
        documents = convert.documents_from_proto(request, tenant)
        validate_documents(documents, self._indexer.sources)  # a bad request fails this call, before any operation exists
        digest = hashlib.sha256(request.SerializeToString(deterministic=True)).hexdigest()
        return await self._submit_ingest(documents, digest, context)

    async def _submit_ingest(
        self, documents: list[domain.SourceDocument], request_sha256: str, context: Context
    ) -> lro.Operation:
        """Ingest `documents` (validated) as a long-running operation of the caller's, bounded by its key's tags."""
        reader = self._reader(context)

        async def work(control: OperationControl) -> bytes:
            results = await self._ingest(documents, reader, within_call=False, progress=control.report)
            response = [convert.ingest_result_to_proto(r, f"documents[{i}]") for i, r in enumerate(results)]
            return packed(index_pb.IngestDocumentsResponse(results=response))

        record = await self._operations.submit(
            OperationKind.INGEST,
            owner=call_context(context).caller,
            tenant_id=documents[0].tenant_id,
            request_sha256=request_sha256,
            work=work,
            interruptible=False,  # it stops between embedding batches (OperationControl.report), never mid-write
            documents_total=len(documents),
        )
        return operation_to_proto(record)

    @unary_boundary
    async def DeleteDocument(
        self, request: index_pb.DeleteDocumentRequest, context: Context
    ) -> index_pb.DeleteDocumentResponse:
        validate_document_id(request.document_id)
        tenant = self._tenant(request.tenant_id, context)
        try:
            deleted = await self._indexer.delete(tenant, request.document_id, tags=self._reader(context))
        finally:
            await self._invalidate(tenant)
        if not deleted:
            raise NotFound(f"no document {request.document_id!r} in tenant {tenant!r}")
        return index_pb.DeleteDocumentResponse(chunks_deleted=deleted)

    @unary_boundary
    async def ListDocuments(
        self, request: index_pb.ListDocumentsRequest, context: Context
    ) -> index_pb.ListDocumentsResponse:
        tenant = self._tenant(request.tenant_id, context)
        size = page_size_of(request.page_size)
        after = page_after(request.page_token, tenant)
        page = await self._engine.list_documents(tenant, after=after, limit=size, tags=self._reader(context))
        token = "" if page.next_after is None else page_token(tenant, page.next_after)
        return index_pb.ListDocumentsResponse(
            documents=[convert.stored_document_to_proto(d) for d in page.documents], next_page_token=token
        )

    @unary_boundary
    async def GetDocument(self, request: index_pb.GetDocumentRequest, context: Context) -> index_pb.GetDocumentResponse:
        validate_document_id(request.document_id)
        tenant = self._tenant(request.tenant_id, context)
        document = await self._engine.get_document(tenant, request.document_id, tags=self._reader(context))
        if document is None:
            raise NotFound(f"no document {request.document_id!r} in tenant {tenant!r}")
        return index_pb.GetDocumentResponse(document=convert.stored_document_to_proto(document))

    @unary_boundary
    async def GetIndexStats(
        self, request: index_pb.GetIndexStatsRequest, context: Context
    ) -> index_pb.GetIndexStatsResponse:
        tenant = self._tenant(request.tenant_id, context)
        stats = await self._engine.stats(tenant, tags=self._reader(context))
        return convert.index_stats_to_proto(stats, await self._schema.declared(tenant))

    @unary_boundary
    async def GetUploadStatus(
        self, request: index_pb.GetUploadStatusRequest, context: Context
    ) -> index_pb.GetUploadStatusResponse:
        validate_document_id(request.document_id)
        tenant = self._tenant(request.tenant_id, context)
        size, tags = self._uploads.committed(tenant, request.document_id)
        return index_pb.GetUploadStatusResponse(committed_size=size if self._shows(tags, self._reader(context)) else 0)

    @unary_boundary
    async def UploadDocument(
        self, request_iterator: AsyncIterator[index_pb.UploadDocumentRequest], context: Context
    ) -> index_pb.UploadDocumentResponse:
        requests = aiter(request_iterator)
        try:
            return await self._upload(requests, context)
        except RagError:
            await _drained(requests, self._uploads.max_bytes)
            raise

    async def _upload(
        self, requests: AsyncIterator[index_pb.UploadDocumentRequest], context: Context
    ) -> index_pb.UploadDocumentResponse:
        first = await anext(requests, None)
        if first is None or not first.HasField("document"):
            raise InvalidRequest([FieldViolation("document", "the first message must carry the document")])
        if first.document.content:
            raise InvalidRequest([FieldViolation("document.content", "must be empty: send the content in data")])
        tenant = self._tenant(first.tenant_id, context)
        reader = self._reader(context)
        try:
            [document] = convert.documents_from_proto(
                index_pb.IngestDocumentsRequest(tenant_id=tenant, documents=[first.document]), tenant
            )
            validate_documents([document], self._indexer.sources)
        except InvalidRequest as exc:  # named as this request names them
            raise InvalidRequest(
                [FieldViolation(v.field.replace("documents[0]", "document"), v.description) for v in exc.violations]
            ) from exc
        async with self._uploads.writing(tenant, document.document_id) as upload:
            message: index_pb.UploadDocumentRequest | None = first
            while message is not None:
                _check_piece(message, first, tenant, upload.size if self._shows(upload.tags, reader) else 0)
                if message is first and message.write_offset == 0:
                    upload.begin(document.tags)  # a new upload, or one started over
                elif message is first:
                    _check_resumed(upload, document)
                await upload.append(message.data)
                if message.finish_write:
                    content = await upload.content()
                    if message.content_sha256 and hashlib.sha256(content).hexdigest() != message.content_sha256.lower():
                        upload.discard()
                        violation = "does not match the content received; the upload was dropped: start it over"
                        raise InvalidRequest([FieldViolation("content_sha256", violation)])
                    whole = dataclasses.replace(document, content=content)
                    if message.long_running:  # the operation holds the content: the upload is done with
                        operation = await self._submit_ingest([whole], hashlib.sha256(content).hexdigest(), context)
                        upload.discard()
                        return index_pb.UploadDocumentResponse(committed_size=len(content), operation=operation)
                    [result] = await self._ingest([whole], reader)
                    upload.discard()
                    return index_pb.UploadDocumentResponse(
                        committed_size=len(content), result=convert.ingest_result_to_proto(result, "document")
                    )
                message = await anext(requests, None)
            return index_pb.UploadDocumentResponse(committed_size=upload.size)


async def _drained(requests: AsyncIterator[index_pb.UploadDocumentRequest], max_bytes: int) -> None:
    """Reads and drops what the caller still sends of a refused upload (up to `max_bytes` of it), so that the
    status goes out after the caller has finished sending: grpc.aio clients report INTERNAL ("Internal error
    from Core") instead of the server's status when a write of theirs fails because the server ended the call
    early (grpc/grpc#36066)."""
    read = 0
    async for message in requests:
        read += len(message.data)
        if read > max_bytes:
            return


def _check_resumed(upload: Upload, document: domain.SourceDocument) -> None:
    """Raise InvalidRequest when a resumed upload's document has other tags than the document it was begun with:
    content sent under some tags is never ingested under others (start over instead)."""
    if upload.tags is not None and sorted(upload.tags) != sorted(document.tags):
        why = "differ from those the upload was begun with; start it over from write_offset 0"
        raise InvalidRequest([FieldViolation("document.tags", why)])


def _check_piece(
    message: index_pb.UploadDocumentRequest, first: index_pb.UploadDocumentRequest, tenant: str, received: int
) -> None:
    """Raise InvalidRequest for a message that does not continue the upload."""
    if message is not first and message.HasField("document"):
        raise InvalidRequest([FieldViolation("document", "only the first message may carry the document")])
    if message is not first and message.tenant_id.strip() not in ("", tenant):
        raise InvalidRequest([FieldViolation("tenant_id", "must be the first message's or empty")])
    if message.write_offset != received and not (message is first and message.write_offset == 0):
        violation = f"is {message.write_offset}, but the server holds {received} bytes of this upload"
        raise InvalidRequest([FieldViolation("write_offset", violation)])
