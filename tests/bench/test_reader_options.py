"""A follow-up's training example holds a reading per search the server makes for it (bench/reader/dataset.py), and
the offline reader answers from the reading it judges likelier right, as the pipeline does (bench/reader/fit.py)."""

from __future__ import annotations

import numpy as np

from bench.quality.questions import Question
from bench.reader import dataset, fit

HIT = {"document_id": "d", "chunk_index": 0, "section": "", "page_title": "Signals", "score": 0.5}


def row(search: str, text: str) -> dict[str, object]:
    return {"search": search, "hits": [{**HIT, "text": text}], "chunks": 10, "frequencies": {}}


def test_a_follow_up_is_read_with_each_searchs_evidence_and_labelled_by_its_key_fact() -> None:
    question = Question("f1", "dev", "followup", "natural", "How long is it?", ("What happens on SIGTERM?",),
                        key_facts=("30 seconds",))  # fmt: skip
    found = {**row("How long is SIGTERM?", "SIGTERM drains the queue."),
             "alternatives": [row("What happens on SIGTERM? How long is it?", "The grace period is 30 seconds.")]}  # fmt: skip
    example = dataset.example("c", question, found)
    assert [o.analysis.search for o in example.options] == [
        "How long is SIGTERM?",
        "What happens on SIGTERM? How long is it?",
    ]
    assert not example.has_positive and example.alternatives[0].has_positive
    assert example.options[1].alternatives == ()


def test_each_question_keeps_its_likeliest_reading_the_first_on_a_tie() -> None:
    p = np.asarray([0.2, 0.7, 0.5, 0.4, 0.4, 0.9])
    owners = np.asarray([0, 0, 1, 2, 2, 3])
    assert fit.chosen(p, owners).tolist() == [1, 2, 3, 5]
