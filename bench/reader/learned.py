"""The learned second stage screened by bench/reader/crosslab.py (variants l6, l10, r6, r10; docs/reading.md, "A
learned order for the candidates?"; not shipped): a LambdaRank forest (fit.fit_ranker) over each of the sentence
model's top K candidates orders them instead of ragsvc.reading.cross's fixed z-sum."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ragsvc.reading.features import SENTENCE_FEATURES
from ragsvc.reading.forest import Forest

__all__ = ["RANKER_FEATURES", "learned", "ranker_rows"]

# A learned second stage (bench/reader/crosslab.py, variants l6 and l10): a LambdaRank forest over each of the
# sentence model's top K candidates orders them instead of the fixed z-sum. Its columns: the sentence model's score,
# its rank (0 best), z-score and gap to the best among the K; the same of the cross score and of their z-sum; K; then
# the candidate's SENTENCE_FEATURES row (what the sentence model reads, its chunk's place in the evidence among them).
RANKER_FEATURES = (
    *(f"r_{what}_{m}" for what in ("s", "x", "zsum") for m in ("score", "rank", "z", "gap")),
    "r_k",
    *(f"r_row_{name}" for name in SENTENCE_FEATURES),
)


def _ranks(values: np.ndarray) -> np.ndarray:
    """Each value's rank among `values`, 0 the highest, ties in their order."""
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[np.argsort(-values, kind="stable")] = np.arange(len(values), dtype=np.float64)
    return ranks


def ranker_rows(head: Sequence[int], lexical: np.ndarray, cross: Mapping[int, float], rows: np.ndarray) -> np.ndarray:
    """RANKER_FEATURES of each candidate of `head` (the sentence model's top K, its order), from the sentence
    model's scores (`lexical`, by candidate), the cross scores (`cross`) and the SENTENCE_FEATURES rows (`rows`)."""
    among = list(head)
    s = np.asarray(lexical[among], dtype=np.float64)
    x = np.asarray([cross[i] for i in among], dtype=np.float64)
    zs, zx = _z(s), _z(x)
    columns = []
    for values in (s, x, zs + zx):
        columns += [values, _ranks(values), _z(values), values - values.max()]
    columns.append(np.full(len(among), float(len(among))))
    return np.column_stack([*columns, np.asarray(rows, dtype=np.float64)[among]])


def learned(
    top: Sequence[int], lexical: np.ndarray, cross: Mapping[int, float], rows: np.ndarray, ranker: Forest, k: int, *, quotes: int
) -> list[int]:
    """The first `quotes` of the sentence model's top `k` in the order of the `ranker`'s scores of their
    RANKER_FEATURES (`ranker_rows`); ties keep the sentence model's order."""
    head = list(top[:k])
    if len(head) < 2:
        return head[:quotes]
    scores = ranker.predict(ranker_rows(head, lexical, cross, rows))
    order = sorted(range(len(head)), key=lambda j: (-scores[j], j))
    return [head[j] for j in order][:quotes]


def _z(values: np.ndarray) -> np.ndarray:
    """`values` as z-scores among the top K, as ragsvc.reading.cross puts the two scores on one scale."""
    return np.asarray((values - values.mean()) / (values.std() + 1e-9), dtype=np.float64)
