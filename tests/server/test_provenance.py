"""Provenance in the answer (R-003-13, R-003-14, R-004-03, R-004-04, R-003-25) and the question's language
(R-003-04), end to end through a real server: citations' rank scores, spans and pages; the index version and
creation time; END_LIST citations; response styles and search modes per request; the cost metric; templates per
language and the UNSUPPORTED_LANGUAGE refusal, with the audit row."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from ragsvc.server.app import RagServer
from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.servers import Stubs, connected, running_server

TENANT = "provenance"
POLICY = (
    "Travel policy.\n\n"
    "Employees book economy class for flights under six hours. Business class needs the approval of a director. "
    "Hotel stays are reimbursed up to 180 euros a night in capital cities and 120 euros elsewhere.\n\n"
    "Expenses are filed within thirty days of the trip, with every receipt attached."
)


async def ingest(stubs: Stubs, document_id: str = "travel", text: str = POLICY) -> None:
    document = index_pb.Document(document_id=document_id, name=f"{document_id}.txt", content=text.encode())
    await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id=TENANT, documents=[document]), timeout=60)


async def ask(stubs: Stubs, query: str = "How much is a hotel night reimbursed in a capital city?", **fields: Any) -> pb.Answer:
    request = pb.AskRequest(query=query, tenant_id=TENANT, **fields)
    return (await stubs.rag.Ask(request, timeout=30)).answer


@pytest.fixture(scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # RAG_READER_POOL=0: the evidence is retrieval's, in its rank order (the reader's chunk model would choose it).
    async with running_server(tmp_path_factory.mktemp("provenance"), demo_corpus=False, chunk_tokens=40,
                              chunk_overlap_tokens=8, reader_pool=0) as server:  # fmt: skip
        async with connected(server) as stubs:
            await ingest(stubs)
        yield server


async def test_a_citation_says_where_its_chunk_is_and_how_it_ranked(server: RagServer) -> None:
    async with connected(server) as stubs:
        answer = await ask(stubs, explain=True)
    assert answer.grounded and answer.citations
    for citation in answer.citations:
        assert citation.HasField("rank_score") and citation.HasField("char_start") and citation.HasField("char_end")
        assert POLICY[citation.char_start : citation.char_end] == citation.text, "a plain text's span is its text"
        assert list(citation.page_numbers) == [], "a plain text has no pages"
    ranks = [c.rank_score for c in answer.explanation.packed_chunks]
    assert ranks == sorted(ranks, reverse=True), "evidence is ordered by its rank score"


async def test_an_answer_names_the_index_version_it_was_searched_in(server: RagServer) -> None:
    async with connected(server) as stubs:
        before = await ask(stubs)
        again = await ask(stubs)
        await ingest(stubs, "parking", "Parking at the office is free for employees with a badge.")
        after_ingest = await ask(stubs)
        await stubs.index.DeleteDocument(index_pb.DeleteDocumentRequest(tenant_id=TENANT, document_id="parking"), timeout=30)
        after_delete = await ask(stubs)
        with pytest.raises(grpc.aio.AioRpcError):  # nothing deleted: the version stays
            await stubs.index.DeleteDocument(index_pb.DeleteDocumentRequest(tenant_id=TENANT, document_id="parking"))
        await ingest(stubs)  # unchanged: nothing written
        unchanged = await ask(stubs)
    assert before.index_version == again.index_version != ""
    assert len({before.index_version, after_ingest.index_version, after_delete.index_version}) == 3
    assert unchanged.index_version == after_delete.index_version
    now = dt.datetime.now(dt.UTC)
    created = before.create_time.ToDatetime(dt.UTC)
    assert now - dt.timedelta(minutes=5) < created <= now


async def test_the_end_list_style_lists_the_cited_sources(server: RagServer) -> None:
    async with connected(server) as stubs:
        answer = await ask(stubs, generation=pb.GenerationOptions(citation_style=pb.CITATION_STYLE_END_LIST))
    assert answer.grounded
    body, listed = answer.text.split("\n\nSources:\n")
    assert "[#" in body, "markers stay inline"
    assert listed.splitlines() == [f"[#{c.marker}] travel.txt" for c in sorted(answer.citations, key=lambda c: c.marker)]


async def test_each_search_mode_is_applied(server: RagServer) -> None:
    async with connected(server) as stubs:
        # Sharing no word with the policy: words alone find nothing, meaning alone finds it.
        paraphrase = "What's the cap on lodging costs?"
        sparse = await ask(stubs, paraphrase, retrieval=pb.RetrievalOptions(search_mode=pb.SEARCH_MODE_SPARSE))
        dense = await ask(stubs, paraphrase, retrieval=pb.RetrievalOptions(search_mode=pb.SEARCH_MODE_DENSE,
                                                                             score_threshold=0.0))  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await ask(stubs, retrieval=pb.RetrievalOptions(search_mode=9))
    assert sparse.refusal_reason == pb.REFUSAL_REASON_NO_CHUNKS
    assert dense.refusal_reason != pb.REFUSAL_REASON_NO_CHUNKS
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "retrieval.search_mode" in str(bad.value.details())


async def test_a_response_style_reaches_the_model_per_request_and_per_template(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=["Hotels: 180 euros a night in capitals [#1]."]) as model:
        async with running_server(tmp_path, demo_corpus=False, generator="openai", openai_base_url=model.base_url,
                                  llm_classify=False, llm_self_score=False, llm_condense=False) as server:  # fmt: skip
            async with connected(server) as stubs:
                await ingest(stubs)
                await ask(stubs, generation=pb.GenerationOptions(response_style=pb.RESPONSE_STYLE_BULLETS))
                created = admin_pb.PromptTemplate(user_prompt="{query}\n{context}", response_style=pb.RESPONSE_STYLE_CONCISE)
                await stubs.admin.CreatePromptTemplate(
                    admin_pb.CreatePromptTemplateRequest(prompt_template=created, prompt_template_id="short")
                )
                await ask(stubs, generation=pb.GenerationOptions(template_id="short"))
                stored = await stubs.admin.GetPromptTemplate(admin_pb.GetPromptTemplateRequest(name="promptTemplates/short"))
    systems = [r.body["messages"][0]["content"] for r in model.requests if r.path.endswith("/chat/completions")]
    assert "bullet points" in systems[0] and "three short sentences" in systems[1]
    assert stored.prompt_template.response_style == pb.RESPONSE_STYLE_CONCISE
    assert stored.prompt_template.language == "en"


async def test_the_cost_metric_adds_up_the_answers_costs(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with ScriptedOpenAIServer(deltas=["Hotels: 180 euros a night in capitals [#1]."]) as model:
        settings = {
            "generator": "openai",
            "openai_base_url": model.base_url,
            "model_prices": "llama3.2=1000/2000",
            "metrics_port": port,
            "cache_max_entries": 0,
        }
        async with running_server(tmp_path, demo_corpus=False, **settings) as server:
            async with connected(server) as stubs:
                await ingest(stubs)
                answers = [await ask(stubs), await ask(stubs, "How soon are expenses filed?")]
            async with httpx.AsyncClient() as client:
                scraped = (await client.get(f"http://127.0.0.1:{port}/metrics", timeout=5)).text
    [line] = [line for line in scraped.splitlines() if line.startswith("rag_model_cost_estimate_total{")]
    assert 'provider="openai"' in line
    assert sum(a.cost_estimate_usd for a in answers) > 0
    assert float(line.split()[-1]) == pytest.approx(sum(a.cost_estimate_usd for a in answers))


async def test_a_question_in_another_language_is_answered_with_its_template_or_refused(server: RagServer) -> None:
    async with connected(server) as stubs:
        korean = await ask(stubs, "수도의 호텔 숙박비는 얼마까지 환급되나요?")
        german = await ask(stubs, "Wie viel wird für eine Hotelnacht in einer Hauptstadt erstattet?")
        short = await ask(stubs, "Hotel?")
        english = await ask(stubs)
    assert korean.language == "ko" and korean.prompt_template_version == "rag-v1-ko"
    assert german.language == "de" and german.refusal_reason == pb.REFUSAL_REASON_UNSUPPORTED_LANGUAGE
    assert "German (de)" in german.text and not german.citations and german.action == pb.ACTION_ROUTE
    assert german.timings.retrieval.ToNanoseconds() == 0, "nothing was searched"
    assert short.language == "" and short.refusal_reason != pb.REFUSAL_REASON_UNSUPPORTED_LANGUAGE
    assert english.language == "en" and english.prompt_template_version == "rag-v1"
    rows = {row["request_id"]: row for row in await server.components.answers.recent(TENANT, limit=10)}
    assert rows[german.request_id]["language"] == "de"
    assert rows[german.request_id]["refusal_reason"] == "unsupported_language"
    assert rows[korean.request_id]["language"] == "ko"
    assert rows[english.request_id]["index_version"] == english.index_version


async def test_a_custom_template_makes_a_language_answerable(server: RagServer) -> None:
    german_template = admin_pb.PromptTemplate(user_prompt="[Frage]\n{query}\n\n[Kontext]\n{context}", language="de")
    async with connected(server) as stubs:
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await stubs.admin.CreatePromptTemplate(admin_pb.CreatePromptTemplateRequest(
                prompt_template=admin_pb.PromptTemplate(user_prompt="{query}{context}", language="German"),
                prompt_template_id="bad-language",
            ))  # fmt: skip
        await stubs.admin.CreatePromptTemplate(
            admin_pb.CreatePromptTemplateRequest(prompt_template=german_template, prompt_template_id="rag-v1-de")
        )
        german = await ask(stubs, "Wie viel wird für eine Hotelnacht in einer Hauptstadt erstattet?")
        await stubs.admin.DeletePromptTemplate(admin_pb.DeletePromptTemplateRequest(name="promptTemplates/rag-v1-de"))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "prompt_template.language" in str(bad.value.details())
    assert german.language == "de" and german.prompt_template_version == "rag-v1-de"
    assert german.refusal_reason != pb.REFUSAL_REASON_UNSUPPORTED_LANGUAGE


async def test_language_detection_can_be_turned_off(tmp_path: Path) -> None:
    async with running_server(tmp_path, demo_corpus=False, language_detection=False) as server:
        async with connected(server) as stubs:
            await ingest(stubs)
            german = await ask(stubs, "Wie viel wird für eine Hotelnacht in einer Hauptstadt erstattet?")
    assert german.language == "" and german.refusal_reason != pb.REFUSAL_REASON_UNSUPPORTED_LANGUAGE
