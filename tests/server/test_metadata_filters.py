"""Document metadata and filters through the real gRPC server, on both engines (the embedded qdrant-edge, and the
Qdrant server engine over qdrant-client's local mode): typed metadata in, declared keys and trust weights out,
filter expressions in Ask, AskStream and SimulateAsk applied inside the engine, and every way they are refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import grpc
import pytest
from google.protobuf import timestamp_pb2
from qdrant_client import AsyncQdrantClient

from ragsvc.retrieval.base import VectorEngine
from ragsvc.retrieval.qdrant_server import QdrantServerEngine
from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.conftest import shared_embedder
from tests.support.rpc_details import details_of
from tests.support.servers import Stubs, connected, running_server

TENANT = "acme"
QUESTION = "What does a valid contract require?"


def value(raw: str | float | bool | datetime) -> index_pb.MetadataValue:
    if isinstance(raw, bool):
        return index_pb.MetadataValue(bool_value=raw)
    if isinstance(raw, float | int):
        return index_pb.MetadataValue(number_value=raw)
    if isinstance(raw, datetime):
        stamp = timestamp_pb2.Timestamp()
        stamp.FromDatetime(raw)
        return index_pb.MetadataValue(timestamp_value=stamp)
    return index_pb.MetadataValue(string_value=raw)


def document(document_id: str, text: str, metadata: dict[str, str | float | bool | datetime],
             **fields: object) -> index_pb.Document:  # fmt: skip
    return index_pb.Document(document_id=document_id, name=f"{document_id}.md", content=text.encode(),
                             media_type="text/markdown", metadata={k: value(v) for k, v in metadata.items()},
                             **fields)  # type: ignore[arg-type]  # fmt: skip


CORPUS = [
    document(
        "contract-act",
        "# Contract Act, section 10\n\nA valid contract requires free consent of parties "
        "competent to contract, a lawful consideration and a lawful object.",
        {"jurisdiction": "India", "year": 1872, "binding": True, "source_type": "statute"},
        published_date="1872-09-01",
    ),
    document(
        "uk-judgment",
        "# Judgment on formation\n\nThe court held that a valid contract requires offer, acceptance, "
        "consideration and an intention to create legal relations.",
        {
            "jurisdiction": "UK",
            "year": 2019,
            "binding": True,
            "source_type": "high_court",
            "published_at": datetime(2019, 5, 1, 10, tzinfo=UTC),
        },
    ),
    document(
        "blog-post",
        "# Contracts explained\n\nIn plain words, a valid contract requires that both sides agree "
        "and that something of value is exchanged.",
        {"jurisdiction": "India", "year": 2024, "binding": False},
        published_date="2024-03-01",
    ),
    document(
        "study-notes",
        "# Study notes on contracts\n\nElements a valid contract requires: agreement, capacity, consideration, legality.",
        {"year": 2021.5, "source_type": "secondary"},
        trust=0.8,
    ),
]


@pytest.fixture(scope="module", params=["edge", "qdrant-client"])
async def stubs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stubs]:
    """A server with CORPUS ingested into TENANT, on each engine."""
    engine: VectorEngine | None = None
    if request.param == "qdrant-client":
        engine = await QdrantServerEngine.create(AsyncQdrantClient(location=":memory:"), dimension=384)
    try:
        async with (
            running_server(
                tmp_path_factory.mktemp("data"), embedder=shared_embedder(), engine=engine, demo_corpus=False
            ) as server,  # fmt: skip
            connected(server) as stubs,
        ):
            response = await stubs.index.IngestDocuments(
                index_pb.IngestDocumentsRequest(tenant_id=TENANT, documents=CORPUS), timeout=60
            )
            assert [r.error for r in response.results] == [""] * len(CORPUS)
            yield stubs
    finally:
        if engine is not None:
            await engine.close()


def ask(expression: str, **fields: object) -> pb.AskRequest:
    return pb.AskRequest(query=QUESTION, tenant_id=TENANT, explain=True,
                         retrieval=pb.RetrievalOptions(filter=pb.MetadataFilter(expression=expression), **fields))  # type: ignore[arg-type]  # fmt: skip


def used(answer: pb.Answer) -> set[str]:
    """The documents an answer drew on: its packed chunks, or a refusal's candidates."""
    return {c.document_id for c in [*answer.explanation.packed_chunks, *answer.candidates]}


async def test_declared_keys_types_and_trust_weights_are_reported(stubs: Stubs) -> None:
    stats = await stubs.index.GetIndexStats(index_pb.GetIndexStatsRequest(tenant_id=TENANT), timeout=30)
    assert [(k.name, k.type) for k in stats.metadata_keys] == [
        ("binding", "bool"), ("jurisdiction", "string"), ("published_at", "timestamp"), ("source_type", "string"),
        ("year", "number"),
    ]  # fmt: skip
    documents = {
        d.document_id: d for d in (await stubs.index.ListDocuments(index_pb.ListDocumentsRequest(tenant_id=TENANT))).documents
    }
    blog = documents["blog-post"]
    assert blog.metadata["source_type"].string_value == "user_upload" and blog.trust == 0.5, "an upload: half trusted"
    assert blog.metadata["published_at"].timestamp_value.ToDatetime() == datetime(2024, 3, 1)
    assert blog.metadata["binding"].WhichOneof("kind") == "bool_value" and not blog.metadata["binding"].bool_value
    assert documents["contract-act"].trust == 1.0 and documents["uk-judgment"].trust == pytest.approx(0.9)
    assert documents["study-notes"].trust == pytest.approx(0.8), "a document's own trust wins over its type's"
    got = await stubs.index.GetDocument(index_pb.GetDocumentRequest(tenant_id=TENANT, document_id="uk-judgment"))
    assert got.document.metadata["year"].number_value == 2019
    assert got.document.metadata["published_at"].timestamp_value.ToDatetime() == datetime(2019, 5, 1, 10)


async def test_filters_apply_inside_the_engine_in_every_answering_rpc(stubs: Stubs) -> None:
    # top_k 1: a filter applied after the search would find nothing left of the best chunk overall.
    answer = (await stubs.rag.Ask(ask("jurisdiction = UK", top_k=1), timeout=30)).answer
    assert used(answer) == {"uk-judgment"} and answer.refusal_reason == pb.REFUSAL_REASON_NONE

    stream = stubs.rag.AskStream(
        pb.AskStreamRequest(query=QUESTION, tenant_id=TENANT, explain=True, retrieval=pb.RetrievalOptions(
            filter=pb.MetadataFilter(expression="year >= 2000 AND NOT source_type = user_upload"))),
        timeout=30,
    )  # fmt: skip
    [final] = [m.answer async for m in stream if m.WhichOneof("event") == "answer"]
    assert used(final) <= {"uk-judgment", "study-notes"} and used(final)

    simulated = await stubs.admin.SimulateAsk(admin_pb.SimulateAskRequest(request=ask("published_at >= 2024-01-01")))
    assert used(simulated.answer) == {"blog-post"}
    either = await stubs.rag.Ask(ask('jurisdiction IN (India, "Sri Lanka") AND binding = true OR year = 2021.5'))
    assert used(either.answer) <= {"contract-act", "study-notes"} and used(either.answer)
    dated = await stubs.rag.Ask(ask("published_at = 2019-05-01"))  # a date is its whole day
    assert used(dated.answer) == {"uk-judgment"}
    # Filters combine with the list filters of the same message.
    both = await stubs.rag.Ask(ask("year < 2020", top_k=3))
    assert used(both.answer) <= {"contract-act", "uk-judgment"} and used(both.answer)


async def test_a_filter_matching_nothing_is_a_refusal_not_an_error(stubs: Stubs) -> None:
    answer = (await stubs.rag.Ask(ask("year > 3000"), timeout=30)).answer
    assert answer.refusal_reason == pb.REFUSAL_REASON_NO_CHUNKS and not answer.citations


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("jurisdicton = UK", "jurisdicton: no document of this tenant declares this metadata key"),
        ("year >= nineteen", "year: 'nineteen' is not a number"),
        ("jurisdiction < UK", "jurisdiction: < needs a number or timestamp key"),
        ("year >", "expected a value, found the end at character 7"),
    ],
)
async def test_filters_that_cannot_apply_are_invalid_arguments_naming_the_problem(
    stubs: Stubs, expression: str, why: str
) -> None:
    simulate = admin_pb.SimulateAskRequest(request=ask(expression))
    calls = {
        "Ask": (lambda: stubs.rag.Ask(ask(expression), timeout=30), "retrieval.filter.expression"),
        "SimulateAsk": (lambda: stubs.admin.SimulateAsk(simulate, timeout=30), "request.retrieval.filter.expression"),
    }
    for name, (call, field) in calls.items():
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call()
        details = details_of(caught.value)
        assert (details.code, details.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_ERROR"), name
        assert details.bad_request is not None
        [violation] = details.bad_request.field_violations
        assert violation.field == field and violation.description.startswith(why), (name, violation)
    stream = stubs.rag.AskStream(pb.AskStreamRequest(query=QUESTION, tenant_id=TENANT, retrieval=pb.RetrievalOptions(
        filter=pb.MetadataFilter(expression=expression))), timeout=30)  # fmt: skip
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        [m async for m in stream]
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_keys_are_the_tenants_own(stubs: Stubs) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.rag.Ask(pb.AskRequest(query=QUESTION, tenant_id="globex", retrieval=pb.RetrievalOptions(
            filter=pb.MetadataFilter(expression="year > 1"))))  # fmt: skip
    assert "declared: none" in details_of(caught.value).bad_request.field_violations[0].description


async def test_a_key_keeps_the_type_its_first_document_gave_it(stubs: Stubs) -> None:
    response = await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id=TENANT, documents=[
        document("draft", "# Draft\n\nA draft contract.", {"year": "nineteen", "binding": "yes"}),
        document("other", "# Other\n\nAnother contract text about leases.", {"year": 2001}),
    ]), timeout=60)  # fmt: skip
    draft, other = response.results
    assert draft.error == ("metadata key 'binding' is a bool in this tenant, not a string; "
                           "metadata key 'year' is a number in this tenant, not a string")  # fmt: skip
    assert draft.chunks_indexed == 0 and not other.error and other.chunks_indexed == 1
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.index.GetDocument(index_pb.GetDocumentRequest(tenant_id=TENANT, document_id="draft"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    await stubs.index.DeleteDocument(index_pb.DeleteDocumentRequest(tenant_id=TENANT, document_id="other"))


async def test_bad_metadata_is_an_invalid_argument_naming_each_field(stubs: Stubs) -> None:
    bad = [
        document("a", "text", {"bad key": "x", "source_type": "rumour"}),
        index_pb.Document(document_id="b", content=b"text", metadata={"empty": index_pb.MetadataValue()}),
        document("c", "text", {"published_at": "2024-01-01", "note": "x" * 513}, published_date="yesterday"),
        document("d", "text", {"published_at": datetime(2024, 1, 2, tzinfo=UTC)}, published_date="2024-01-01"),
    ]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id=TENANT, documents=bad[1:2]))
    details = details_of(caught.value)
    assert [(v.field, v.description) for v in details.bad_request.field_violations] == [
        ('documents[0].metadata["empty"]', "sets no value")
    ]
    expected = [
        ['documents[0].metadata["bad key"]', 'documents[0].metadata["source_type"]'],
        ['documents[0].metadata["note"]', 'documents[0].metadata["published_at"]', "documents[0].published_date",
         "documents[1].published_date"],
    ]  # fmt: skip
    descriptions = {}
    for documents, fields in zip((bad[:1], bad[2:]), expected, strict=True):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id=TENANT, documents=documents))
        details = details_of(caught.value)
        assert details.code == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in details.bad_request.field_violations] == fields
        descriptions |= {v.field: v.description for v in details.bad_request.field_violations}
    assert "statute" in descriptions['documents[0].metadata["source_type"]'], "the known source types are listed"
    assert descriptions["documents[1].published_date"] == "differs from metadata published_at: set one of them"


async def test_a_trusted_source_outranks_an_upload_of_the_same_text(stubs: Stubs) -> None:
    """Two documents of the same text: one is a near-duplicate of the other, and ranking keeps the one whose source
    type is trusted more, whichever it is."""
    text = "# Refunds\n\nThe statutory refund window for a cancelled order is thirty days from delivery."
    for trusted, upload in (("refunds-a", "refunds-b"), ("refunds-b", "refunds-a")):
        documents = [document(trusted, text, {"source_type": "statute"}), document(upload, text, {})]
        await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id="shop", documents=documents))
        answer = (await stubs.rag.Ask(pb.AskRequest(query="How long is the refund window?", tenant_id="shop",
                                                    explain=True), timeout=30)).answer  # fmt: skip
        assert [c.document_id for c in answer.explanation.packed_chunks] == [trusted]
