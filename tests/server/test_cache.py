"""The answer cache over a real channel: hits that are flagged, streamed whole, never crossing tenants or tag
sets, and dropped when a tenant's documents or a template change (its unit behaviour is tested in
tests/answering/test_cache.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ragsvc.server.app import RagServer
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.servers import Stubs, connected, running_server


@pytest.fixture(scope="module")
async def cached(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    # Every grounded answer CITEd, so cacheable whatever the reader's calibration.
    async with running_server(tmp_path_factory.mktemp("cache-data"), cache_max_entries=100) as server:
        async with connected(server) as stubs:
            for tenant, amount in (("acme", "12000"), ("globex", "300")):
                document = index_pb.Document(
                    document_id="travel",
                    name="travel.md",
                    media_type="text/markdown",
                    tags=["finance"],
                    content=f"# Travel\n\nThe travel budget of the finance team is {amount} euros a quarter.".encode(),
                )
                await stubs.index.IngestDocuments(
                    index_pb.IngestDocumentsRequest(tenant_id=tenant, documents=[document]), timeout=30
                )
        yield server


@pytest.fixture(scope="module")
async def cache_stubs(cached: RagServer) -> AsyncIterator[Stubs]:
    async with connected(cached) as stubs:
        yield stubs


@pytest.fixture
def rag(cache_stubs: Stubs) -> rag_service_pb2_grpc.RagServiceStub:
    return cache_stubs.rag


@pytest.fixture
def index(cache_stubs: Stubs) -> index_service_pb2_grpc.IndexServiceStub:
    return cache_stubs.index


async def ask(rag, query: str, **fields: object) -> pb.Answer:
    return (await rag.Ask(pb.AskRequest(query=query, **fields), timeout=30)).answer


async def test_a_repeated_question_is_served_from_the_cache(rag) -> None:
    query = "What happens on SIGTERM?"
    first = await ask(rag, query)
    assert first.grounded and not first.flags.cache_hit
    second = await ask(rag, "  what happens ON sigterm? ")  # the same question, normalised
    assert second.flags.cache_hit and second.text == first.text
    assert [c.source_id for c in second.citations] == [c.source_id for c in first.citations]
    assert second.request_id != first.request_id
    # No stage ran (the only timing is the total); the usage is what the original answer cost.
    assert second.usage == first.usage and first.usage.completion_tokens > 0
    assert second.timings.total.ToNanoseconds() > 0 and second.timings.retrieval.ToNanoseconds() == 0

    # AskStream with a hit: the whole text as one delta, the citations, then the answer.
    messages = [m async for m in rag.AskStream(pb.AskStreamRequest(query=query), timeout=30)]
    kinds = [m.WhichOneof("event") for m in messages]
    assert kinds == ["text_delta"] + ["citation"] * len(first.citations) + ["answer"]
    assert messages[0].text_delta == first.text and messages[-1].answer.flags.cache_hit


async def test_a_cached_answer_never_crosses_tenants_or_tag_sets(rag) -> None:
    query = "What is the travel budget of the finance team?"
    acme = await ask(rag, query, tenant_id="acme", user_tags=["finance"])
    assert acme.grounded and not acme.flags.cache_hit and "12000" in acme.text

    globex = await ask(rag, query, tenant_id="globex", user_tags=["finance"])
    assert not globex.flags.cache_hit and "300" in globex.text and "12000" not in globex.text

    untagged = await ask(rag, query, tenant_id="acme")
    assert not untagged.flags.cache_hit and "12000" not in untagged.text, "a caller without the tag never sees it"

    wider = await ask(rag, query, tenant_id="acme", user_tags=["finance", "hr"])
    assert not wider.flags.cache_hit, "another tag set is another key"

    again = await ask(rag, query, tenant_id="acme", user_tags=["finance"])
    assert again.flags.cache_hit and "12000" in again.text


async def test_ingest_and_delete_invalidate_the_tenant(rag, index, cached) -> None:
    query = "What is the travel budget of the finance team?"
    fields = {"tenant_id": "acme", "user_tags": ["finance"]}
    await ask(rag, query, **fields)
    assert (await ask(rag, query, **fields)).flags.cache_hit
    await ask(rag, query, tenant_id="globex", user_tags=["finance"])

    note = index_pb.Document(document_id="note", content=b"Parking is free for visitors.", tags=["finance"])
    await index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id="acme", documents=[note]), timeout=30)
    assert not (await ask(rag, query, **fields)).flags.cache_hit, "an ingest in the tenant drops its answers"
    assert (await ask(rag, query, tenant_id="globex", user_tags=["finance"])).flags.cache_hit, "others keep theirs"

    assert (await ask(rag, query, **fields)).flags.cache_hit
    await index.DeleteDocument(index_pb.DeleteDocumentRequest(tenant_id="acme", document_id="note"), timeout=30)
    assert not (await ask(rag, query, **fields)).flags.cache_hit, "a delete drops them too"

    assert (await ask(rag, query, **fields)).flags.cache_hit
    assert await cached.components.cache.invalidate_template("rag-v1") >= 1
    assert not (await ask(rag, query, **fields)).flags.cache_hit, "a template change drops its answers"


async def test_history_refusals_and_explain_bypass_the_cache(rag) -> None:
    history = [pb.ChatMessage(role=pb.ROLE_USER, content="hello"), pb.ChatMessage(role=pb.ROLE_ASSISTANT, content="hi")]
    for _ in range(2):
        answer = await ask(rag, "How are documents chunked?", chat_history=history)
        assert not answer.flags.cache_hit
    for _ in range(2):
        refusal = await ask(rag, "Who won the football world cup in 1954?")
        assert not refusal.grounded and not refusal.flags.cache_hit, "refusals are not cached"
    for _ in range(2):
        explained = await ask(rag, "What happens on SIGTERM?", explain=True)
        assert not explained.flags.cache_hit and explained.explanation.prompt
