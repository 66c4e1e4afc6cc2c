"""What the clients tell a newcomer, against real servers: a refusal's candidates under a heading that fits its
reason (`ragsvc ask`, a separate process), and the chat's welcome with example questions drawn from the tenant's
own documents, or none; with authentication on, only from documents the caller's key may list."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import AsyncIterator

import pytest

from ragsvc import chat
from ragsvc.access import token_digest
from ragsvc.server.app import RagServer
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.cli import run_cli
from tests.support.servers import connected, running_server

KEYS = {
    "keys": [
        {"name": "indexer", "token_sha256": token_digest("tok-index"), "tenant": "acme", "tags": ["*"], "index": True},
        {"name": "finance-indexer", "token": "tok-finance-index", "tenant": "acme", "tags": ["finance"], "index": True},
        {"name": "reader", "token": "tok-read", "tenant": "acme", "tags": ["*"]},
    ]
}
DOCUMENTS = {  # document id -> (tag, content)
    "salaries": ("hr", b"# Salary reviews\n\nThe HR team reviews salaries every March."),
    "travel": ("finance", b"# Travel budget\n\nThe finance team has a travel budget of 12000 euros per quarter."),
}


@pytest.fixture(scope="module")
async def demo(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    async with running_server(tmp_path_factory.mktemp("client-hints")) as server:
        yield server


@pytest.fixture(scope="module")
async def guarded(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    keys = tmp_path_factory.mktemp("client-hints-keys") / "keys.json"
    keys.write_text(json.dumps(KEYS))
    data = tmp_path_factory.mktemp("client-hints-auth")
    async with running_server(data, demo_corpus=False, auth_enabled=True, api_keys_file=str(keys)) as server:
        documents = [index_pb.Document(document_id=document_id, content=content, media_type="text/markdown",
                                       name=f"{document_id}.md", tags=[tag])
                     for document_id, (tag, content) in DOCUMENTS.items()]  # fmt: skip
        async with connected(server) as stubs:
            await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(documents=documents), timeout=60,
                                              metadata=(("authorization", "Bearer tok-index"),))  # fmt: skip
        yield server


async def ask(server: RagServer, question: str, *options: str, env: dict[str, str] | None = None) -> str:
    code, out, err = await run_cli("ask", question, "--address", server.address, *options, env=env)
    assert code == 0, err
    return out


async def test_a_score_gate_refusal_lists_its_candidates_as_below_the_gate(demo: RagServer) -> None:
    out = await ask(demo, "Best recipe for banana bread?")
    assert "REFUSAL_REASON_SCORE_GATE" in out
    assert "\nNearest candidates (below the score gate):\n  " in out


async def test_an_insufficient_evidence_refusal_lists_its_passages_as_not_answering(demo: RagServer) -> None:
    """Its candidates pass the score gate: they are not said to be below it."""
    out = await ask(demo, "How do I configure PgBouncer with ragsvc?")
    assert "REFUSAL_REASON_INSUFFICIENT_EVIDENCE" in out and "The documents do not cover PgBouncer." in out
    assert "\nClosest passages (none of them answers the question):\n  " in out
    assert "score gate" not in out


async def test_with_auth_a_refusal_lists_only_candidates_the_key_may_read(guarded: RagServer) -> None:
    out = await ask(guarded, "Best recipe for banana bread?", "--tag", "finance", env={"RAG_API_TOKEN": "tok-read"})
    assert "REFUSAL_REASON" in out and "salaries" not in out


def test_each_refusal_reason_with_candidates_has_its_heading() -> None:
    for reason, heading in chat.CANDIDATES_HEADINGS.items():
        answer = pb.Answer(refusal_reason=reason, candidates=[pb.Citation(document_name="a.md", source_id="a:0")])
        assert chat.format_candidates(answer)[0] == heading
    assert chat.format_candidates(pb.Answer(refusal_reason=pb.REFUSAL_REASON_SCORE_GATE)) == []


async def welcome(server: RagServer, tenant: str = "") -> list[str]:
    """The chat's opening lines after its first (the address and session), the chat left at once."""

    def leave(_: str) -> str:
        raise EOFError

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        await chat.run(server.address, tenant=tenant, tags=[], deadline_s=10, read_line=leave)
    return [line for line in out.getvalue().splitlines()[1:] if line.strip()]


async def test_the_chat_opens_with_questions_from_the_tenants_documents(demo: RagServer) -> None:
    assert await welcome(demo) == [
        "Ask a question. Ctrl-C stops an answer, Ctrl-D or 'exit' quits. For example:",
        "  What do the documents say about citations, confidence and routing?",
        "  What do the documents say about errors and status codes?",
        "  What do the documents say about ingesting documents?",
    ]


async def test_the_chat_of_an_empty_tenant_opens_with_no_examples(demo: RagServer) -> None:
    assert await welcome(demo, "bees") == ["Ask a question. Ctrl-C stops an answer, Ctrl-D or 'exit' quits."]


async def test_with_auth_the_examples_come_only_from_documents_the_key_may_list(
    guarded: RagServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key without IndexService rights lists nothing: no examples. A key of the finance tag: only the finance
    document's title, never the hr one's."""
    monkeypatch.setenv("RAG_API_TOKEN", "tok-read")
    assert await welcome(guarded) == ["Ask a question. Ctrl-C stops an answer, Ctrl-D or 'exit' quits."]
    monkeypatch.setenv("RAG_API_TOKEN", "tok-finance-index")
    assert await welcome(guarded) == [
        "Ask a question. Ctrl-C stops an answer, Ctrl-D or 'exit' quits. For example:",
        "  What do the documents say about travel?",  # its name: the API was given no title
    ]


def test_an_example_question_reads_a_title_or_a_name() -> None:
    assert chat.example_question("Ingesting documents") == "What do the documents say about ingesting documents?"
    assert chat.example_question("API keys") == "What do the documents say about API keys?"
    assert chat.example_question("How do refunds work?") == "How do refunds work?"
    assert chat.example_question("handbook.md") == "What do the documents say about handbook?"
