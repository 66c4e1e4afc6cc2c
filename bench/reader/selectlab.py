"""EXPERIMENT: which three sentences an extractive answer quotes, given the sentence model's scores, screened
leaving each corpus out (top-3, as bench/reader/sentencelab.py prepares the folds).

    python -m bench.reader.selectlab --seed N [--out F.json]

Each rule picks three candidates from the same fold's sentence model scores; `best` is today's (`trained.choose`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence

import numpy as np

from bench.quality import corpus
from bench.reader import fit
from bench.reader.dataset import Example
from bench.reader.sentencelab import prepared
from ragsvc.reading.relevance import Candidate
from ragsvc.reading.trained import choose, near_duplicates


def _fill(found: Sequence[Candidate], scores: Sequence[float], first: list[int | None], limit: int = 3) -> list[int]:
    chosen: list[int] = []
    for i in first:
        if i is not None and i not in chosen and not any(near_duplicates(found[i], found[j]) for j in chosen):
            chosen.append(i)
        if len(chosen) == limit:
            return chosen
    for i in choose(found, scores, max_quotes=len(found)):
        if i not in chosen and not any(near_duplicates(found[i], found[j]) for j in chosen):
            chosen.append(i)
        if len(chosen) == limit:
            break
    return chosen


def _at(found: Sequence[Candidate], lead: int, step: int) -> int | None:
    c = found[lead]
    return next((i for i, o in enumerate(found) if o.marker == c.marker and o.position == c.position + step), None)


def best(found: Sequence[Candidate], scores: Sequence[float]) -> list[int]:
    return choose(found, scores)


def lead_next(found: Sequence[Candidate], scores: Sequence[float]) -> list[int]:
    """The lead, the passage after it, then the best others."""
    order = choose(found, scores, max_quotes=1)
    return _fill(found, scores, [order[0], _at(found, order[0], 1)]) if order else []


def two_then_next(found: Sequence[Candidate], scores: Sequence[float]) -> list[int]:
    """The best two, then the passage after the lead."""
    order = choose(found, scores, max_quotes=2)
    return _fill(found, scores, [*order, _at(found, order[0], 1)]) if order else []


def next_if_close(found: Sequence[Candidate], scores: Sequence[float], width: float = 2.0) -> list[int]:
    """Today's, but the third is the passage after the lead when it scores within `width` of the third."""
    order = choose(found, scores)
    if len(order) < 3:
        return order
    after = _at(found, order[0], 1)
    if after is not None and after not in order and scores[after] >= scores[order[2]] - width:
        return _fill(found, scores, [order[0], order[1], after])
    return order


def deduped(overlap: float | None) -> Callable[[Sequence[Candidate], Sequence[float]], list[int]]:
    """Today's choice with another near-duplicate rule: two passages are the same when `overlap` of the smaller's
    terms are in the other (today 0.8), or (None) only when their text is the same."""

    def same(a: Candidate, b: Candidate) -> bool:
        if overlap is None:
            return a.quote == b.quote
        return len(a.terms & b.terms) >= overlap * min(len(a.terms), len(b.terms))

    def rule(found: Sequence[Candidate], scores: Sequence[float]) -> list[int]:
        order = sorted(range(len(found)), key=lambda i: (-scores[i], found[i].marker, found[i].position))
        chosen: list[int] = []
        for i in order:
            if not any(same(found[i], found[j]) for j in chosen):
                chosen.append(i)
            if len(chosen) == 3:
                break
        return chosen

    return rule


RULES: dict[str, Callable[[Sequence[Candidate], Sequence[float]], list[int]]] = {
    "best": best,
    "lead_next": lead_next,
    "two_then_next": two_then_next,
    "next_if_close_1": lambda f, s: next_if_close(f, s, 1.0),
    "next_if_close_2": lambda f, s: next_if_close(f, s, 2.0),
    "dedupe_0.9": deduped(0.9),
    "dedupe_1.0": deduped(1.0),
    "dedupe_text": deduped(None),
    "top4": lambda f, s: choose(f, s, max_quotes=4),  # for scale: a fourth quote
}


def top3(examples: Sequence[Example], model: object, rule: Callable[..., list[int]]) -> float:
    held = [e for e in examples if e.has_positive]
    hits = 0
    for e in held:
        scores = model.predict(e.rows).tolist()  # type: ignore[attr-defined]
        hits += any(e.labels[i] for i in rule(e.found, scores))
    return hits / len(held)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=fit.SEED)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    prep = prepared(args.seed, list(corpus.CORPORA))
    report: dict[str, dict[str, float]] = {name: {} for name in RULES}
    for left_out, (packed, unseen) in prep.folds.items():
        model = fit.fit_sentences([e for n in packed for e in packed[n]], seed=prep.seed)
        for name, rule in RULES.items():
            report[name][left_out] = round(top3(unseen, model, rule), 4)
        print(left_out, {n: report[n][left_out] for n in RULES}, flush=True)
    for name in RULES:
        report[name]["mean"] = round(float(np.mean(list(report[name].values()))), 4)
    print(json.dumps({n: report[n]["mean"] for n in RULES}), flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"seed": args.seed, "rules": report}, handle, indent=1)


if __name__ == "__main__":
    main()
