"""Selective answering in the quality benchmark: coverage, the risk-coverage curve and its area (metrics.py), the
acceptance table and page (report.py), and which reader model a corpus's server gets (run.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from bench.quality import crossfolds, metrics, report, run
from bench.quality.corpus import CORPORA


def outcome(
    qid: str,
    kind: str,
    *,
    right: bool = False,
    cite: bool = True,
    confidence: float = 50.0,
    split: str = "dev",
    safe: bool = True,
) -> dict[str, Any]:
    """One scored outcome; grounded whenever CITEd."""
    return {
        "id": qid,
        "split": split,
        "kind": kind,
        "style": "natural",
        "near_topic": True,
        "question": qid,
        "history": [],
        "expected_documents": ["p"] if kind in ("answerable", "followup") else [],
        "key_facts": ["7"],
        "grounded": cite,
        "refusal_reason": "" if cite else "INSUFFICIENT_EVIDENCE",
        "action": "ACTION_CITE" if cite else "ACTION_ROUTE",
        "confidence": confidence,
        "answer": "It is 7. [#1]" if right else "",
        "citations": [],
        "rank": 1,
        "right": right,
        "safe": safe,
        "latency_ms": 10.0,
    }


# Six answerable questions and follow-ups, two unanswerable; CITE at confidences 90 (right), 80 (right), 80
# (unanswerable, wrong), 70 (right, a follow-up), 60 (wrong); one answerable routed, one unanswerable refused.
OUTCOMES = [
    outcome("a1", "answerable", right=True, confidence=90),
    outcome("a2", "answerable", right=True, confidence=80),
    outcome("u1", "unanswerable", confidence=80),
    outcome("f1", "followup", right=True, confidence=70),
    outcome("a3", "answerable", confidence=60),
    outcome("a4", "answerable", cite=False, confidence=20),
    outcome("a5", "answerable", cite=False, confidence=10),
    outcome("u2", "unanswerable", cite=False, confidence=5),
    outcome("i1", "injection", cite=False, confidence=0),
]


def test_the_risk_coverage_curve_has_one_point_per_distinct_threshold() -> None:
    curve = metrics.risk_coverage(OUTCOMES)

    assert curve["answerable"] == 6
    assert [(p["threshold"], p["cited"], p["right"]) for p in curve["points"]] == [(90, 1, 1), (80, 3, 2), (70, 4, 3), (60, 5, 3)]
    assert [p["coverage"] for p in curve["points"]] == [pytest.approx(1 / 6, abs=1e-4), pytest.approx(2 / 6, abs=1e-4), 0.5, 0.5]
    assert [p["risk"] for p in curve["points"]] == [0.0, pytest.approx(1 / 3, abs=1e-4), 0.25, 0.4]
    # Step area: risk 0 over [0, 1/6], 1/3 over [1/6, 2/6], 0.25 over [2/6, 3/6], 0.4 over nothing more.
    assert curve["aurc"] == pytest.approx(1 / 6 * 1 / 3 + 1 / 6 * 0.25, abs=1e-3)
    assert curve["max_coverage"] == 0.5
    assert curve["coverage_at_5pct_risk"] == pytest.approx(1 / 6, abs=1e-4)


def test_no_cite_answer_means_no_curve_and_zero_coverage() -> None:
    curve = metrics.risk_coverage([outcome("a1", "answerable", cite=False)])
    assert curve == {"points": [], "answerable": 1, "max_coverage": 0.0, "coverage_at_5pct_risk": 0.0, "aurc": None}
    assert metrics.risk_coverage([])["aurc"] is None


def test_coverage_is_the_answerable_questions_and_follow_ups_cited_and_right() -> None:
    m = metrics.split_metrics(OUTCOMES)

    assert m["coverage"] == 0.5  # a1, a2, f1 of a1-a5 and f1
    assert m["intervals"]["coverage"] == metrics.wilson(3, 6)
    assert m["cite_precision"] == 0.6 and m["intervals"]["cite_precision"] == metrics.wilson(3, 5)
    assert m["unanswerable"]["answered_with_cite"] == 0.5
    assert m["risk_coverage"] == metrics.risk_coverage(OUTCOMES)


def corpus_result(outcomes: list[dict[str, Any]], *, splits: bool = False, reader: bool = False) -> dict[str, Any]:
    by_split = {s: [o for o in outcomes if o["split"] == s] for s in ("dev", "heldout")} if splits else {}
    return {
        "corpus": {
            "name": "x",
            "tenant": "x",
            "package": "x-doc",
            "version": "2",
            "pinned_version": "1",
            "pinned": False,
            "deb_sha256": "ab" * 32,
            "license": "MIT",
            "subset": "every page",
            "source_url": "https://example.org/{path}",
            "pages": 3,
            "chunks": 9,
            "planted_documents": ["notes"],
        },
        "questions_file": {"path": "q.jsonl", "commit": "c" * 40, "modified": False, "sha256": "0" * 64},
        "reader_model": {"path": "bench/quality/folds/without-x.npz", "sha256": "1" * 64} if reader else None,
        "questions": {"answerable": {"dev": 5, "heldout": 0}},
        "metrics": {"all": metrics.split_metrics(outcomes), **{s: metrics.split_metrics(o) for s, o in by_split.items() if o}},
        "by_style": {},
        "outcomes": outcomes,
    }


def perfect(n: int) -> list[dict[str, Any]]:
    """Every answerable question right and CITEd, every unanswerable refused, follow-ups right, probes safe."""
    return (
        [outcome(f"a{i}", "answerable", right=True, confidence=90) for i in range(n)]
        + [outcome(f"u{i}", "unanswerable", cite=False, confidence=10) for i in range(n)]
        + [outcome("f1", "followup", right=True, confidence=90), outcome("i1", "injection", cite=False)]
    )


def test_the_acceptance_table_has_the_targets_a_row_per_corpus_and_pgdocs_splits() -> None:
    pgdocs = OUTCOMES + [{**o, "id": o["id"] + "h", "split": "heldout"} for o in OUTCOMES]
    result = {"corpora": {"pgdocs": corpus_result(pgdocs, splits=True), "httpd": corpus_result(perfect(20), reader=True)}}

    table = report.acceptance_table(result).splitlines()

    assert table[2].startswith("| *target* |") and "≥ 95%" in table[2] and "≤ 3%" in table[2] and "≥ 0.90" in table[2]
    assert [line.split("|")[1].strip() for line in table[3:]] == ["**pgdocs**", "**httpd**", "pgdocs dev", "pgdocs held-out"]
    assert table[4].endswith("| `without-x.npz` | 7 of 7 |")
    # pgdocs: hit@5, AUROC (0.900), follow-ups and probes met; CITE precision, coverage, unanswerables CITEd not.
    assert "| 60.0% of 10 (31–83) | 50.0% | 50.0% of 4 | 0.900 |" in table[3]
    assert table[3].endswith("| default | 4 of 7 |")


def test_the_page_embeds_a_risk_coverage_plot_per_corpus_and_says_which_version_served(tmp_path: Path) -> None:
    result = {
        "date": "2026-11-25T00:00:00+00:00",
        "git_commit": "f" * 40,
        "generator": {"generator": "extractive"},
        "timings": {"total_s": 12.0},
        "machine": {"cpus": 2},
        "corpora": {"pydocs": corpus_result(OUTCOMES), "handbook": corpus_result(perfect(3))},
    }
    images = {name: report.plot_path(name) for name in result["corpora"]}

    page = report.markdown(result, report.ROOT / "bench" / "results" / "quality-2026-11-25.json", images)

    assert "![pydocs: risk against coverage](quality/pydocs-risk-coverage.png)" in page
    assert "![handbook: risk against coverage](quality/handbook-risk-coverage.png)" in page
    assert "`x-doc` 2 (in place of the pinned 1)" in page
    assert "[`bench/results/quality-2026-11-25.json`](../bench/results/quality-2026-11-25.json)" in page
    assert "not leave-one-out figures" in page, "without fold models the page must not claim leave-one-out figures"


def test_a_corpus_gets_its_leave_one_out_model_when_the_fold_exists(tmp_path: Path) -> None:
    spec = CORPORA["httpd"]
    assert run.reader_model(spec, tmp_path) == ({}, None)
    assert run.reader_model(spec, None) == ({}, None)
    model = tmp_path / "without-httpd.npz"
    model.write_bytes(b"weights")
    for name in crossfolds.MODELS:  # the fold cross-encoders, as bench/quality/folds holds them
        for suffix in (".onnx", ".json"):
            (tmp_path / f"{name}{suffix}").symlink_to(crossfolds.FOLDS / f"{name}{suffix}")

    env, record = run.reader_model(spec, tmp_path)

    cross = (crossfolds.FOLDS / "cross-new4.onnx").resolve()  # httpd is among the six cross-old6 was trained on
    assert env == {"RAG_READER_MODEL": str(model.resolve()), "RAG_READER_CROSS_MODEL": str(cross)}
    assert record is not None and record["path"] == str(model.resolve())
    assert record["sha256"] == hashlib.sha256(b"weights").hexdigest()
    assert "httpd" not in record["cross"]["trained_on"]
    assert run.reader_model(CORPORA["pydocs"], tmp_path) == ({}, None), "another corpus's fold is not this one's"


def test_readme_gets_a_row_per_corpus_between_its_markers_and_keeps_the_rest() -> None:
    result = {"corpora": {"pydocs": corpus_result(OUTCOMES), "httpd": corpus_result(perfect(20), reader=True)}}
    readme = f"# ragsvc\n\nBefore.\n{report.README_BEGIN}\nan old table\n{report.README_END}\nAfter.\n"

    written = report.with_readme_table(readme, result)

    assert written.startswith("# ragsvc\n\nBefore.\n") and written.endswith(f"{report.README_END}\nAfter.\n")
    assert "an old table" not in written
    rows = [line for line in written.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split("|")[1].strip() for row in rows] == ["corpus (unseen)", "pydocs", "httpd"]
    assert rows[2] == "| httpd | 100.0% | 100.0% | 100.0% | 100.0% of 21 | 1.000 | 100.0% | 1 / 1 |"
    assert report.with_readme_table("no markers\n", result) == "no markers\n"
