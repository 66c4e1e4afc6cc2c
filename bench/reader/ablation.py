"""Which of the reader's word rules earn their place: each rule is taken out in turn, the reader's two models refitted
leaving each corpus out, and judged on the corpus they never saw, beside the reader with every rule.

    python -m bench.reader.ablation [--corpus NAME ...] [--only RULE ...]

A rule is a group of features (its columns zeroed, in the sentence rows and in the answer rows: the models keep
their shape and lose the signal) or a rule of the analysis itself (patched out, every feature computed again
without it). For each corpus left out, a sentence model is fitted on the other corpora and judged on it (top-3: a
quote of the answer holds a key fact, where the evidence holds one), its answers composed by that model; then an
answer model fitted on the other corpora's answers gives P(right) on its answers (AUROC; answered and right). This
is the training recipe of bench/reader/train.py less its nested cross-fitting and thresholds (a rule's worth is
read from the same recipe with and without it, not from the shipped numbers).

Writes bench/results/reader-ablation-DATE.json and prints a table: per rule, the mean over the unseen corpora of
each measure and its change against every rule kept.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from bench.quality import corpus
from bench.quality.metrics import auroc
from bench.reader import fit, train
from bench.reader.dataset import Example
from ragsvc.reading import features, paraphrase
from ragsvc.reading.features import ANSWER_FEATURES, SENTENCE_FEATURES


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    why: str  # what the rule does
    sentence_columns: tuple[str, ...] = ()
    answer_columns: tuple[str, ...] = ()
    patch: Callable[[], contextlib.AbstractContextManager[None]] | None = None


@contextlib.contextmanager
def _patched(target: Any, attribute: str, value: Any) -> Iterator[None]:
    saved = getattr(target, attribute)
    setattr(target, attribute, value)
    try:
        yield
    finally:
        setattr(target, attribute, saved)


@contextlib.contextmanager
def _without_paraphrase() -> Iterator[None]:
    with _patched(paraphrase, "_PHRASES", ()), _patched(paraphrase, "_SAME_SENSE", {}):
        yield


RULES = (
    Rule("paraphrase", "users' phrases read as the documentation's words; words of one sense as one", patch=_without_paraphrase),
    Rule(
        "how_verbs",
        "the verbs a question asks 'how' with weigh least",
        patch=lambda: _patched(features, "ASKS_HOW", frozenset()),
    ),
    Rule(
        "values",
        "the kind of value asked (how long, how many, default) against what a sentence states",
        ("value_answered", "asks_value", "states_number", "default_stated"),
        ("lead_value_answered", "asks_value"),
    ),
    Rule(
        "procedural",
        "asked how or which, a sentence naming something to use",
        ("procedural_tool", "procedural", "states_code"),
        ("procedural", "lead_states_code"),
    ),
    Rule("pointer", "a sentence that only refers elsewhere", ("pointer",)),
    Rule("yes_no", "a yes-or-no question and a sentence with a negation or modal", ("yes_no", "yes_no_modal"), ("yes_no",)),
    Rule("opening", "the question's opening word", ("asks_what", "asks_how", "asks_why", "asks_when_where_who")),
    Rule(
        "labels_headings",
        "a sentence read with its label, section heading and page title",
        ("cov_context", "cov_heading", "depth", "label_kind"),
    ),
    Rule("neighbours", "the sentences next to it", ("neighbour_cov",), ("lead_neighbour_cov",)),
    Rule(
        "names",
        "names in the question (compounds, options, capitals) counted apart",
        ("names_sentence", "names_chunk", "has_names"),
        ("lead_names_sentence", "missing_names", "has_names"),
    ),
    Rule(
        "missing_terms",
        "the heaviest question term the evidence lacks (rare in the tenant)",
        ("missing_chunk",),
        ("missing_rare_weight", "missing_weight"),
    ),
)
MEASURES = ("top3", "answered_and_right", "auroc")


def _masked(rows: np.ndarray, names: Sequence[str], columns: Sequence[str]) -> np.ndarray:
    if not columns or rows.size == 0:
        return rows
    out = rows.copy()
    out[:, [names.index(c) for c in columns]] = 0.0
    return out


def judged(by_corpus: dict[str, list[Example]], rule: Rule | None, *, seed: int) -> dict[str, dict[str, Any]]:
    """The unseen-corpus measures of the reader without `rule` (None: with every rule)."""
    sentence_columns = rule.sentence_columns if rule else ()
    answer_columns = [ANSWER_FEATURES.index(c) for c in (rule.answer_columns if rule else ())]
    masked = {
        name: [replace(e, rows=_masked(e.rows, SENTENCE_FEATURES, sentence_columns), alternatives=()) for e in group]
        for name, group in by_corpus.items()
    }
    results: dict[str, dict[str, Any]] = {}
    answers: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    with fit.answer_mask(answer_columns):
        for left_out, group in masked.items():
            model = fit.fit_sentences([e for n, g in masked.items() if n != left_out for e in g], seed=seed)
            composed = [fit.compose(e, model) for e in group if e.question.kind != "injection"]
            answers[left_out] = (np.asarray([c.row for c in composed]), np.asarray([c.right for c in composed], dtype=np.int32))
            results[left_out] = {"top3": fit.top3(group, model)}
    for left_out, (rows, right) in answers.items():
        others = [n for n in answers if n != left_out]
        model = fit.fit_answers(
            np.vstack([answers[n][0] for n in others]), np.concatenate([answers[n][1] for n in others]), seed=seed
        )
        p = fit.sigmoid(model.predict(rows))
        results[left_out]["auroc"] = auroc(p.tolist(), right.astype(bool).tolist())
        answerable = [e.question.kind == "answerable" for e in by_corpus[left_out] if e.question.kind != "injection"]
        results[left_out]["answered_and_right"] = round(
            float(sum(r for r, a in zip(right, answerable, strict=True) if a) / max(sum(answerable), 1)), 4
        )
    return results


def mean(results: dict[str, dict[str, Any]], measure: str) -> float | None:
    values = [r[measure] for r in results.values() if r.get(measure) is not None]
    return round(sum(values) / len(values), 4) if values else None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append")
    parser.add_argument("--only", action="append", help="these rules only")
    parser.add_argument("--seed", type=int, default=fit.SEED)
    args = parser.parse_args(argv)
    names = args.corpus or list(corpus.CORPORA)
    rules = [r for r in RULES if not args.only or r.name in args.only]
    base = {name: train.examples(name) for name in names}
    report: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "seed": args.seed,
                              "measures": MEASURES, "rules": {}}  # fmt: skip
    report["all_rules"] = judged(base, None, seed=args.seed)
    _print("all rules", report["all_rules"], None)
    for rule in rules:
        if rule.patch is not None:
            with rule.patch():
                results = judged({name: train.examples(name) for name in names}, None, seed=args.seed)
        else:
            results = judged(base, rule, seed=args.seed)
        deltas = {m: _delta(results, report["all_rules"], m) for m in MEASURES}
        report["rules"][rule.name] = {"why": rule.why, "unseen": results, "mean_change": deltas}
        _print(rule.name, results, report["all_rules"])
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    (train.RESULTS / f"reader-ablation-{stamp}.json").write_text(json.dumps(report, indent=1) + "\n")


def _delta(results: dict[str, dict[str, Any]], base: dict[str, dict[str, Any]], measure: str) -> float | None:
    value, reference = mean(results, measure), mean(base, measure)
    return None if value is None or reference is None else round(value - reference, 4)


def _print(name: str, results: dict[str, dict[str, Any]], base: dict[str, dict[str, Any]] | None) -> None:
    cells = []
    for measure in MEASURES:
        delta = _delta(results, base, measure) if base else None
        cells.append(f"{measure} {mean(results, measure)}" + (f" ({delta:+.4f})" if delta is not None else ""))
    print(f"{name:>16}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
