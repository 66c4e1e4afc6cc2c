"""The leave-one-out cross-encoders (bench/quality/folds/cross-*.onnx): each corpus's extractive quotes are
re-ranked by the one that never saw it, in `make train-reader` (the answer models' rows and thresholds) and in
`make eval` (RAG_READER_CROSS_MODEL), as the fold reader models never saw it (without-<corpus>.npz).

- cross-old6.onnx: trained on pgdocs, pydocs, httpd, handbook, sqlite and gitdocs (branch cross);
- cross-new4.onnx: the same recipe on djangodocs, postfix, borgdocs and zshdocs (`python -m bench.reader.cross_train
  --corpus djangodocs --corpus postfix --corpus borgdocs --corpus zshdocs --no-folds`).

Each has a JSON file beside it recording its training corpora and sha256; `for_corpus` checks both against the
model file (its metadata records its training run) and that exactly one model never saw the corpus.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ragsvc.reading.cross import CrossEncoder

__all__ = ["FOLDS", "MODELS", "for_corpus", "training_corpora"]

FOLDS = Path(__file__).resolve().parent / "folds"
MODELS = ("cross-old6", "cross-new4")


def training_corpora(path: Path) -> list[str]:
    """The corpora the cross-encoder at `path` was trained on, as the JSON beside it records them, checked against
    the model file's sha256 and its own record of its training run."""
    recorded = json.loads(path.with_suffix(".json").read_text())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if recorded["sha256"] != digest:
        raise ValueError(f"{path.name}: sha256 {digest} is not the recorded {recorded['sha256']}")
    corpora = list(recorded["corpora"])
    if sorted(CrossEncoder(path).corpora) != sorted(corpora):
        raise ValueError(f"{path.name}: trained on {CrossEncoder(path).corpora}, recorded {corpora}")
    return corpora


def for_corpus(name: str, folds: Path = FOLDS) -> Path:
    """The fold cross-encoder that never saw corpus `name`."""
    unseen = [path for path in (folds / f"{m}.onnx" for m in MODELS) if name not in training_corpora(path)]
    if len(unseen) != 1:
        raise ValueError(f"{len(unseen)} fold cross-encoders never saw {name}: {[p.name for p in unseen]}")
    return unseen[0]
