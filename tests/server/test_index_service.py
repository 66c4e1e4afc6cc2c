"""IndexService over a real channel: IngestDocuments and DeleteDocument (what is ingested is answerable at once),
the listing RPCs, and documents uploaded in pieces, larger than the server's message limit."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc
import pytest

from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.rpc_details import details_of
from tests.support.servers import connected, running_server

TENANT = "acme"
HANDBOOK = (
    "# Travel policy\n\nEmployees book flights through the travel desk at least fourteen days before departure.\n\n"
    "## Expenses\n\nHotel expenses are reimbursed up to 180 euros per night with an itemised receipt.\n"
)


def handbook(**overrides: object) -> index_pb.Document:
    fields = {"document_id": "handbook", "name": "handbook.md", "content": HANDBOOK.encode(), "media_type": "text/markdown"}
    return index_pb.Document(**{**fields, **overrides})


async def test_ingested_document_is_answerable_and_deletable(index_stub, rag_stub) -> None:
    response = await index_stub.IngestDocuments(
        index_pb.IngestDocumentsRequest(tenant_id=TENANT, documents=[handbook()]), timeout=30
    )
    [result] = response.results
    assert result.document_id == "handbook" and not result.error
    assert result.chunks_created == result.chunks_indexed == 2, "one chunk per markdown section"

    again = await index_stub.IngestDocuments(
        index_pb.IngestDocumentsRequest(tenant_id=TENANT, documents=[handbook()]), timeout=30
    )
    assert again.results[0].unchanged and again.results[0].chunks_indexed == 0, "nothing changed, nothing written"
    retagged = await index_stub.IngestDocuments(
        index_pb.IngestDocumentsRequest(tenant_id=TENANT, documents=[handbook(title="Handbook 2026")]), timeout=30
    )
    assert not retagged.results[0].unchanged and retagged.results[0].chunks_indexed == 2, "new metadata: re-indexed"

    question = pb.AskRequest(query="How much are hotel expenses reimbursed per night?", tenant_id=TENANT)
    answer = (await rag_stub.Ask(question, timeout=30)).answer
    assert answer.grounded and "180 euros" in answer.text
    [citation] = answer.citations
    assert citation.document_id == "handbook" and citation.section == "Expenses"

    deleted = await index_stub.DeleteDocument(
        index_pb.DeleteDocumentRequest(tenant_id=TENANT, document_id="handbook"), timeout=30
    )
    assert deleted.chunks_deleted == 2, "re-ingesting replaced the chunks instead of adding to them"
    after = (await rag_stub.Ask(question, timeout=30)).answer
    assert after.refusal_reason == pb.REFUSAL_REASON_NO_CHUNKS


async def test_deleting_an_unknown_document_is_not_found(index_stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await index_stub.DeleteDocument(index_pb.DeleteDocumentRequest(document_id="never-ingested"), timeout=30)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_bad_documents_are_invalid_argument_naming_each_field(index_stub) -> None:
    request = index_pb.IngestDocumentsRequest(
        documents=[handbook(document_id="bad id!"), handbook(media_type="image/png"), handbook(trust=2.0)]
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await index_stub.IngestDocuments(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = caught.value.details()
    for field in ("documents[0].document_id", "documents[1].media_type", "documents[2].trust"):
        assert field in details


async def test_empty_batch_is_invalid_argument(index_stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await index_stub.IngestDocuments(index_pb.IngestDocumentsRequest(), timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def markdown(document_id: str, text: str, **fields: object) -> index_pb.Document:
    return index_pb.Document(
        document_id=document_id, name=f"{document_id}.md", content=text.encode(), media_type="text/markdown", **fields
    )  # type: ignore[arg-type]


async def test_documents_are_listed_page_by_page_with_counts_sizes_hashes_and_times(index_stub) -> None:
    tenant = "listing"
    started = time.time()
    texts = {
        name: f"# {name.title()}\n\nThe {name} notes say {name} happens on Mondays.\n"
        for name in ("delta", "alpha", "echo", "charlie", "bravo")
    }
    texts["alpha"] += "\n## More\n\nA second section makes a second chunk.\n"
    await index_stub.IngestDocuments(
        index_pb.IngestDocumentsRequest(
            tenant_id=tenant, documents=[markdown(name, text, tags=["ops"]) for name, text in texts.items()]
        ),
        timeout=60,
    )

    pages: list[list[str]] = []
    token = ""
    listed: dict[str, index_pb.IndexedDocument] = {}
    while True:
        response = await index_stub.ListDocuments(
            index_pb.ListDocumentsRequest(tenant_id=tenant, page_size=2, page_token=token), timeout=30
        )
        pages.append([d.document_id for d in response.documents])
        listed.update((d.document_id, d) for d in response.documents)
        token = response.next_page_token
        if not token:
            break
    assert pages == [["alpha", "bravo"], ["charlie", "delta"], ["echo"]]
    alpha = listed["alpha"]
    assert (alpha.chunk_count, alpha.name, alpha.title, list(alpha.tags)) == (2, "alpha.md", "", ["ops"])
    assert alpha.size_bytes == len(texts["alpha"].encode()) and alpha.media_type == "text/markdown"
    assert alpha.content_sha256 == hashlib.sha256(texts["alpha"].encode()).hexdigest()
    assert started - 1 <= alpha.ingest_time.ToNanoseconds() / 1e9 <= time.time() + 1

    got = await index_stub.GetDocument(index_pb.GetDocumentRequest(tenant_id=tenant, document_id="alpha"), timeout=30)
    assert got.document == alpha
    stats = await index_stub.GetIndexStats(index_pb.GetIndexStatsRequest(tenant_id=tenant), timeout=30)
    assert (stats.document_count, stats.chunk_count) == (5, 6)
    assert stats.content_bytes == sum(len(t.encode()) for t in texts.values())
    assert stats.engine.startswith("embedded qdrant-edge")


async def test_listing_refuses_bad_pages_and_unknown_documents(index_stub) -> None:
    first = await index_stub.ListDocuments(index_pb.ListDocumentsRequest(page_size=1), timeout=30)
    assert first.next_page_token, "the demo corpus of the default tenant has more than one document"
    refusals = [
        (index_pb.ListDocumentsRequest(page_size=-1), "page_size"),
        (index_pb.ListDocumentsRequest(page_size=1001), "page_size"),
        (index_pb.ListDocumentsRequest(page_token="not-a-token"), "page_token"),
        # A token of one tenant's listing does not continue another's (AIP-158).
        (index_pb.ListDocumentsRequest(tenant_id="listing", page_token=first.next_page_token), "page_token"),
    ]
    for request, field in refusals:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await index_stub.ListDocuments(request, timeout=30)
        details = details_of(caught.value)
        assert details.code == grpc.StatusCode.INVALID_ARGUMENT and details.bad_request is not None
        assert [v.field for v in details.bad_request.field_violations] == [field]

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await index_stub.GetDocument(index_pb.GetDocumentRequest(document_id="never-ingested"), timeout=30)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    empty = await index_stub.GetIndexStats(index_pb.GetIndexStatsRequest(tenant_id="nobody"), timeout=30)
    assert (empty.document_count, empty.chunk_count, empty.content_bytes) == (0, 0, 0)


# A document several times larger than the upload server's message limit.
LIMIT = 8 * 1024
BIG = "".join(
    (f"## Part {i // 40}\n\n" if i % 40 == 0 else "")
    + f"The archive keeps shipment record {i} for {i + 3} years in cold storage room {i % 7}. "
    for i in range(400)
).encode()


def pieces(
    document: index_pb.Document,
    content: bytes,
    *,
    start: int = 0,
    size: int = 4096,
    finish: bool = True,
    tenant: str = "archive",
    sha: str = "",
) -> list[index_pb.UploadDocumentRequest]:
    """The messages of an upload of content[start:], the first carrying the document."""
    messages = []
    for offset in range(start, len(content), size):
        messages.append(index_pb.UploadDocumentRequest(write_offset=offset, data=content[offset : offset + size]))
    if not messages:
        messages.append(index_pb.UploadDocumentRequest(write_offset=start))
    messages[0].tenant_id = tenant
    messages[0].document.CopyFrom(document)
    messages[-1].finish_write = finish
    messages[-1].content_sha256 = sha if finish else ""
    return messages


async def stream(messages: Sequence[index_pb.UploadDocumentRequest]) -> AsyncIterator[index_pb.UploadDocumentRequest]:
    for message in messages:
        yield message


@pytest.fixture(scope="module")
async def upload_stub(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[index_service_pb2_grpc.IndexServiceStub]:
    data = tmp_path_factory.mktemp("upload-data")
    async with running_server(
        data, demo_corpus=False, max_receive_message_bytes=LIMIT, max_document_bytes=len(BIG) + 10
    ) as server:
        async with connected(server) as stubs:
            yield stubs.index


async def test_a_document_larger_than_the_message_limit_is_ingested_in_pieces(upload_stub) -> None:
    document = index_pb.Document(document_id="shipments", name="shipments.md", media_type="text/markdown")
    whole = index_pb.IngestDocumentsRequest(tenant_id="archive", documents=[markdown("shipments", BIG.decode())])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await upload_stub.IngestDocuments(whole, timeout=30)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, "one message cannot carry it"

    sha = hashlib.sha256(BIG).hexdigest()
    response = await upload_stub.UploadDocument(stream(pieces(document, BIG, sha=sha)), timeout=120)

    assert response.committed_size == len(BIG) > 3 * LIMIT
    assert response.result.document_id == "shipments" and not response.result.error
    assert response.result.chunks_indexed >= 20
    indexed = (
        await upload_stub.GetDocument(index_pb.GetDocumentRequest(tenant_id="archive", document_id="shipments"), timeout=30)
    ).document
    assert (indexed.size_bytes, indexed.content_sha256, indexed.chunk_count) == (len(BIG), sha, response.result.chunks_indexed)
    status = await upload_stub.GetUploadStatus(
        index_pb.GetUploadStatusRequest(tenant_id="archive", document_id="shipments"), timeout=30
    )
    assert status.committed_size == 0, "a finished upload leaves nothing behind"


async def test_an_interrupted_upload_resumes_where_it_stopped(upload_stub) -> None:
    document = index_pb.Document(document_id="resumed", name="resumed.md", media_type="text/markdown")
    content = BIG[: 6 * 4096 + 100]
    status_request = index_pb.GetUploadStatusRequest(tenant_id="archive", document_id="resumed")

    first = pieces(document, content, finish=False)[:3]  # the stream ends after three pieces
    assert (await upload_stub.UploadDocument(stream(first), timeout=30)).committed_size == 3 * 4096
    assert (await upload_stub.GetUploadStatus(status_request, timeout=30)).committed_size == 3 * 4096

    with pytest.raises(grpc.aio.AioRpcError) as caught:  # resuming from the wrong place
        await upload_stub.UploadDocument(stream(pieces(document, content, start=2 * 4096)), timeout=30)
    details = details_of(caught.value)
    assert details.code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.bad_request is not None and details.bad_request.field_violations[0].field == "write_offset"
    assert "12288 bytes" in details.message
    assert (await upload_stub.GetUploadStatus(status_request, timeout=30)).committed_size == 3 * 4096

    sha = hashlib.sha256(content).hexdigest()
    done = await upload_stub.UploadDocument(stream(pieces(document, content, start=3 * 4096, sha=sha)), timeout=60)
    assert done.committed_size == len(content) and done.result.chunks_indexed > 0 and not done.result.error
    indexed = (
        await upload_stub.GetDocument(index_pb.GetDocumentRequest(tenant_id="archive", document_id="resumed"), timeout=30)
    ).document
    assert indexed.content_sha256 == sha


async def test_an_upload_refused_at_its_first_piece_gets_its_status_not_internal(upload_stub) -> None:
    """The server refuses the first piece while the client still sends twenty more: it reads them before it
    answers, else grpc.aio clients often saw INTERNAL "Internal error from Core" (44 of 60 calls before the fix)."""
    document = index_pb.Document(document_id="refused-early", name="refused.md", media_type="text/markdown")
    for _ in range(20):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await upload_stub.UploadDocument(stream(pieces(document, BIG, start=4096, size=2048)), timeout=30)
        details = details_of(caught.value)
        assert details.code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert details.bad_request is not None and details.bad_request.field_violations[0].field == "write_offset"


async def test_a_bad_upload_is_refused_and_dropped(upload_stub) -> None:
    document = index_pb.Document(document_id="broken", name="broken.md", media_type="text/markdown")
    status_request = index_pb.GetUploadStatusRequest(tenant_id="archive", document_id="broken")
    cases = [
        (pieces(document, b"some text", sha="0" * 64), "content_sha256"),
        (pieces(document, BIG + b"x" * 20), "data"),  # over RAG_MAX_DOCUMENT_BYTES
        (pieces(index_pb.Document(document_id="bad id!"), b"text"), "document.document_id"),
        (pieces(index_pb.Document(document_id="x", content=b"inline"), b"text"), "document.content"),
        ([index_pb.UploadDocumentRequest(data=b"no document first")], "document"),
    ]
    for messages, field in cases:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await upload_stub.UploadDocument(stream(messages), timeout=60)
        details = details_of(caught.value)
        assert details.code == grpc.StatusCode.INVALID_ARGUMENT, (field, details)
        assert details.bad_request is not None and details.bad_request.field_violations[0].field == field
        assert (await upload_stub.GetUploadStatus(status_request, timeout=30)).committed_size == 0


async def test_unfinished_uploads_survive_a_restart(tmp_path: Path) -> None:
    document = index_pb.Document(document_id="restarted", name="restarted.md", media_type="text/markdown")
    status_request = index_pb.GetUploadStatusRequest(document_id="restarted")
    content = BIG[:3000]
    async with running_server(tmp_path, demo_corpus=False) as server:
        async with connected(server) as stubs:
            await stubs.index.UploadDocument(stream(pieces(document, content, size=1000, finish=False, tenant="")[:2]))
    async with running_server(tmp_path, demo_corpus=False) as server:
        async with connected(server) as stubs:
            assert (await stubs.index.GetUploadStatus(status_request, timeout=30)).committed_size == 2000
            done = await stubs.index.UploadDocument(
                stream(pieces(document, content, start=2000, size=1000, tenant="")), timeout=60
            )
    assert done.committed_size == 3000 and not done.result.error
