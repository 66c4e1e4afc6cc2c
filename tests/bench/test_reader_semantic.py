"""The semantic-similarity experiment's parts (bench/reader/semantic.py): passages packed into the model's windows,
the columns it adds, and vectors pooled from one pass over a chunk, cached on disk as computed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.reader import fit, semantic
from ragsvc.reading.passages import passages


def test_windows_pack_whole_passages_and_a_long_one_alone() -> None:
    assert list(semantic._windows([100, 100, 100, 300, 20], 254)) == [[0, 1], [2], [3], [4]]


def test_columns_rank_the_candidates_by_similarity_and_read_the_lead() -> None:
    columns = semantic.sentence_columns(np.asarray([0.2, 0.5, 0.3]))
    assert columns[:, 0].tolist() == [0.2, 0.5, 0.3]
    assert columns[:, 1] == pytest.approx([0.3, 0.0, 0.2])
    assert columns[:, 2] == pytest.approx(np.log1p([2, 0, 1]))
    assert fit.extra_answer_columns(columns, 0) == pytest.approx([0.2, 0.5, 0.3])
    assert fit.extra_answer_columns(columns, -1) == [-1.0, 0.5, 0.0]
    assert fit.extra_answer_columns(np.zeros((0, 3)), -1) == [-1.0, -1.0, 0.0]


def test_pooled_vectors_one_per_passage_read_by_meaning_and_cached(tmp_path: Path) -> None:
    chunk = (
        "# Hives\n\nA colony of honey bees lives in a wooden box with movable frames. "
        "The queen lays the eggs.\n\nThe server listens on TCP port 5432 by default."
    )
    vectors = semantic.Vectors(tmp_path)
    pooled = vectors.pooled(chunk)
    assert pooled.shape == (len(passages(chunk)), 384) == (4, 384)
    assert np.linalg.norm(pooled, axis=1) == pytest.approx(np.ones(4), abs=1e-5)
    query = vectors.text("query", "Where do bees live?")
    bees, port = pooled[1] @ query, pooled[3] @ query
    assert bees > port + 0.1
    vectors.save()
    again = semantic.Vectors(tmp_path)
    assert np.array_equal(again.pooled(chunk), pooled)
    assert np.array_equal(again.text("query", "Where do bees live?"), query)
