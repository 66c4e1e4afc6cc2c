"""Each reader's fingerprint: the same for readers that read alike (the same kind, settings and model, however the
model file was written), another for any that may read otherwise. The answer cache keys by it
(tests/answering/test_service.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ragsvc.reading.cross import CrossEncoder
from ragsvc.reading.rules import RuleReader
from ragsvc.reading.trained import Model, TrainedReader


def test_the_rule_reader_is_its_settings() -> None:
    reader = RuleReader(min_coverage=0.5, rare_share=0.002)
    assert reader.fingerprint == RuleReader(min_coverage=0.5, rare_share=0.002).fingerprint
    assert reader.fingerprint.startswith("rules ")
    others = [RuleReader(min_coverage=0.6, rare_share=0.002), RuleReader(min_coverage=0.5, rare_share=0.001)]
    assert len({reader.fingerprint, *(other.fingerprint for other in others)}) == 3


def test_a_model_is_identified_by_its_arrays_however_its_file_was_written(tmp_path: Path) -> None:
    shipped = Model.load()
    assert len(shipped.sha256) == 64 and Model.load().sha256 == shipped.sha256
    rewritten = tmp_path / "uncompressed.npz"
    np.savez(rewritten, **shipped.arrays())  # other bytes than the shipped (compressed) file, the same arrays
    assert Model.load(rewritten).sha256 == shipped.sha256

    arrays = shipped.arrays()
    arrays["answers.value"] = arrays["answers.value"] + 1e-9  # one retrained weight
    changed = tmp_path / "changed.npz"
    np.savez_compressed(changed, **arrays)
    recalibrated = dataclasses.replace(shipped, refuse_below=shipped.refuse_below + 0.01)
    assert len({shipped.sha256, Model.load(changed).sha256, recalibrated.sha256}) == 3


def test_the_trained_reader_is_its_model_and_settings(tmp_path: Path) -> None:
    shipped = Model.load()
    cross = CrossEncoder()  # not loaded: its fingerprint is its file's sha256
    reader = TrainedReader(shipped, rare_share=0.002, pool=8)
    assert reader.fingerprint.startswith("trained ") and shipped.sha256 in reader.fingerprint
    assert TrainedReader(Model.load(), rare_share=0.002, pool=8).fingerprint == reader.fingerprint
    others = [
        TrainedReader(shipped, rare_share=0.002, pool=0),
        TrainedReader(shipped, rare_share=0.001, pool=8),
        TrainedReader(dataclasses.replace(shipped, cite_threshold=shipped.cite_threshold + 0.01), rare_share=0.002, pool=8),
        RuleReader(min_coverage=0.5, rare_share=0.002),
        TrainedReader(shipped, rare_share=0.002, pool=8, cross=cross, candidates=6),
        TrainedReader(shipped, rare_share=0.002, pool=8, cross=cross, candidates=4),
    ]
    assert len({reader.fingerprint, *(other.fingerprint for other in others)}) == 7
    assert cross.sha256 in others[-1].fingerprint
    assert TrainedReader(shipped, rare_share=0.002, pool=8, cross=cross, candidates=0).fingerprint == reader.fingerprint
