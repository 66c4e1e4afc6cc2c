"""EXPERIMENT: refuse on a separate answerability model instead of on P(right), measured leaving each corpus out.

    python -m bench.reader.refuselab [--seed N] [--corpus NAME ...] [--out F.json]

Today the reader refuses (INSUFFICIENT_EVIDENCE) when P(right) of its best answer is under `refuse_below`. P(right)
is trained on "a quoted sentence holds a key fact", so it mixes whether the evidence holds the answer with whether
the quotes found it. The arm tried here keeps the answer model for P(right), the choice of reading and CITE, and
refuses instead when P(evidence answers) is under a level of its own. That model is an answer model's recipe
(`fit.fit_answers`, the same ANSWER_FEATURES rows) labelled `fit.evidence_answers`: the question should be answered
and its packed evidence holds a key fact.

Per corpus left out, on the nine others, exactly `bench.reader.train`'s discipline (`train.readings`: chunk models
fitted without each training corpus, answer rows cross-fitted, out-of-fold P): arm `p_right` is `train.fitted`'s
model as `make train-reader` writes it; arm `answerability` adds the gate, its level chosen as `refuse_below` is
(at most 5% of the training corpora's questions whose chosen reading holds a key fact refused) on out-of-fold P of
gates fitted without each training corpus (`train.held_out_p`); arm `matched` is the same gate under the level that
refuses the training corpora's unanswerables as often as `refuse_below` does on them (`matched_level`: the hypothesis
at equal refusal of unanswerables). All are judged on the corpus left out (`fit.outcomes`). No shipped model is
trained and nothing is written but `--out`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.quality import corpus
from bench.reader import fit, train
from bench.reader.dataset import Example

# p_right: today, refused under refuse_below on P(right); answerability: refused under the gate's level chosen as
# refuse_below is (5% of the questions whose reading holds a key fact); matched: under the gate's level that refuses
# the training corpora's unanswerables as often as refuse_below does (the hypothesis at equal refusal of those)
ARMS = ("p_right", "answerability", "matched")


def refusals(outcomes: Sequence[fit.Outcome]) -> dict[str, Any]:
    """What `fit.metrics` does not count: answerable questions refused, of them those whose chosen reading holds a key
    fact (out of the answerables whose reading holds one), unanswerables refused, and CITE answers right."""
    answerable = [o for o in outcomes if o.example.question.kind == "answerable"]
    held = [o for o in answerable if o.read.has_positive]
    unanswerable = [o for o in outcomes if o.example.question.kind == "unanswerable"]
    cited = [o for o in outcomes if o.cited]
    return {
        "answerables": len(answerable),
        "answerables_refused": sum(1 for o in answerable if not o.answered),
        "evidence_answerables": len(held),
        "evidence_refused": sum(1 for o in held if not o.answered),
        "unanswerables": len(unanswerable),
        "unanswerables_refused": sum(1 for o in unanswerable if not o.answered),
        "answered_right": sum(1 for o in answerable if o.right),
        "cite_right": sum(1 for o in cited if o.right),
        "cited_ids": sorted(o.example.question.id for o in cited),
    }


def matched_level(q: np.ndarray, p: np.ndarray, below: float, unanswerable: np.ndarray) -> float:
    """The level on `q` under which as many of the `unanswerable` questions fall as fall under `below` on `p`: refusing
    on `q` under it turns those questions away as often as refusing on `p` under `below` does."""
    held = np.sort(q[unanswerable])
    refused = int(np.sum(p[unanswerable] < below))
    if held.size == 0:
        return 0.0
    return float(held[refused]) if refused < held.size else 1.0


def fold(by_corpus: dict[str, list[Example]], chunk_models: train.ChunkModels, left_out: str, seed: int) -> dict[str, Any]:
    """Every arm trained without `left_out` and judged on it."""
    r = train.readings({n: e for n, e in by_corpus.items() if n != left_out}, chunk_models, seed=seed)
    model, levels = train.fitted(r, chunk_models, seed=seed)
    answers = fit.evidence_answers(r.order)
    q = train.held_out_p(r.rows, answers.astype(np.int32), r.groups, seed=seed)
    gate_below = fit.refuse_threshold(q[r.read], answers[r.read])
    unanswerable = np.asarray([r.order[i].question.kind == "unanswerable" for i in r.read])
    matched = matched_level(q[r.read], r.p[r.read], model.refuse_below, unanswerable)
    gate = fit.fit_answers(r.rows, answers.astype(np.int32), seed=seed)
    unseen = [fit.packed(e, model.chunks) for e in by_corpus[left_out]]
    result: dict[str, Any] = {"levels": {**levels, "gate_below": gate_below, "gate_matched_below": matched}}
    arms = {"p_right": (model.refuse_below, None), "answerability": (gate_below, gate), "matched": (matched, gate)}
    for arm, (refuse_t, chosen_gate) in arms.items():
        got = fit.outcomes(unseen, model.sentences, model.answers, model.cite_threshold, refuse_t, chosen_gate)
        result[arm] = {**fit.metrics(got), **refusals(got)}
    return result


TOTALS = {
    "answered_right": "answerables",
    "answerables_refused": "answerables",
    "evidence_refused": "evidence_answerables",
    "unanswerables_refused": "unanswerables",
}


def mean(folds: dict[str, dict[str, Any]], arm: str) -> dict[str, Any]:
    """Over the corpora left out: the mean of each share (a corpus weighs the same; None when no corpus has the
    share), AUROC's and follow-ups right's, CITE answers summed."""

    def average(values: Sequence[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return round(float(np.mean(known)), 4) if known else None

    rows = [f[arm] for f in folds.values()]
    out: dict[str, Any] = {k: average([r[k] / r[n] if r[n] else None for r in rows]) for k, n in TOTALS.items()}
    out["auroc"] = average([r["auroc"] for r in rows])
    out["followups_right"] = average([r["followups_right"] for r in rows])
    out["cited"] = sum(r["cited"] for r in rows)
    out["cite_right"] = sum(r["cite_right"] for r in rows)
    return out


def table(folds: dict[str, dict[str, Any]]) -> str:
    """A markdown table, each cell the arms' values in ARMS' order."""
    head = ("corpus", "answered and right", "answerables refused", "key fact read, refused", "unanswerables refused",
            "AUROC", "CITE (right of CITEd)")  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def count(row: dict[str, Any], key: str) -> str:
        return f"{row[key]}/{row[TOTALS[key]]} ({100 * row[key] / row[TOTALS[key]]:.1f}%)" if row[TOTALS[key]] else "-"

    def share(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    for name, f in folds.items():
        rows = [f[arm] for arm in ARMS]
        cells = [" / ".join(count(row, k) for row in rows) for k in TOTALS]
        cells += [
            " / ".join(str(row["auroc"]) for row in rows),
            " / ".join(f"{row['cite_right']}/{row['cited']}" for row in rows),
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    means = [mean(folds, arm) for arm in ARMS]
    cells = [" / ".join(share(m[k]) for m in means) for k in TOTALS]
    cells += [" / ".join(str(m["auroc"]) for m in means), " / ".join(f"{m['cite_right']}/{m['cited']}" for m in means)]
    lines.append("| **mean** | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", help="these corpora only (default: every corpus)")
    parser.add_argument("--seed", type=int, default=fit.SEED)
    parser.add_argument("--out", type=Path, help="write the per-corpus results and means here (JSON)")
    args = parser.parse_args(argv)
    names = args.corpus or list(corpus.CORPORA)
    by_corpus = {name: train.examples(name, packed=None) for name in names}
    chunk_models = train.ChunkModels(by_corpus, seed=args.seed)
    folds: dict[str, dict[str, Any]] = {}
    for left_out in names:
        folds[left_out] = fold(by_corpus, chunk_models, left_out, args.seed)
        print(f"without {left_out}: {json.dumps(folds[left_out])}", flush=True)
    report = {"seed": args.seed, "folds": folds, "mean": {arm: mean(folds, arm) for arm in ARMS}}
    print(table(folds))
    print(json.dumps(report["mean"]))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
