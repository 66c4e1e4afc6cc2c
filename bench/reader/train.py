"""`make train-reader`: train the reader on the benchmark's labelled questions, the shipped model on every corpus and
one model per corpus left out (bench/quality/folds/without-<corpus>.npz, what `make eval` judges each corpus with).

    python -m bench.reader.train [--corpus NAME ...] [--seed N] [--no-write] [--small-tenants]

Everything is deterministic for a seed: LightGBM with deterministic=True on one thread, examples in file order.
Each corpus's evidence is retrieved once from its ingested index (bench/reader/evidence.py, cached under
.bench/reader/) and every feature is computed by ragsvc's own reading code.

The answer model's rows, and the thresholds, are made without looking at a corpus's own labels: a corpus's answers
are composed by a sentence model fitted on the other training corpora, and the thresholds are chosen on
probabilities given by answer models fitted on the other training corpora (`cross_fitted`, `held_out_p`).

A follow-up is read as the server reads it: with the evidence of each of its searches (the rule's rewrite, and the
follow-up after its earlier questions), answered from the reading the answer model judges likelier right; both
readings train both models, and the thresholds are chosen on the readings so chosen (`fit.likeliest`,
`fit.chosen`).

The extractive answer's quotes are re-ranked with a cross-encoder among the sentence model's top
`--cross-candidates` (RAG_READER_CROSS_CANDIDATES' default; ragsvc.reading.cross), every corpus's cross scores from
the fold cross-encoder that never saw it (bench/quality/crossfolds.py), for the fold models and the shipped one:
the answer model learns P(right) of the quotes the server gives. The extractive answer model (Model.extractive)
is fitted the same way on the same rows with the answer's cross columns (CROSS_ANSWER_FEATURES) from the same fold
cross scores, with its own levels from its own out-of-fold P(right); without re-ranking it is the answer model. The
scores are memoised under .bench/cross/.

Writes the models, and bench/results/reader-train-DATE.json: per fold the offline metrics on the corpus left out,
the thresholds, and the scores of a fixed probe set (tests/reading/test_shipped_model.py checks the shipped model
scores it as recorded).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.quality import corpus, crossfolds, datasets, small
from bench.reader import dataset, evidence, fit
from bench.reader.crossmemo import Scores
from bench.reader.dataset import Example
from ragsvc.reading.cross import CrossEncoder
from ragsvc.reading.forest import Forest
from ragsvc.reading.trained import MODEL_FILE, Model, TrainedReader

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".bench" / "reader"
SHIPPED = ROOT / "src" / "ragsvc" / "reading" / "models" / MODEL_FILE
FOLDS = ROOT / "bench" / "quality" / "folds"
RESULTS = ROOT / "bench" / "results"
PRECISION = 0.95  # CITE precision the threshold is chosen for, on the training corpora
PROBE = ROOT / "tests" / "reading" / "data" / "reader-probe.json"
PROBE_KINDS = ("answerable", "unanswerable", "followup")  # the first question of each kind, per corpus


def examples(name: str, *, packed: int | None = dataset.PACKED) -> list[Example]:
    """The corpus's examples reading retrieval's first `packed` chunks (None: every chunk retrieved, the pool the
    chunk model packs from), its evidence retrieved from its index on first use (the index ingested first when the
    benchmark's cache has none for this corpus and this ingestion code)."""
    questions = datasets.questions(name)
    data_dir = datasets.ingested_data_dir(name)
    path = CACHE / f"evidence-{name}-{evidence.key(data_dir, questions)}.jsonl"
    if not path.exists():
        evidence.save(asyncio.run(evidence.collect(data_dir, corpus.get(name).tenant, questions)), path)
    found = evidence.load(path)
    return [dataset.example(name, q, found[q.id], packed=packed) for q in questions]


def small_examples(name: str) -> list[Example]:
    """The corpus's questions asked of its small tenants (bench/quality/small.py: a handful of its pages each), every
    chunk retrieved, their evidence retrieved from the tenants' index on first use (ingested first when missing).
    Training on them too (`--small-tenants`) shows the models a tenant's statistics at both sizes: term weights by
    IDF over a few dozen chunks, and the retrieval scores of a small index. Measured and not shipped (docs/reading.md,
    "Small tenants")."""
    groups = small.corpus_tenants(name)
    data_dir = small.data_dir(name, groups)
    found: list[Example] = []
    for group in groups:
        asked = list(group.questions)
        path = CACHE / f"evidence-{group.name}-{evidence.key(data_dir, asked)}.jsonl"
        if not path.exists():
            evidence.save(asyncio.run(evidence.collect(data_dir, group.name, asked)), path)
        rows = evidence.load(path)
        found += [dataset.example(name, q, rows[q.id]) for q in asked]
    return found


def held_out_p(rows: np.ndarray, labels: np.ndarray, groups: Sequence[str], *, seed: int) -> np.ndarray:
    """Each answer row's P(right) from an answer model fitted on the other corpora's rows."""
    p = np.zeros(len(rows))
    names = np.asarray(groups)
    for name in dict.fromkeys(groups):
        inside = names == name
        model = fit.fit_answers(rows[~inside], labels[~inside], seed=seed)
        p[inside] = fit.sigmoid(model.predict(rows[inside]))
    return p


class ChunkModels:
    """Chunk models by the corpora they are fitted on, each fitted once: a fold's nested folds and the other folds
    fit many on the same corpora. `retrieval_order`: none fitted, the answer reads retrieval's first chunks (the arm
    to compare with)."""

    def __init__(self, pools: dict[str, list[Example]], *, seed: int, retrieval_order: bool = False) -> None:
        self._pools = pools
        self._seed = seed
        self._retrieval_order = retrieval_order
        self._fitted: dict[frozenset[str], Forest] = {}

    def fitted(self, corpora: frozenset[str]) -> Forest:
        if self._retrieval_order:
            return fit.retrieval_order()
        if corpora not in self._fitted:
            self._fitted[corpora] = fit.fit_chunks([e for n in sorted(corpora) for e in self._pools[n]], seed=self._seed)
        return self._fitted[corpora]


@dataclass(frozen=True)
class Readings:
    """The training corpora's readings as `train` makes them: each corpus's answers read the chunks packed by a chunk
    model fitted on the other corpora and are composed by a sentence model fitted on them (`fit.cross_fitted`), their
    out-of-fold P(right) (`held_out_p`), and each question's reading as the pipeline would choose it; the same for
    the extractive answer model, whose rows add the cross columns (`cross_rows`, `cross_p`, `cross_read`: the
    answer model's without re-ranking)."""

    pools: dict[str, list[Example]]
    by_corpus: dict[str, list[Example]]  # packed
    rows: np.ndarray  # ANSWER_FEATURES (and an experiment's columns)
    labels: np.ndarray
    order: list[Example]
    owners: np.ndarray
    p: np.ndarray
    read: np.ndarray
    cross_rows: np.ndarray  # `rows` and, re-ranked, CROSS_ANSWER_FEATURES
    cross_p: np.ndarray
    cross_read: np.ndarray

    @property
    def groups(self) -> list[str]:
        return [e.corpus for e in self.order]


def readings(pools: dict[str, list[Example]], chunk_models: ChunkModels, *, seed: int) -> Readings:
    """`pools` (at least two corpora, every chunk retrieved) read as `train` reads them."""
    names = frozenset(pools)
    by_corpus = {n: [fit.packed(e, chunk_models.fitted(names - {n})) for e in group] for n, group in pools.items()}
    cross_rows, labels, order, owners = fit.cross_fitted(by_corpus, seed=seed)
    groups = [e.corpus for e in order]
    rows = cross_rows[:, : cross_rows.shape[1] - fit.cross_columns()]
    p = held_out_p(rows, labels, groups, seed=seed)
    cross_p = held_out_p(cross_rows, labels, groups, seed=seed) if fit.cross_columns() else p
    return Readings(pools, by_corpus, rows, labels, order, owners, p, fit.chosen(p, owners), cross_rows, cross_p,
                    fit.chosen(cross_p, owners))  # fmt: skip


def train(pools: dict[str, list[Example]], chunk_models: ChunkModels, *, seed: int) -> tuple[Model, dict[str, Any]]:
    """A model trained on `pools` (at least two corpora, every chunk retrieved), with its thresholds, and what was
    measured. Each corpus's answers read the chunks packed by a chunk model fitted on the other corpora, as an unseen
    corpus's will be."""
    return fitted(readings(pools, chunk_models, seed=seed), chunk_models, seed=seed)


def fitted(r: Readings, chunk_models: ChunkModels, *, seed: int) -> tuple[Model, dict[str, Any]]:
    """The model of `r`'s corpora, with each answer model's thresholds chosen on their out-of-fold P(right)."""
    cite, refuse = levels(r.p, r.read, r)
    cross_cite, cross_refuse = levels(r.cross_p, r.cross_read, r)
    sentences = fit.fit_sentences([e for group in r.by_corpus.values() for e in group], seed=seed)
    answers = fit.fit_answers(r.rows, r.labels, seed=seed)
    extractive = fit.fit_answers(r.cross_rows, r.labels, seed=seed) if r.cross_rows.shape != r.rows.shape else answers
    meta = {
        "corpora": sorted(r.pools),
        "seed": seed,
        "examples": sum(len(g) for g in r.pools.values()),
        "answer_rows": len(r.rows),
        "right_share": round(float(r.labels.mean()), 4),
        "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    model = Model(chunk_models.fitted(frozenset(r.pools)), sentences, answers, cite, refuse, extractive, cross_cite,
                  cross_refuse, meta)  # fmt: skip
    return model, {"cite_threshold": cite, "refuse_below": refuse, "extractive_cite_threshold": cross_cite,
                   "extractive_refuse_below": cross_refuse}  # fmt: skip


def levels(p: np.ndarray, read: np.ndarray, r: Readings) -> tuple[float, float]:
    """(cite_threshold, refuse_below) chosen on the out-of-fold P(right) `p` of the readings `read`."""
    should = fit.evidence_answers([r.order[i] for i in read])
    return (fit.cite_threshold(p[read], r.labels[read].astype(bool), precision=PRECISION),
            fit.refuse_threshold(p[read], should))  # fmt: skip


def judged(model: Model, pools: Sequence[Example], *, extractive: bool = False) -> dict[str, Any]:
    """Offline metrics of `model` on `pools`, its answers judged by the extractive answer model (rows with the cross
    columns: under `fit.reranking`) or the answer model."""
    examples_ = [fit.packed(e, model.chunks) for e in pools]
    cite, refuse = model.levels(extractive=extractive)
    if extractive:
        return fit.judge(examples_, model.sentences, model.extractive, cite, refuse)
    with fit.without_cross_columns():
        return fit.judge(examples_, model.sentences, model.answers, cite, refuse)


def probe(by_corpus: dict[str, list[Example]], model: Model, digest: str, candidates: int) -> dict[str, Any]:
    """A fixed probe set (per corpus, its first question of each of PROBE_KINDS, with every chunk retrieved and its
    term counts) and how `model`, served by TrainedReader with the shipped cross-encoder among `candidates`, reads
    it: the chunks packed, P(right) (by the extractive answer model) and the quotes; and without the cross-encoder
    (an LLM's answers, or K=0: the answer model), P(right) and whether it answers."""
    cross = CrossEncoder()
    reader = TrainedReader(model, rare_share=0.002, pool=evidence.EVIDENCE_K, cross=cross, candidates=candidates)
    plain = TrainedReader(model, rare_share=0.002, pool=evidence.EVIDENCE_K)
    cases = []
    for group in by_corpus.values():
        for kind in PROBE_KINDS:
            e = next(e for e in group if e.question.kind == kind)
            analysis = reader.analyse(e.analysis.search, e.question.question, e.counts)
            packed = reader.pack(analysis, e.evidence, limit=dataset.PACKED)
            assessment = reader.assess(analysis, packed)
            without = plain.assess(analysis, packed)
            cases.append({
                "id": f"{e.corpus}/{e.question.id}",
                "search": e.analysis.search,
                "question": e.question.question,
                "counts": {"chunks": e.counts.chunks, "frequencies": e.counts.frequencies},
                "evidence": [dataset.as_hit(scored) for scored in e.evidence],
                "packed": [e.evidence.index(scored) for scored in packed],
                "p_right": assessment.score,
                "answerable": assessment.answerable,
                "quotes": [c.quote for c in reader.quotes(analysis, packed, limit=3)],
                "answer_model": {"p_right": without.score, "answerable": without.answerable},
            })  # fmt: skip
    return {"model_sha256": digest, "cross_sha256": cross.sha256, "cross_candidates": candidates, "cases": cases}


def save(model: Model, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        np.savez_compressed(handle, **model.arrays())
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", help="train on these corpora only (default: every corpus)")
    parser.add_argument("--seed", type=int, default=fit.SEED)
    parser.add_argument("--no-write", action="store_true", help="report only: write no model")
    parser.add_argument(
        "--retrieval-order",
        action="store_true",
        help="the arm without a chunk model: the answer reads retrieval's first five chunks; needs --no-write",
    )
    parser.add_argument(
        "--small-tenants",
        action="store_true",
        help="train on each corpus's small tenants too (bench/quality/small.py; an arm, not shipped: docs/reading.md)",
    )
    parser.add_argument(
        "--cross-candidates",
        type=int,
        default=6,
        help="re-rank the quotes with the fold cross-encoders among the sentence model's top N (0: its order)",
    )
    args = parser.parse_args(argv)
    if args.retrieval_order and not args.no_write:
        parser.error("--retrieval-order is an arm to compare: it writes no model (--no-write)")
    names = args.corpus or list(corpus.CORPORA)
    by_corpus = {name: examples(name, packed=None) + (small_examples(name) if args.small_tenants else []) for name in names}
    run(by_corpus, seed=args.seed, write=not args.no_write, retrieval_order=args.retrieval_order,
        cross_candidates=args.cross_candidates)  # fmt: skip


def fold_scores(names: Sequence[str]) -> dict[str, Scores]:
    """Each corpus's cross scores, from the fold cross-encoder that never saw it (memoised on disk)."""
    memos = {path: Scores(CrossEncoder(path)) for path in {crossfolds.for_corpus(n) for n in names}}
    return {n: memos[crossfolds.for_corpus(n)] for n in names}


def run(by_corpus: dict[str, list[Example]], *, seed: int, write: bool, retrieval_order: bool, cross_candidates: int = 0) -> None:
    """One model per corpus of `by_corpus` left out, judged on it, and the shipped model on all of them; with `write`,
    the models, the probe set and the results file (an experiment's arm, bench/reader/semantic.py, writes none).
    With `cross_candidates`, the quotes re-ranked with the fold cross-encoders (`fold_scores`)."""
    scores = fold_scores(list(by_corpus)) if cross_candidates else {}
    rerank = fit.Rerank(scores, cross_candidates) if cross_candidates else None
    try:
        with fit.reranking(rerank):
            _run(by_corpus, seed=seed, write=write, retrieval_order=retrieval_order, cross_candidates=cross_candidates)
    finally:
        for memo in set(scores.values()):
            memo.save()


def _run(by_corpus: dict[str, list[Example]], *, seed: int, write: bool, retrieval_order: bool, cross_candidates: int) -> None:
    names = list(by_corpus)
    chunk_models = ChunkModels(by_corpus, seed=seed, retrieval_order=retrieval_order)
    cross = {n: crossfolds.for_corpus(n).name for n in names} if cross_candidates else {}
    report: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "seed": seed, "folds": {},
                              "cross": {"candidates": cross_candidates, "scored_by": cross}}  # fmt: skip
    for left_out in names:
        training = {n: e for n, e in by_corpus.items() if n != left_out}
        model, chosen = train(training, chunk_models, seed=seed)
        metrics = judged(model, by_corpus[left_out], extractive=bool(cross_candidates))
        report["folds"][left_out] = {**chosen, "trained_on": sorted(training), "unseen": metrics}
        if cross_candidates:  # an LLM's answers, or K=0: the answer model (of the same re-ranked quotes here)
            report["folds"][left_out]["unseen_answer_model"] = judged(model, by_corpus[left_out])
        print(f"without {left_out}: {json.dumps(metrics)} thresholds {chosen}", flush=True)
        if write:
            report["folds"][left_out]["sha256"] = save(model, FOLDS / f"without-{left_out}.npz")
    shipped, chosen = train(by_corpus, chunk_models, seed=seed)
    report["shipped"] = {**chosen, "trained_on": names, "size_bytes": None}
    if write:
        report["shipped"]["sha256"] = save(shipped, SHIPPED)
        PROBE.parent.mkdir(parents=True, exist_ok=True)
        shown = probe(by_corpus, shipped, report["shipped"]["sha256"], cross_candidates)
        PROBE.write_text(json.dumps(shown, indent=1) + "\n")
        report["shipped"]["size_bytes"] = SHIPPED.stat().st_size
        stamp = datetime.now(UTC).strftime("%Y-%m-%d")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"reader-train-{stamp}.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["shipped"]))


if __name__ == "__main__":
    main()
