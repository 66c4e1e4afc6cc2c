"""Right or refused, through the real server with the extractive generator: natural questions about what the
documents hold are answered, a question about a neighbouring product is refused with INSUFFICIENT_EVIDENCE, and
the refusal says what the documents do not cover."""

from __future__ import annotations

from pathlib import Path

from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.servers import connected, running_server

TRAVEL_POLICY = b"""# Travel Policy

Employees book business travel through the company travel desk at least two weeks before departure.
Economy class is the standard for flights shorter than six hours; business class needs a director's approval.
Hotel costs are reimbursed up to 180 euros a night in capital cities and 120 euros elsewhere.
Receipts are submitted within thirty days of returning.
"""

EXPENSES = b"""# Expense Reports

Expense reports are filed monthly in the finance portal. Each line needs a cost centre and a receipt.
Reports above 2000 euros are reviewed by the finance team before payment.
"""


async def ask(stubs: object, query: str, tenant: str = "", *, explain: bool = False) -> pb.Answer:
    request = pb.AskRequest(query=query, tenant_id=tenant, explain=explain)
    return (await stubs.rag.Ask(request, timeout=30)).answer  # type: ignore[attr-defined]


async def test_the_travel_policy_question_is_answered_from_the_travel_policy(tmp_path: Path) -> None:
    async with running_server(tmp_path, demo_corpus=False) as server, connected(server) as stubs:
        documents = [
            index_pb.Document(document_id="travel", content=TRAVEL_POLICY, media_type="text/markdown", title="Travel Policy"),
            index_pb.Document(document_id="expenses", content=EXPENSES, media_type="text/markdown", title="Expense Reports"),
        ]
        await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id="acme", documents=documents))

        answer = await ask(stubs, "What is the travel policy?", "acme")

    assert answer.grounded, (answer.refusal_reason, answer.text)
    assert answer.refusal_reason == pb.REFUSAL_REASON_NONE
    assert {c.document_id for c in answer.citations} == {"travel"}
    assert "travel desk" in answer.text or "Economy class" in answer.text


async def test_the_grace_period_question_asked_alone_is_answered_with_ten_seconds(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, connected(server) as stubs:
        answer = await ask(stubs, "How long is the grace period?")

    assert answer.grounded, (answer.refusal_reason, answer.text)
    assert "ten seconds" in answer.text
    assert answer.citations and answer.citations[0].document_id == "operations"


async def test_a_neighbouring_product_is_refused_with_insufficient_evidence_naming_it(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, connected(server) as stubs:
        answer = await ask(stubs, "How do I configure health checks in Kubernetes?", explain=True)
        covered = await ask(stubs, "How are health checks reported?")

    assert not answer.grounded
    assert answer.refusal_reason == pb.REFUSAL_REASON_INSUFFICIENT_EVIDENCE
    assert answer.text == "The documents do not cover Kubernetes."
    assert not answer.citations and answer.candidates, "the nearest chunks are listed, nothing is cited"
    assert answer.action == pb.ACTION_ROUTE
    assert covered.grounded, "the same subject without the foreign product is answered"
    read = answer.explanation.packed_chunks
    assert len(read) > len(answer.candidates), "explained, the refusal shows every chunk the reader read"
    assert [c.source_id for c in read[: len(answer.candidates)]] == [c.source_id for c in answer.candidates]
    assert [c.marker for c in read] == list(range(1, len(read) + 1))
    assert not answer.explanation.prompt and answer.context_chunks_used == 0, "nothing went to a model"
