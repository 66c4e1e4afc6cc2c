"""Retrieval seen through the answering service, as the server builds it: selected-text mode never touches the
index (the proof: it answers with the engine closed), and confidential evidence is redacted and flagged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsvc.answering.context import CallContext
from ragsvc.config import Settings
from ragsvc.domain import (
    Answer,
    ChatMessage,
    Mode,
    QueryRewrite,
    Question,
    RefusalReason,
    Role,
    SearchQuery,
    SourceDocument,
)
from ragsvc.errors import RetrievalUnavailable
from ragsvc.server.components import Components, open_components
from tests.conftest import shared_embedder

SELECTION = """Shipping
Orders leave the warehouse within two business days.

Returns
Unused items can be returned within 30 days for a full refund."""

HANDBOOK = b"""# Leave
Employees accrue two vacation days per month of service.

# Salaries
The salary bands for 2026 are 52k, 61k and 74k for levels one to three.
"""


@pytest.fixture
async def components(tmp_path: Path) -> AsyncIterator[Components]:
    async with open_components(Settings.of(data_dir=tmp_path, demo_corpus=False), embedder=shared_embedder()) as built:
        yield built


async def answer(components: Components, question: Question) -> Answer:
    final = None
    async for event in components.answering.answer(question, CallContext("req-modes")):
        if isinstance(event, Answer):
            final = event
    assert final is not None
    return final


async def test_selected_text_mode_answers_from_the_selection_with_the_engine_closed(components: Components) -> None:
    await components.indexer.ingest(
        SourceDocument("returns", "returns.md", b"Returns are accepted within 90 days.", "text/markdown", "default")
    )
    await components.engine.close()  # any engine call now raises RetrievalUnavailable

    found = await answer(
        components, Question("How long do I have to return an item?", mode=Mode.SELECTED_TEXT, selected_text=SELECTION)
    )
    missing = await answer(
        components, Question("What is the price of the premium plan?", mode=Mode.SELECTED_TEXT, selected_text=SELECTION)
    )

    assert found.grounded and found.refusal is RefusalReason.NONE
    assert "90 days" not in found.text  # the index held another answer: it was never consulted
    cited = found.citations[0].chunk
    assert SELECTION[cited.char_start : cited.char_end] == cited.text
    assert cited.text.startswith("Returns\nUnused items") and (cited.line_start, cited.line_end) == (4, 5)
    assert cited.source_url == "selected_text"
    assert missing.refusal is RefusalReason.NOT_IN_SELECTION
    assert not missing.grounded
    assert missing.text == (
        'The provided selection does not contain information about "What is the price of the premium plan". '
        "Would you like me to search the full documentation?"
    )
    with pytest.raises(RetrievalUnavailable):  # general mode does need the engine
        await answer(components, Question("How long do I have to return an item?"))


async def test_confidential_evidence_is_redacted_and_flagged_for_callers_without_clearance(
    components: Components,
) -> None:
    result = await components.indexer.ingest(
        SourceDocument("handbook", "handbook.md", HANDBOOK, "text/markdown", "default", confidential=True)
    )
    assert result.chunks_indexed == 2
    question = "What are the salary bands for 2026?"

    uncleared = await answer(components, Question(question, user_tags=("staff",)))
    cleared = await answer(components, Question(question, user_tags=("staff", "confidential")))

    assert uncleared.flags.redactions_applied
    assert not uncleared.grounded
    assert "52k" not in uncleared.text
    assert all("52k" not in c.chunk.text for c in uncleared.candidates)
    assert not cleared.flags.redactions_applied
    assert cleared.grounded and "52k" in cleared.text


SHUTDOWN = b"""# Shutdown
On SIGTERM the server stops accepting new connections. Connections already open get a grace period of 30 seconds
to finish before they are closed.
"""
TICKETS = b"""# Tickets
Support tickets without a reply have a grace period of five business days, after which they are closed.
"""


async def test_a_follow_up_is_answered_from_its_second_search_when_the_first_finds_too_little(tmp_path: Path) -> None:
    settings = Settings.of(data_dir=tmp_path, demo_corpus=False, score_gate=0.4)
    async with open_components(settings, embedder=shared_embedder()) as components:
        for document_id, text in (("shutdown", SHUTDOWN), ("tickets", TICKETS)):
            await components.indexer.ingest(SourceDocument(document_id, f"{document_id}.md", text, "text/markdown", "default"))
        # The earlier answer does not mention the grace period, so the rule lets the follow-up stand as asked; alone,
        # it scores under the gate (0.33 to the tickets' grace period); after the earlier question, 0.47 to the
        # shutdown's.
        history = (
            ChatMessage(Role.USER, "What happens on SIGTERM?"),
            ChatMessage(Role.ASSISTANT, "New connections are refused [#1]."),
        )
        follow_up = await answer(components, Question("How long is the grace period?", chat_history=history))
        alone = await answer(components, Question("How long is the grace period?"))

    assert follow_up.search == SearchQuery("What happens on SIGTERM? How long is the grace period?", QueryRewrite.RULE)
    assert follow_up.grounded and "30 seconds" in follow_up.text
    assert alone.search == SearchQuery("How long is the grace period?"), "a first question is searched once, as asked"
    assert alone.refusal is RefusalReason.SCORE_GATE
