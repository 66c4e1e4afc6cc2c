"""The files of issue 31's table, each sent through IngestDocuments to a real server: each gets its clear error,
typed as a call's would be (DocumentResult.failure), or is ingested; each within a bound; nothing of a refused
document is written (the engine holds none of it, and a version indexed before stays whole); the server keeps
serving. The time bounds are properties ("never 90 s"), with room for a loaded machine; bench/hostile_inputs.py
measures the times."""

from __future__ import annotations

import io
import random
import time

import grpc
import pytest
from google.rpc import code_pb2
from grpc_health.v1 import health_pb2
from pypdf import PdfWriter

from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.rpc_details import details_of
from tests.support.servers import Stubs

BOUND_S = 30.0  # each call's deadline: the table's inputs took 90 s, or ran past a client's 120 s


def document(document_id: str, content: bytes, media_type: str = "text/plain") -> index_pb.Document:
    return index_pb.Document(document_id=document_id, name=document_id, content=content, media_type=media_type)


async def ingest(stubs: Stubs, tenant: str, *documents: index_pb.Document) -> list[index_pb.DocumentResult]:
    started = time.monotonic()
    response = await stubs.index.IngestDocuments(
        index_pb.IngestDocumentsRequest(tenant_id=tenant, documents=documents), timeout=BOUND_S
    )
    assert time.monotonic() - started < BOUND_S
    return list(response.results)


async def assert_nothing_written(stubs: Stubs, tenant: str) -> None:
    stats = await stubs.index.GetIndexStats(index_pb.GetIndexStatsRequest(tenant_id=tenant), timeout=10)
    assert (stats.document_count, stats.chunk_count) == (0, 0)


def refusal(result: index_pb.DocumentResult) -> index_pb.DocumentFailure:
    """The failure of a refused document, after what every refusal shares."""
    assert result.HasField("failure") and result.error == result.failure.message
    assert (result.chunks_created, result.chunks_indexed, result.failure.code) == (0, 0, code_pb2.INVALID_ARGUMENT)
    return result.failure


async def test_a_latin1_file_is_read_in_windows_1252_and_says_so(stubs: Stubs) -> None:
    text = "Refunds are paid within fourteen days of the request, signed by the caf\xe9 manager \xff.\n"
    [result] = await ingest(stubs, "bad-latin", document("refunds", text.encode("latin-1")))
    assert (result.error, result.encoding, result.chunks_indexed) == ("", "windows-1252", 1)
    stored = await stubs.index.GetDocument(index_pb.GetDocumentRequest(tenant_id="bad-latin", document_id="refunds"))
    assert stored.document.encoding == "windows-1252"
    answer = (await stubs.rag.Ask(pb.AskRequest(query="When are refunds paid?", tenant_id="bad-latin"), timeout=30)).answer
    assert answer.grounded and "fourteen days" in answer.text and "café manager ÿ" in answer.citations[0].snippet


async def test_png_bytes_sent_as_markdown_are_refused_as_an_image(stubs: Stubs) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(31).randbytes(2000)
    [result] = await ingest(stubs, "bad-png", document("logo", png, "text/markdown"))
    failure = refusal(result)
    assert failure.message == "content looks like a PNG image, not text/markdown"
    assert failure.reason == "VALIDATION_ERROR"
    assert [(v.field, v.description) for v in failure.field_violations] == [
        ("documents[0].content", "looks like a PNG image, not text/markdown")
    ]
    await assert_nothing_written(stubs, "bad-png")


async def test_200000_nested_divs_are_refused_at_once_naming_the_depth_limit(stubs: Stubs) -> None:
    page = ("<html><body>" + "<div>" * 200_000 + "deep" + "</div>" * 200_000 + "</body></html>").encode()
    assert len(page) > 2_200_000
    [result] = await ingest(stubs, "bad-divs", document("nested", page, "text/html"))
    failure = refusal(result)
    assert (failure.reason, dict(failure.metadata)) == (
        "DOCUMENT_LIMIT_EXCEEDED",
        {"limit": "RAG_INGEST_MAX_HTML_DEPTH", "maximum": "1000"},
    )
    assert [v.field for v in failure.field_violations] == ["documents[0].content"]
    assert result.elapsed.ToTimedelta().total_seconds() < 5, "refused before the parser saw it"
    await assert_nothing_written(stubs, "bad-divs")


async def test_a_5mb_text_fails_fast_naming_the_call_limit_and_what_to_use(stubs: Stubs) -> None:
    """A million words make ~7,000 chunks, ~8 minutes of embedding on two cores: past RAG_INGEST_MAX_CALL_CHUNKS
    the document is refused before any is embedded, so the call answers at once instead of running past the
    client's deadline; a small document of the same call is still indexed."""
    rng = random.Random(5)
    words = "the of and to in is for desk hotel pays trip cost plan team week travel budget receipt".split()
    chosen = rng.choices(words, k=1_000_000)
    big = "\n".join(" ".join(chosen[i : i + 15]) for i in range(0, len(chosen), 15)).encode()
    assert 4_500_000 < len(big) < 5_500_000
    small = document("note", b"The travel desk opens at nine.")
    started = time.monotonic()
    results = await ingest(stubs, "bad-big", small, document("big", big))
    assert time.monotonic() - started < BOUND_S
    assert results[0].chunks_indexed == 1 and not results[0].error
    failure = refusal(results[1])
    assert failure.message == (
        "content makes more than 1000 chunks; the limit is RAG_INGEST_MAX_CALL_CHUNKS=1000; ingest it as a "
        "long-running operation with IndexService.SubmitIngest, which reports its progress"
    )
    assert dict(failure.metadata) == {"limit": "RAG_INGEST_MAX_CALL_CHUNKS", "maximum": "1000"}
    assert [v.field for v in failure.field_violations] == ["documents[1].content"]
    listed = await stubs.index.ListDocuments(index_pb.ListDocumentsRequest(tenant_id="bad-big"), timeout=10)
    assert [d.document_id for d in listed.documents] == ["note"], "nothing of the big one was written"


async def test_a_path_as_tenant_is_refused(stubs: Stubs) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ingest(stubs, "../x", document("doc", b"text"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in details_of(caught.value).bad_request.field_violations] == ["tenant_id"]


def blank_pdf(pages: int) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("content", "media_type", "message"),
    [
        (b"%PDF-1.7\n" + random.Random(7).randbytes(50_000), "application/pdf", "content is not a readable PDF: "),
        (blank_pdf(3000), "application/pdf", "content has no text"),
        (b"", "text/plain", "content has no text"),
    ],
    ids=["random-bytes-behind-pdf-header", "3000-blank-pages", "empty-file"],
)
async def test_the_inputs_that_already_had_clear_errors_keep_them(
    stubs: Stubs, content: bytes, media_type: str, message: str
) -> None:
    [result] = await ingest(stubs, "bad-other", document("other", content, media_type))
    assert refusal(result).message.startswith(message)
    await assert_nothing_written(stubs, "bad-other")


async def test_a_refused_new_version_leaves_the_indexed_one_whole(stubs: Stubs) -> None:
    text = b"# Expenses\n\nHotels are reimbursed up to 180 euros a night.\n\n# Meals\n\nMeals up to 40 euros a day.\n"
    [first] = await ingest(stubs, "bad-versions", document("expenses", text, "text/markdown"))
    before = await stubs.index.GetDocument(index_pb.GetDocumentRequest(tenant_id="bad-versions", document_id="expenses"))
    [again] = await ingest(stubs, "bad-versions", document("expenses", b"\x7fELF\x02\x01\x01" + bytes(100)))
    assert refusal(again).message == "content looks like an ELF executable, not text/plain"
    after = await stubs.index.GetDocument(index_pb.GetDocumentRequest(tenant_id="bad-versions", document_id="expenses"))
    assert first.chunks_indexed == 2 and after.document == before.document


async def test_the_server_still_serves_after_the_table(stubs: Stubs) -> None:
    health = await stubs.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
