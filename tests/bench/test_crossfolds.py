"""The fold cross-encoders (bench/quality/folds/cross-*.onnx): each corpus is served and trained on by the one whose
recorded training corpora exclude it, and the records match the model files."""

from __future__ import annotations

import hashlib
import json

from bench.quality import corpus, crossfolds


def test_each_corpus_is_scored_by_a_cross_encoder_that_never_saw_it() -> None:
    for name in corpus.CORPORA:
        path = crossfolds.for_corpus(name)
        assert name not in crossfolds.training_corpora(path)
        assert name not in json.loads(path.with_suffix(".json").read_text())["corpora"]


def test_the_fold_cross_encoders_are_the_recorded_files_and_cover_every_corpus() -> None:
    seen: list[str] = []
    for model in crossfolds.MODELS:
        path = crossfolds.FOLDS / f"{model}.onnx"
        recorded = json.loads(path.with_suffix(".json").read_text())
        assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded["sha256"]
        seen += crossfolds.training_corpora(path)
    assert sorted(seen) == sorted(corpus.CORPORA)  # together they saw every corpus, each once
