"""The read stage: the reader's assessment of the evidence is made when something first reads it (the gate before
generation, else validation), and once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsvc.answering.read import ReadStage
from ragsvc.domain import ScoredChunk
from ragsvc.reading import Analysis, Assessment, Reader
from tests.answering.test_pipeline import EVIDENCE, QUESTION, FixedRetriever
from tests.support.readers import RULES


class CountingReader:
    """`reader`, counting its assessments."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.assessed = 0

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
