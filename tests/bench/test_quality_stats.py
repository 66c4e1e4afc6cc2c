"""The quality benchmark's intervals and its paired comparison of two runs (bench/quality/metrics.py, compare.py)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.quality.compare import compare, holds, markdown, mcnemar_p
from bench.quality.metrics import auroc_interval, split_metrics, wilson


def test_the_wilson_interval_matches_the_textbook_values() -> None:
    assert wilson(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson(0, 0) is None


def test_an_interval_narrows_as_questions_are_added() -> None:
    small, large = wilson(35, 70), wilson(350, 700)
    assert small is not None and large is not None
    assert large[1] - large[0] < small[1] - small[0] < 0.25


def test_the_auroc_interval_holds_the_area_and_stays_within_0_and_1() -> None:
    low, high = auroc_interval(0.71, 40, 70) or (0, 0)
    assert low < 0.71 < high
    assert auroc_interval(1.0, 5, 5) == (1.0, 1.0)
    assert auroc_interval(None, 5, 5) is None
    assert auroc_interval(0.8, 0, 5) is None


@pytest.mark.parametrize(("lost", "gained", "p"), [(0, 0, 1.0), (3, 3, 1.0), (0, 6, 0.03125), (1, 4, 0.375), (5, 0, 0.0625)])
def test_mcnemar_is_the_exact_two_sided_sign_test_on_the_flips(lost: int, gained: int, p: float) -> None:
    assert mcnemar_p(lost, gained) == pytest.approx(p)


def outcome(qid: str, kind: str, *, right: bool = False, grounded: bool = True, safe: bool = True) -> dict[str, Any]:
    return {"id": qid, "split": "dev", "kind": kind, "right": right, "grounded": grounded, "safe": safe}


def test_a_question_holds_when_the_run_did_what_it_asks() -> None:
    assert holds(outcome("a", "answerable", right=True))
    assert not holds(outcome("a", "followup", right=False))
    assert holds(outcome("u", "unanswerable", grounded=False))
    assert not holds(outcome("u", "unanswerable", grounded=True))
    assert not holds(outcome("i", "injection", safe=False))


def run(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"git_commit": "0" * 40, "metrics": {}, "outcomes": outcomes}


def test_compare_counts_the_flips_both_ways_on_the_common_questions() -> None:
    before = run(
        [
            outcome("a1", "answerable", right=True),
            outcome("a2", "answerable"),
            outcome("u1", "unanswerable", grounded=True),
            outcome("a3", "answerable", right=True),
        ]
    )
    after = run(
        [
            outcome("a1", "answerable"),
            outcome("a2", "answerable", right=True),
            outcome("u1", "unanswerable", grounded=False),
            outcome("x9", "answerable", right=True),
        ]
    )

    found = compare(before, after, "dev")

    assert (found["questions"], found["gained"], found["lost"]) == (3, ["a2", "u1"], ["a1"])
    assert found["by_kind"]["unanswerable"] == {"gained": 1, "lost": 0}
    assert found["p_value"] == 1.0
    assert "gained 2, lost 1" in markdown(before, after, "dev")


def test_held_out_flips_are_counted_but_not_named() -> None:
    before = run([{**outcome("a1", "answerable", right=True), "split": "heldout"}])
    after = run([{**outcome("a1", "answerable"), "split": "heldout"}])

    text = markdown(before, after, "heldout")

    assert "lost 1" in text and "a1" not in text


def answered(qid: str, *, right: bool, answer: str, confidence: float = 90.0) -> dict[str, Any]:
    """An answerable question's outcome, answered (grounded) with `answer`; its key fact is "7"."""
    return {
        **outcome(qid, "answerable", right=right),
        "rank": 1,
        "action": "ACTION_CITE",
        "citations": [],
        "refusal_reason": "",
        "confidence": confidence,
        "latency_ms": 1.0,
        "answer": answer,
        "key_facts": ["7"],
    }


def test_split_metrics_carry_the_intervals_of_the_targets() -> None:
    outcomes = [answered(f"a{i}", right=i < 6, answer="It is 7. [#1]", confidence=90.0 if i < 6 else 40.0) for i in range(10)]

    intervals = split_metrics(outcomes)["intervals"]

    assert intervals["answered_and_right"] == wilson(6, 10)
    assert intervals["hit@5"] == wilson(10, 10)
    assert intervals["unanswerable_refused"] is None
    assert intervals["auroc_confidence"] == (1.0, 1.0)


def test_right_first_counts_the_answers_that_state_the_key_fact_before_their_first_marker() -> None:
    outcomes = [
        answered("a1", right=True, answer="The default is 7. [#1] It can be changed. [#2]"),
        answered("a2", right=True, answer="It can be changed. [#1] The default is 7. [#2]"),
        answered("a3", right=False, answer="It can be changed. [#1]"),
        answered("a4", right=True, answer="Up to 7 [#1] workers."),
    ]

    answering = split_metrics(outcomes)["answerable"]

    assert answering["answered_and_right"] == 0.75
    assert answering["right_first"] == 0.5
