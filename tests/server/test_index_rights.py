"""Index rights bounded by tags (issue 28 item 8), the issue's own story through the real gRPC server with
authentication on, on both engines: an indexing key of tenant acme without the finance tag may not list, read,
count, delete, replace or resume the upload of a finance document; it gets NOT_FOUND (or the answer for "none"),
never PERMISSION_DENIED, so the document's existence is not revealed. The random programs of
tests/server/test_access_property.py check the same rule for every key."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from qdrant_client import AsyncQdrantClient

from ragsvc.retrieval.base import VectorEngine
from ragsvc.retrieval.qdrant_server import QdrantServerEngine
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.conftest import shared_embedder
from tests.support.rpc_details import details_of
from tests.support.servers import Stubs, connected, running_server

KEYS = {"keys": [
    {"name": "finance-indexer", "token": "tok-finance", "tenant": "acme", "tags": ["finance"], "index": True},
    {"name": "ops-indexer", "token": "tok-ops", "tenant": "acme", "tags": ["ops"], "index": True},
    {"name": "all-indexer", "token": "tok-all", "tenant": "acme", "tags": ["*"], "index": True},
]}  # fmt: skip
REPORT = "# Q3 report\n\nThe quarterly revenue was 4.2 million euros."


def key(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer tok-{token}"),)


@pytest.fixture(params=["edge", "qdrant-client"])
async def stubs(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stubs]:
    engine: VectorEngine | None = None
    if request.param == "qdrant-client":
        engine = await QdrantServerEngine.create(AsyncQdrantClient(location=":memory:"), dimension=384)
    (tmp_path / "keys.json").write_text(json.dumps(KEYS))
    try:
        async with (
            running_server(
                tmp_path / "data",
                embedder=shared_embedder(),
                engine=engine,
                demo_corpus=False,
                auth_enabled=True,
                api_keys_file=str(tmp_path / "keys.json"),
            ) as server,  # fmt: skip
            connected(server) as stubs,
        ):
            yield stubs
    finally:
        if engine is not None:
            await engine.close()


def report(**fields: object) -> index_pb.Document:
    return index_pb.Document(**{"document_id": "q3-report", "name": "q3.md", "content": REPORT.encode(),  # type: ignore[arg-type]
                                "media_type": "text/markdown", "tags": ["finance"], **fields})  # fmt: skip


async def test_a_key_without_the_tag_cannot_see_count_read_delete_or_replace_the_document(stubs: Stubs) -> None:
    ingest = index_pb.IngestDocumentsRequest(documents=[report()])
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.index.IngestDocuments(ingest, metadata=key("ops"))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, "writing a tag the key lacks: as before"
    [done] = (await stubs.index.IngestDocuments(ingest, metadata=key("finance"))).results
    assert not done.error
    runbook = index_pb.Document(document_id="runbook", content=b"# Runbook\n\nRestart the ledger service nightly.",
                                media_type="text/markdown")  # fmt: skip
    await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(documents=[runbook]), metadata=key("ops"))

    for token, visible in (("ops", ["runbook"]), ("finance", ["q3-report", "runbook"]), ("all", ["q3-report", "runbook"])):
        listed = await stubs.index.ListDocuments(index_pb.ListDocumentsRequest(), metadata=key(token))
        assert [d.document_id for d in listed.documents] == visible, token
        stats = await stubs.index.GetIndexStats(index_pb.GetIndexStatsRequest(), metadata=key(token))
        assert stats.document_count == len(visible) and stats.chunk_count == len(visible), token

    get = index_pb.GetDocumentRequest(document_id="q3-report")
    delete = index_pb.DeleteDocumentRequest(document_id="q3-report")
    for call in (stubs.index.GetDocument(get, metadata=key("ops")), stubs.index.DeleteDocument(delete, metadata=key("ops")),
                 stubs.index.GetDocument(index_pb.GetDocumentRequest(document_id="nothing"), metadata=key("ops"))):  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        details = details_of(caught.value)
        assert details.code == grpc.StatusCode.NOT_FOUND and "tenant 'acme'" in details.message
    # Replacing it through an ingest of the same id is refused in the result; the document stays as it was.
    [replaced] = (await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(documents=[report(tags=[])]),
                                                    metadata=key("ops"))).results  # fmt: skip
    assert "this key's tags do not show" in replaced.error and replaced.chunks_indexed == 0
    kept = await stubs.index.GetDocument(get, metadata=key("finance"))
    assert list(kept.document.tags) == ["finance"]
    answer = await stubs.rag.Ask(pb.AskRequest(query="What was the quarterly revenue?"), metadata=key("finance"))
    assert "4.2 million" in answer.answer.text, "the finance key still reads it"

    assert (await stubs.index.DeleteDocument(delete, metadata=key("finance"))).chunks_deleted == 1


async def test_an_upload_is_seen_and_resumed_only_by_keys_its_tags_show(stubs: Stubs) -> None:
    header = report(content=b"")

    def piece(offset: int, data: bytes, *, document: index_pb.Document | None = header) -> index_pb.UploadDocumentRequest:
        return index_pb.UploadDocumentRequest(document=document, write_offset=offset, data=data)

    held = await stubs.index.UploadDocument(iter([piece(0, REPORT.encode()[:20])]), metadata=key("finance"))
    assert held.committed_size == 20
    status = index_pb.GetUploadStatusRequest(document_id="q3-report")
    assert (await stubs.index.GetUploadStatus(status, metadata=key("finance"))).committed_size == 20
    assert (await stubs.index.GetUploadStatus(status, metadata=key("all"))).committed_size == 20
    assert (await stubs.index.GetUploadStatus(status, metadata=key("ops"))).committed_size == 0, "as if none"

    # The ops key cannot resume it (to it, the server holds nothing), nor finish it under tags of its own.
    untagged = report(content=b"", tags=[])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.index.UploadDocument(iter([piece(20, REPORT.encode()[20:], document=untagged)]), metadata=key("ops"))
    violations = details_of(caught.value).bad_request.field_violations
    assert [(v.field, v.description) for v in violations] == [
        ("write_offset", "is 20, but the server holds 0 bytes of this upload")
    ]
    # A key that sees it may not finish it under other tags either: content sent as finance stays finance.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.index.UploadDocument(iter([piece(20, REPORT.encode()[20:], document=untagged)]), metadata=key("all"))
    assert [v.field for v in details_of(caught.value).bad_request.field_violations] == ["document.tags"]

    finished = await stubs.index.UploadDocument(
        iter([index_pb.UploadDocumentRequest(document=header, write_offset=20, data=REPORT.encode()[20:],
                                             finish_write=True)]), metadata=key("finance"))  # fmt: skip
    assert finished.committed_size == len(REPORT.encode()) and finished.result.chunks_indexed == 1
    assert (await stubs.index.GetUploadStatus(status, metadata=key("finance"))).committed_size == 0
