"""The answerability model's label and the refusal counts of bench/reader/refuselab.py (an offline experiment)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.quality.questions import Question
from bench.reader import dataset, fit, refuselab
from bench.reader.dataset import Example

HIT = {"document_id": "d", "chunk_index": 0, "section": "", "page_title": "Signals", "score": 0.5}


def example(qid: str, kind: str, text: str) -> Example:
    facts = ("30 seconds",) if kind != "unanswerable" else ()
    question = Question(qid, "dev", kind, "natural", "How long is the grace period?", (), key_facts=facts)
    found = {"search": question.question, "hits": [{**HIT, "text": text}], "chunks": 10, "frequencies": {}}
    return dataset.example("c", question, found)


HOLDS = "The grace period is 30 seconds."
LACKS = "SIGTERM drains the queue first."


def test_the_evidence_answers_when_the_question_should_be_answered_and_a_sentence_read_holds_a_key_fact() -> None:
    readings = [example("a1", "answerable", HOLDS), example("a2", "answerable", LACKS), example("u1", "unanswerable", HOLDS)]
    assert fit.evidence_answers(readings).tolist() == [True, False, False]


def outcome(e: Example, *, answered: bool, right: bool = False, cited: bool = False) -> fit.Outcome:
    return fit.Outcome(e, e, 0.5, answered, right, cited)


def test_refusals_count_answerables_those_whose_reading_holds_a_key_fact_and_unanswerables() -> None:
    got = refuselab.refusals([
        outcome(example("a1", "answerable", HOLDS), answered=False),
        outcome(example("a2", "answerable", HOLDS), answered=True, right=True, cited=True),
        outcome(example("a3", "answerable", LACKS), answered=False),
        outcome(example("u1", "unanswerable", LACKS), answered=False),
        outcome(example("u2", "unanswerable", LACKS), answered=True, cited=True),
        outcome(example("f1", "followup", HOLDS), answered=False),
    ])  # fmt: skip
    assert {k: v for k, v in got.items() if k != "cited_ids"} == {
        "answerables": 3,
        "answerables_refused": 2,
        "evidence_answerables": 2,
        "evidence_refused": 1,
        "unanswerables": 2,
        "unanswerables_refused": 1,
        "answered_right": 1,
        "cite_right": 1,
    }
    assert got["cited_ids"] == ["a2", "u2"]


def test_the_mean_weighs_each_corpus_the_same_and_sums_cite_answers() -> None:
    def arm(right: int, answerables: int, cited: int) -> dict[str, Any]:
        counts = {"answerables": answerables, "answerables_refused": 0, "evidence_answerables": 0, "evidence_refused": 0}
        return {**counts, "unanswerables": 4, "unanswerables_refused": 2, "answered_right": right, "auroc": 0.8,
                "followups_right": None, "cited": cited, "cite_right": cited}  # fmt: skip

    folds = {"big": {"p_right": arm(90, 100, 3)}, "small": {"p_right": arm(1, 10, 2)}}
    mean = refuselab.mean(folds, "p_right")
    assert mean["answered_right"] == 0.5  # (0.9 + 0.1) / 2, not 91 / 110
    assert mean["unanswerables_refused"] == 0.5
    assert mean["evidence_refused"] is None  # no corpus has a reading holding a key fact
    assert (mean["cited"], mean["cite_right"], mean["auroc"], mean["followups_right"]) == (5, 5, 0.8, None)


def test_the_matched_level_refuses_the_unanswerables_as_often_as_the_level_on_p_right() -> None:
    p = np.asarray([0.1, 0.15, 0.3, 0.5, 0.05])
    q = np.asarray([0.6, 0.2, 0.4, 0.1, 0.9])
    unanswerable = np.asarray([True, True, True, True, False])
    level = refuselab.matched_level(q, p, 0.2, unanswerable)  # p refuses two of the four unanswerables
    assert int(np.sum(q[unanswerable] < level)) == 2 and level == 0.4
    assert refuselab.matched_level(q, p, 0.01, unanswerable) == 0.1  # none refused: the lowest, nothing under it
    assert refuselab.matched_level(q, p, 0.9, unanswerable) == 1.0  # all refused
