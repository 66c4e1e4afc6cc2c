"""The read stage: the reader's assessment of the evidence is made when something first reads it (the gate before
generation, else validation), and once; the question itself is read before generation only when something there
needs the reading (the gate, the reader's pool, the extractive generator), else once the first text is out."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from ragsvc.answering.read import ReadStage
from ragsvc.domain import Answer, Event, Mode, RetrievalQuery, ScoredChunk, TermCounts, TextDelta, Timings
from ragsvc.errors import RetrievalUnavailable
from ragsvc.reading import Analysis, Assessment, Reader
from tests.answering.test_pipeline import EVIDENCE, QUESTION, FixedRetriever, admitted, answer_of, make_pipeline
from tests.generation.backends import OPENAI
from tests.support.readers import RULES
from tests.support.streams import collect_into


class CountingReader:
    """`reader`, counting its analyses and assessments; `pool` in place of the reader's."""

    def __init__(self, reader: Reader, *, pool: int | None = None) -> None:
        self.reader = reader
        self.analysed = 0
        self.assessed = 0
        self.pool = reader.pool if pool is None else pool

    def analyse(self, search: str, question: str, counts: TermCounts | None) -> Analysis:
        self.analysed += 1
        return self.reader.analyse(search, question, counts)

    def assess(self, analysis: Analysis, evidence: Sequence[ScoredChunk]) -> Assessment:
        self.assessed += 1
        return self.reader.assess(analysis, evidence)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)


async def test_the_assessment_is_made_when_first_read_and_once() -> None:
    reader = CountingReader(RULES)
    stage = ReadStage(reader, FixedRetriever(), refuses=False, top_k=5)

    reading = await stage.run(QUESTION, QUESTION.query, EVIDENCE)

    assert reader.assessed == 0, "nothing read it yet"
    first = reading.assessment
    assert reading.assessment is first
    assert reader.assessed == 1
    assert first == RULES.assess(reading.analysis, reading.evidence)
    assert first.answerable, "the evidence answers the question"


class CountingRetriever(FixedRetriever):
    """Counts the engine's term counts asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.counted = 0

    async def term_counts(self, query: RetrievalQuery, terms: Sequence[str]) -> TermCounts:
        self.counted += 1
        return await super().term_counts(query, terms)


async def _answered(**settings: Any) -> tuple[tuple[int, int, int], tuple[int, int, int], list[Event]]:
    """The pipeline's events for QUESTION against a scripted LLM, with the term counts, analyses and
    assessments made by the time the caller, having taken the first text delta, asks for the next event (the loop
    free meanwhile), and at the end."""
    reader, retriever = CountingReader(RULES), CountingRetriever()
    made = lambda: (retriever.counted, reader.analysed, reader.assessed)  # noqa: E731
    at_first_text: tuple[int, int, int] | None = None
    events: list[Event] = []
    async with OPENAI.server(deltas=["Up to 180 euros", " per night [#1]."]) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            pipeline = make_pipeline(generator, retriever=retriever, reader=reader, stream_policy="raw", **settings)
            async with contextlib.aclosing(pipeline.run(admitted(QUESTION))) as stream:
                async for event in stream:
                    if at_first_text is None and isinstance(event, TextDelta):
                        for _ in range(3):  # the loop free to run what was scheduled (as grpc sends the message)
                            await asyncio.sleep(0)
                        at_first_text = made()
                    events.append(event)
    assert at_first_text is not None
    return at_first_text, made(), events


def _untimed(answer: Answer) -> Answer:
    return dataclasses.replace(answer, timings=Timings())


async def test_unread_before_generation_the_question_is_read_once_the_first_text_is_out() -> None:
    at_first_text, at_end, events = await _answered(answerability_gate=False)
    assert at_first_text == (0, 0, 0), "no term counts, analysis or assessment until the first text is out"
    assert at_end == (1, 1, 1), "read once, while the model wrote, and assessed"
    _, _, read_first = await _answered(answerability_gate=True)
    assert _untimed(answer_of(events)) == _untimed(answer_of(read_first)), "the same answer as read before"
    assert answer_of(events).text == "Up to 180 euros per night [#1]." and answer_of(events).grounded


@pytest.mark.parametrize(
    "settings",
    [{"answerability_gate": True}, {"answerability_gate": False, "extractive": True}],
    ids=["the gate reads its assessment", "the extractive fallback reads its term counts"],
)
async def test_what_needs_the_reading_before_generation_has_it_made_there(settings: dict[str, Any]) -> None:
    at_first_text, at_end, _ = await _answered(**settings)
    assert at_first_text[:2] == (1, 1) and at_end[:2] == (1, 1)
    assert at_end[2] == 1


def test_the_question_is_read_first_for_the_gate_or_a_pool_only() -> None:
    def stage(*, refuses: bool, pool: int = 0) -> ReadStage:
        return ReadStage(CountingReader(RULES, pool=pool), FixedRetriever(), refuses=refuses, top_k=2)

    selected = dataclasses.replace(QUESTION, mode=Mode.SELECTED_TEXT)
    assert stage(refuses=True).needed_first(QUESTION)
    assert not stage(refuses=True).needed_first(selected), "no gate on a caller's selection"
    assert stage(refuses=False, pool=8).needed_first(QUESTION), "the pool is chosen from by the analysis"
    assert not stage(refuses=False).needed_first(QUESTION)
    assert stage(refuses=False).unread(QUESTION, EVIDENCE) == EVIDENCE[:2]
    assert stage(refuses=False).unread(dataclasses.replace(QUESTION, top_k=1), EVIDENCE) == EVIDENCE[:1]


class FailingCounts(FixedRetriever):
    """An engine whose term counts fail."""

    async def term_counts(self, query: RetrievalQuery, terms: Sequence[str]) -> TermCounts:
        raise RetrievalUnavailable("vector store error: scripted")


async def test_a_reading_made_after_the_first_text_fails_the_stream_with_its_error() -> None:
    events: list[Event] = []
    async with OPENAI.server(deltas=["Up to 180 euros", " per night [#1]."]) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            pipeline = make_pipeline(generator, retriever=FailingCounts(), answerability_gate=False, stream_policy="raw")
            with pytest.raises(RetrievalUnavailable):
                await collect_into(events, pipeline.run(admitted(QUESTION)))
    assert isinstance(events[0], TextDelta), "the text went out first"
    assert not any(isinstance(e, Answer) for e in events), "no Answer after the failure"
