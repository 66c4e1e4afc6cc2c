"""EXPERIMENT: the questions whose packed evidence holds a key fact that none of the three quotes holds, read with
the fold models `make eval` judges each corpus with (bench/quality/folds/without-<corpus>.npz).

    python -m bench.reader.misses CORPUS ...

Prints, over the answerable questions so missed, how often the best-scored key-fact sentence's feature is above or
below the lead's (per SENTENCE_FEATURES column), whether it sits in the lead's chunk and where, its rank among the
candidates, and a sample of 40 (question, lead, key-fact sentence) to read.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.reader import fit
from bench.reader.sentencelab import examples
from ragsvc.reading import features
from ragsvc.reading.trained import Model, choose

FOLDS = Path(__file__).resolve().parents[2] / "bench" / "quality" / "folds"


def main(argv: Sequence[str] | None = None) -> None:
    names = list(argv if argv is not None else sys.argv[1:])
    diffs: list[np.ndarray] = []
    samples: list[tuple[str, str, str, str, int, bool, int]] = []
    for name in names:
        model = Model.load(FOLDS / f"without-{name}.npz")
        for pool in examples(name):
            e = fit.packed(pool, model.chunks)
            if not e.has_positive or e.question.kind != "answerable":
                continue
            scores = model.sentences.predict(e.rows)
            chosen = choose(e.found, scores.tolist())
            if any(e.labels[i] for i in chosen):
                continue
            key = max((i for i in range(len(e.found)) if e.labels[i]), key=lambda i: scores[i])
            lead = chosen[0]
            diffs.append(e.rows[key] - e.rows[lead])
            samples.append((name, e.question.question, e.found[lead].quote[:200], e.found[key].quote[:200],
                            int(sum(1 for s in scores if s > scores[key])), e.found[key].marker == e.found[lead].marker,
                            e.found[key].position - e.found[lead].position))  # fmt: skip
    d = np.asarray(diffs)
    print("missed with the key fact packed:", len(d))
    for j, column in enumerate(features.SENTENCE_FEATURES):
        print(f"{column:22s} key-fact above the lead {np.mean(d[:, j] > 0):.2f}, below {np.mean(d[:, j] < 0):.2f}")
    same = [s for s in samples if s[5]]
    quartiles = np.percentile([s[4] for s in samples], [25, 50, 75])
    after, before = sum(1 for s in same if s[6] > 0), sum(1 for s in same if s[6] < 0)
    print(f"in the lead's chunk {len(same) / len(samples):.2f}: after it {after}, before it {before}; rank {quartiles}")
    random.seed(1)
    for s in random.sample(samples, min(40, len(samples))):
        print(f"---- {s[0]} | rank {s[4]}\nQ: {s[1]}\nLEAD: {s[2]}\nKEY: {s[3]}")


if __name__ == "__main__":
    main()
