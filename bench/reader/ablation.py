"""Which of the reader's word rules earn their place: each rule is taken out in turn, the reader retrained leaving
each corpus out, and judged on the corpus it never saw, beside the reader with every rule.

    python -m bench.reader.ablation [--corpus NAME ...] [--only RULE ...]

A rule is either a group of features (its columns zeroed, in the sentence rows and in the answer rows: the model
keeps its shape and loses the signal) or a rule of the analysis itself (patched out, and every feature computed
again without it). Writes bench/results/reader-ablation-DATE.json and prints a table: per rule, the mean over the
unseen corpora of each measure and its change against the full reader.
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

from bench.reader import fit, train
from bench.reader.dataset import Example
from ragsvc.reading import english, features, paraphrase
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
    Rule("english", "a question word weighs by its distinctiveness in everyday English",
         patch=lambda: _patched(english, "weight", lambda term: 1.0)),
    Rule("how_verbs", "the verbs a question asks 'how' with weigh least",
         patch=lambda: _patched(features, "_ASKS_HOW", frozenset())),
    Rule("values", "the kind of value asked (how long, how many, default) against what a sentence states",
         ("value_answered", "asks_value", "states_number", "default_stated"), ("lead_value_answered", "asks_value")),
    Rule("procedural", "asked how/which, a sentence naming something to use", ("procedural_tool", "procedural", "states_code"),
         ("procedural", "lead_states_code")),
    Rule("pointer", "a sentence that only refers elsewhere", ("pointer",)),
    Rule("yes_no", "a yes-or-no question and a sentence with a negation or modal", ("yes_no", "yes_no_modal"), ("yes_no",)),
    Rule("opening", "the question's opening word", ("asks_what", "asks_how", "asks_why", "asks_when_where_who")),
    Rule("word_rules_rank", "the rule reader's ranking (relevance.ranked) as a feature", ("rules_rank", "rules_first"),
         ("lead_rules_rank",)),
    Rule("labels_headings", "a sentence read with its label, section heading and page title",
         ("cov_context", "cov_heading", "depth", "label_kind")),
    Rule("neighbours", "the sentences next to it", ("neighbour_cov",), ("lead_neighbour_cov",)),
    Rule("names", "names in the question (compounds, options, capitals) counted apart",
         ("names_sentence", "names_chunk", "has_names"), ("lead_names_sentence", "missing_names", "has_names")),
    Rule("bigrams", "the question's adjacent pairs of terms found adjacent", ("bigrams_sentence",)),
)


def _masked(rows: np.ndarray, names: Sequence[str], columns: Sequence[str]) -> np.ndarray:
    if not columns or rows.size == 0:
        return rows
    out = rows.copy()
    out[:, [names.index(c) for c in columns]] = 0.0
    return out


def judged(by_corpus: dict[str, list[Example]], rule: Rule | None, *, seed: int) -> dict[str, dict[str, Any]]:
    """Leave-one-corpus-out measures of the reader without `rule` (None: with every rule)."""
    answer_columns = rule.answer_columns if rule else ()
    masked = {
        name: [replace(e, rows=_masked(e.rows, list(SENTENCE_FEATURES), rule.sentence_columns if rule else ()))
               for e in group]
        for name, group in by_corpus.items()
    }  # fmt: skip
    results = {}
    with fit.answer_mask([ANSWER_FEATURES.index(c) for c in answer_columns]):
        for left_out in masked:
            training = {n: g for n, g in masked.items() if n != left_out}
            model, _ = train.train(training, seed=seed)
            measures = train.judged(model, masked[left_out])
            measures["top3"] = fit.top3(masked[left_out], model.sentences)
            results[left_out] = measures
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append")
    parser.add_argument("--only", action="append", help="these rules only")
    parser.add_argument("--seed", type=int, default=fit.SEED)
    args = parser.parse_args(argv)
    names = args.corpus or list(train.corpus.CORPORA)
    rules = [r for r in RULES if not args.only or r.name in args.only]
    base_examples = {name: train.examples(name) for name in names}
    report: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "seed": args.seed}
    report["all_rules"] = judged(base_examples, None, seed=args.seed)
    _print("all rules", report["all_rules"], None)
    for rule in rules:
        if rule.patch is not None:
            with rule.patch():
                examples = {name: train.examples(name) for name in names}
            results = judged(examples, None, seed=args.seed)
        else:
            results = judged(base_examples, rule, seed=args.seed)
        report[rule.name] = {"why": rule.why, "unseen": results}
        _print(rule.name, results, report["all_rules"])
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    (train.RESULTS / f"reader-ablation-{stamp}.json").write_text(json.dumps(report, indent=1) + "\n")


MEASURES = ("top3", "answered_and_right", "auroc", "coverage", "cite_precision", "unanswerable_cited")


def mean(results: dict[str, dict[str, Any]], measure: str) -> float | None:
    values = [r[measure] for r in results.values() if r.get(measure) is not None]
    return round(sum(values) / len(values), 4) if values else None


def _print(name: str, results: dict[str, dict[str, Any]], base: dict[str, dict[str, Any]] | None) -> None:
    cells = []
    for measure in MEASURES:
        value = mean(results, measure)
        reference = mean(base, measure) if base else None
        delta = f" ({value - reference:+.3f})" if value is not None and reference is not None else ""
        cells.append(f"{measure} {value}{delta}")
    print(f"{name:>16}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
