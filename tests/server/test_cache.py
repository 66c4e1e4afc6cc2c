"""The answer cache: unit behaviour (TTL, LRU, invalidation, what is cached) and, over a real channel, hits that
are flagged, streamed whole, and never crossing tenants or tag sets."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import grpc
import pytest
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc
from ragsvc.v1 import rag_service_pb2 as pb

from ragsvc import domain
from ragsvc.server.app import RagServer
from ragsvc.server.cache import AnswerCache, cache_key
from tests.server.conftest import running_server

GROUNDED = domain.Answer(text="It is 42 [#1].", grounded=True, action=domain.Action.CITE, template_version="rag-v1")
QUESTION = domain.Question(query="What is the answer?", tenant_id="acme", user_tags=("a", "b"))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_key_separates_tenants_and_tag_sets_but_not_tag_order_or_spacing() -> None:
    key = cache_key(QUESTION)
    assert cache_key(dataclasses.replace(QUESTION, user_tags=("b", "a"))) == key
    assert cache_key(dataclasses.replace(QUESTION, query="  what IS the\tanswer? ")) == key
    for other in (
        dataclasses.replace(QUESTION, tenant_id="globex"),
        dataclasses.replace(QUESTION, user_tags=("a",)),
        dataclasses.replace(QUESTION, user_tags=()),
        dataclasses.replace(QUESTION, template_id="rag-v1-terse"),
        dataclasses.replace(QUESTION, top_k=3),
        dataclasses.replace(QUESTION, citation_style=domain.CitationStyle.SOURCE_ID),
        dataclasses.replace(QUESTION, model="other"),
        dataclasses.replace(QUESTION, filters=domain.MetadataFilter(page_titles=("x",))),
        dataclasses.replace(QUESTION, mode=domain.Mode.SELECTED_TEXT, selected_text="some text"),
    ):
        assert cache_key(other) != key, other


def test_ttl_lru_and_what_is_cached() -> None:
    clock = Clock()
    cache = AnswerCache(max_entries=2, ttl_s=10, clock=clock)
    assert cache.put("k1", GROUNDED, question=QUESTION, generation=0)
    clock.now = 9.9
    assert cache.get("k1") == GROUNDED
    clock.now = 10.0
    assert cache.get("k1") is None, "expired"

    for key in ("a", "b", "c"):
        cache.put(key, GROUNDED, question=QUESTION, generation=0)
    assert cache.get("a") is None and cache.get("b") and cache.get("c"), "least recently used evicted"

    refusal = dataclasses.replace(GROUNDED, grounded=False, refusal=domain.RefusalReason.SCORE_GATE)
    routed = dataclasses.replace(GROUNDED, action=domain.Action.ROUTE)
    assert not cache.put("r", refusal, question=QUESTION, generation=0)
    assert not cache.put("r", routed, question=QUESTION, generation=0)


def test_invalidation_by_tenant_and_template_and_the_generation_guard() -> None:
    cache = AnswerCache(max_entries=10, ttl_s=60)
    other = dataclasses.replace(QUESTION, tenant_id="globex", template_id="rag-v1-terse")
    cache.put("acme", GROUNDED, question=QUESTION, generation=0)
    cache.put("globex", dataclasses.replace(GROUNDED, template_version="rag-v1-terse"), question=other, generation=0)

    generation = cache.generation("acme")  # an answer starts computing ...
    assert cache.invalidate_tenant("acme") == 1  # ... the tenant's documents change ...
    assert not cache.put("acme", GROUNDED, question=QUESTION, generation=generation), "... it is not stored"
    assert cache.get("globex") is not None

    assert cache.invalidate_template("rag-v1-terse") == 1 and len(cache) == 0


@pytest.fixture(scope="module")
async def cached(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    async with running_server(tmp_path_factory.mktemp("cache-data"), cache_max_entries=100) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            index = index_service_pb2_grpc.IndexServiceStub(channel)
            for tenant, amount in (("acme", "12000"), ("globex", "300")):
                document = index_pb.Document(
                    document_id="travel", name="travel.md", media_type="text/markdown", tags=["finance"],
                    content=f"# Travel\n\nThe travel budget of the finance team is {amount} euros a quarter.".encode(),
                )  # fmt: skip
                await index.IngestDocuments(
                    index_pb.IngestDocumentsRequest(tenant_id=tenant, documents=[document]), timeout=30
                )
        yield server


@pytest.fixture(scope="module")
async def cache_channel(cached: RagServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(cached.address) as channel:
        yield channel


@pytest.fixture
def rag(cache_channel: grpc.aio.Channel) -> rag_service_pb2_grpc.RagServiceStub:
    return rag_service_pb2_grpc.RagServiceStub(cache_channel)


@pytest.fixture
def index(cache_channel: grpc.aio.Channel) -> index_service_pb2_grpc.IndexServiceStub:
    return index_service_pb2_grpc.IndexServiceStub(cache_channel)


async def ask(rag, query: str, **fields: object) -> pb.Answer:  # noqa: ANN001
    return (await rag.Ask(pb.AskRequest(query=query, **fields), timeout=30)).answer


async def test_a_repeated_question_is_served_from_the_cache(rag) -> None:
    query = "What happens on SIGTERM?"
    first = await ask(rag, query)
    assert first.grounded and not first.flags.cache_hit
    second = await ask(rag, "  what happens ON sigterm? ")  # the same question, normalised
    assert second.flags.cache_hit and second.text == first.text
    assert [c.source_id for c in second.citations] == [c.source_id for c in first.citations]
    assert second.request_id != first.request_id and second.usage.completion_tokens == 0

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
    assert cached.hardening.cache.invalidate_template("rag-v1") >= 1
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
