"""IngestDocuments and DeleteDocument over a real channel; what is ingested is answerable at once."""

from __future__ import annotations

import grpc
import pytest

from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb

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
    assert again.results[0].chunks_indexed == 2

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
