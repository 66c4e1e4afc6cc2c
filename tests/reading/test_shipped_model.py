"""The shipped reader model (src/ragsvc/reading/models/reader.npz) reads a fixed probe set as `make train-reader`
recorded when it wrote the model (tests/reading/data/reader-probe.json), with the shipped cross-encoder re-ranking its
quotes: the same chunks packed from those retrieved, the same P(right) (the extractive answer model's), the same
quotes; and without the cross-encoder (the answer model, which judges an LLM's answers), the same P(right). make test
never trains; this checks that the weights, the numpy evaluation and the features are the ones trained."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import pytest

from bench.reader.dataset import PACKED, scored_chunks
from bench.reader.evidence import EVIDENCE_K
from ragsvc.domain import TermCounts
from ragsvc.reading.cross import CrossEncoder
from ragsvc.reading.trained import MODEL_FILE, Model, TrainedReader

PROBE = json.loads((Path(__file__).parent / "data" / "reader-probe.json").read_text())
SHIPPED = resources.files("ragsvc.reading").joinpath("models", MODEL_FILE)


@pytest.fixture(scope="module")
def reader() -> TrainedReader:
    cross = CrossEncoder()
    assert cross.sha256 == PROBE["cross_sha256"]
    return TrainedReader(Model.load(), rare_share=0.002, pool=EVIDENCE_K, cross=cross, candidates=PROBE["cross_candidates"])


@pytest.fixture(scope="module")
def plain() -> TrainedReader:
    return TrainedReader(Model.load(), rare_share=0.002, pool=EVIDENCE_K)


def test_the_probe_was_recorded_with_the_shipped_weights() -> None:
    assert hashlib.sha256(SHIPPED.read_bytes()).hexdigest() == PROBE["model_sha256"]
    assert len(SHIPPED.read_bytes()) <= 30 * 1024 * 1024


def test_the_probe_covers_every_kind_on_every_corpus() -> None:
    corpora = {case["id"].split("/")[0] for case in PROBE["cases"]}
    assert len(corpora) >= 6 and len(PROBE["cases"]) == 3 * len(corpora)
    assert any(case["answerable"] for case in PROBE["cases"]) and not all(case["answerable"] for case in PROBE["cases"])


@pytest.mark.parametrize("case", PROBE["cases"], ids=[case["id"] for case in PROBE["cases"]])
def test_the_shipped_model_reads_the_probe_as_recorded(
    reader: TrainedReader, plain: TrainedReader, case: dict[str, object]
) -> None:
    counts = case["counts"]
    assert isinstance(counts, dict)
    analysis = reader.analyse(str(case["search"]), str(case["question"]), TermCounts(**counts))
    pool = scored_chunks(case["evidence"])  # type: ignore[arg-type]
    evidence = reader.pack(analysis, pool, limit=PACKED)
    assert [pool.index(scored) for scored in evidence] == case["packed"]
    assessment = reader.assess(analysis, evidence)
    assert assessment.score == pytest.approx(case["p_right"], abs=1e-9)
    assert assessment.answerable == case["answerable"]
    assert [c.quote for c in reader.quotes(analysis, evidence, limit=3)] == case["quotes"]
    answer_model = plain.assess(analysis, evidence)
    assert case["answer_model"] == {"p_right": pytest.approx(answer_model.score, abs=1e-9), "answerable": answer_model.answerable}
