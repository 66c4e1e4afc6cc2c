"""How the engines fuse their dense and BM25 legs (`layout.fuse`, `layout.fused_ids`)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ragsvc.retrieval.layout import DENSE, LEG_SHARES, SPARSE, fuse, fused_ids


@dataclass(frozen=True)
class Point:
    id: str
    score: float


def points(**scores: float) -> list[Point]:
    return [Point(name, score) for name, score in sorted(scores.items(), key=lambda item: -item[1])]


def test_a_clear_lead_in_meaning_outranks_a_small_lead_in_both_legs() -> None:
    # By rank (RRF, k=60) "b" wins: 1/61 + 1/62 against "a"'s 1/61 + 1/63. By score "a" is far nearer in meaning
    # and nearly as good in words.
    dense = points(a=0.9, b=0.2, c=0.19)
    sparse = points(b=5.0, c=4.95, a=4.9)

    fused = fuse([(DENSE, dense), (SPARSE, sparse)], 3)

    assert [p.id for p in fused] == ["a", "b", "c"]


def test_each_leg_counts_its_share_of_the_score_scaled_to_its_best() -> None:
    dense = points(a=0.8, b=0.4, c=0.2)
    sparse = points(c=12.0, b=3.0)  # "a" shares no term with the question: 0 from this leg

    fused = fuse([(DENSE, dense), (SPARSE, sparse)], 3)

    expected = {
        "a": LEG_SHARES[DENSE],
        "b": LEG_SHARES[DENSE] * 0.5 + LEG_SHARES[SPARSE] * 0.25,
        "c": LEG_SHARES[DENSE] * 0.25 + LEG_SHARES[SPARSE],
    }
    assert [p.id for p in fused] == sorted(expected, key=lambda name: -expected[name])
    assert LEG_SHARES[DENSE] + LEG_SHARES[SPARSE] == pytest.approx(1.0)


def test_the_candidates_are_the_first_legs_and_the_limit_cuts_them() -> None:
    dense = points(a=0.5, b=0.4)
    sparse = points(z=9.0, b=1.0)  # "z" is not a candidate: the first leg scored every candidate

    assert [p.id for p in fuse([(DENSE, dense), (SPARSE, sparse)], 5)] == ["a", "b"]
    assert [p.id for p in fuse([(DENSE, dense), (SPARSE, sparse)], 1)] == ["a"]
    assert fuse([(DENSE, []), (SPARSE, sparse)], 5) == []
    assert fuse([], 5) == []


def test_one_leg_keeps_its_own_order() -> None:
    sparse = points(a=3.0, b=2.0, c=1.0)

    assert [p.id for p in fuse([(SPARSE, sparse)], 3)] == ["a", "b", "c"]


def test_ids_fuse_as_their_points_do() -> None:
    dense = points(a=0.8, b=0.4, c=0.2, d=0.1)
    sparse = points(c=12.0, b=3.0, z=20.0)  # "z" is not a candidate (the first leg's are), yet the leg's best
    legs = [(DENSE, dense), (SPARSE, sparse)]

    by_id = fused_ids([(name, {p.id: p.score for p in found}) for name, found in legs], 3)

    assert by_id == [p.id for p in fuse(legs, 3)] == ["a", "c", "b"]


def test_equal_fused_scores_are_ordered_by_id_whatever_the_order_given() -> None:
    dense = {"b": 0.5, "a": 0.5, "c": 0.25}

    assert fused_ids([(DENSE, dense)], 2) == ["a", "b"]
    assert fused_ids([(DENSE, dict(reversed(dense.items())))], 2) == ["a", "b"]
