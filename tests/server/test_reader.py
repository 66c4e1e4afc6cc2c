"""The shipped trained reader through the real server, on a corpus no model was trained on (four short pages about
beekeeping, tests/server/data/bees): a question whose subject the evidence lacks is refused with
INSUFFICIENT_EVIDENCE, one the pages answer is answered from the sentence that answers it, and a follow-up in a
session is answered about what it asks, not with the first answer's sentences again."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.servers import Stubs, connected, running_server

BEES = Path(__file__).parent / "data" / "bees"
TENANT = "bees"


@pytest.fixture(scope="module")
async def bees(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stubs]:
    async with running_server(tmp_path_factory.mktemp("bees"), demo_corpus=False) as server, connected(server) as stubs:
        documents = [
            index_pb.Document(document_id=page.stem, name=page.name, content=page.read_bytes(),
                              media_type="text/markdown")
            for page in sorted(BEES.glob("*.md"))
        ]  # fmt: skip
        response = await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id=TENANT, documents=documents))
        assert all(result.chunks_indexed for result in response.results), response
        yield stubs


async def ask(stubs: Stubs, query: str, **fields: object) -> pb.Answer:
    request = pb.AskRequest(query=query, tenant_id=TENANT, **fields)  # type: ignore[arg-type]
    return (await stubs.rag.Ask(request, timeout=60)).answer


async def test_a_question_whose_subject_the_evidence_lacks_is_refused(bees: Stubs) -> None:
    answer = await ask(bees, "Who invented the Langstroth hive?")

    assert answer.refusal_reason == pb.REFUSAL_REASON_INSUFFICIENT_EVIDENCE, (answer.text, answer.confidence.overall)
    assert not answer.grounded and answer.action != pb.ACTION_CITE
    assert "Langstroth" in answer.text, "the refusal names what the documents do not cover"


async def test_a_question_the_pages_answer_is_answered_from_its_sentence(bees: Stubs) -> None:
    answer = await ask(bees, "How much honey does a colony need to get through the winter?")

    assert answer.grounded, (answer.refusal_reason, answer.text)
    assert "20 kilograms" in answer.text
    assert answer.citations[0].document_id == "seasons"


async def test_a_follow_up_is_answered_about_what_it_asks(bees: Stubs) -> None:
    session = str(uuid.uuid4())
    first = await ask(bees, "How often should I inspect my hives in spring?", session_id=session)
    follow_up = await ask(bees, "And when is the best time to treat for varroa with oxalic acid?", session_id=session)

    assert first.grounded and "seven to ten days" in first.text, first.text
    assert follow_up.grounded and "winter" in follow_up.text, follow_up.text
    assert follow_up.text != first.text
