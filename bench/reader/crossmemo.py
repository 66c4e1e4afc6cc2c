"""A cross-encoder's scores memoised on disk by (search text, quote): training the reader with the re-ranked quotes
(`make train-reader`, bench/reader/crosslab.py) scores the same pairs in every fold and every run."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragsvc.reading.cross import CrossEncoder

MEMO = Path(__file__).resolve().parents[2] / ".bench" / "cross"


class Scores:
    """Cross scores memoised by (search text, quote), kept on disk between runs (by default in .bench/cross/,
    a file per model: scores-<its sha256's first 12>.pkl)."""

    def __init__(self, model: CrossEncoder, path: Path | None = None) -> None:
        self.model = model
        self._path = path if path is not None else MEMO / f"scores-{model.sha256[:12]}.pkl"
        self._memo: dict[tuple[str, str], float] = pickle.loads(self._path.read_bytes()) if self._path.exists() else {}
        self.scored = 0

    def __call__(self, question: str, quotes: Sequence[str]) -> np.ndarray:
        todo = [q for q in dict.fromkeys(quotes) if (question, q) not in self._memo]
        if todo:
            for q, s in zip(todo, self.model.score(question, todo), strict=True):
                self._memo[(question, q)] = float(s)
            self.scored += len(todo)
        return np.asarray([self._memo[(question, q)] for q in quotes], dtype=np.float64)

    def save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._path.write_bytes(pickle.dumps(self._memo))
