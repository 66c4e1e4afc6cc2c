"""EXPERIMENT: the answer model's features, objective and levels, measured leaving each corpus out.

    python -m bench.reader.answerlab --seed N prepare                  # the costly part, once a seed (/tmp/answerlab)
    python -m bench.reader.answerlab --seed N [--out F.json] run ARM ...  # answer models and levels per arm (ARMS)

`prepare` follows bench/reader/train.py's recipe exactly (per corpus left out: the training corpora's answers read
chunks packed by chunk models fitted without them and are composed by sentence models fitted without them; the
corpus left out is packed and composed by the models fitted on every training corpus) and keeps, per reading, the
answer row of ANSWER_FEATURES and the raw material of the candidate features tried here. `run` then fits only
answer models (the same held-out answer models the levels are chosen on, and the final one), so arms differ only in
what they change, all in the same code.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.quality import corpus
from bench.quality.metrics import auroc
from bench.reader import dataset, fit, train
from bench.reader.dataset import Example
from ragsvc.reading import features, packing
from ragsvc.reading.forest import Forest

OUT = Path("/tmp/answerlab")


@dataclass
class Ctx:
    """One reading of one question, as the fold's models composed it."""

    corpus: str
    qid: str
    kind: str
    owner: int
    option: int
    row: list[float]
    right: bool
    has_chosen: bool
    has_positive: bool
    lead_key: tuple[Any, ...]  # the lead sentence: (document, chunk, quote), () without one
    extra: dict[str, float] = field(default_factory=dict)


def _extras(pool: Example, packed: Example, pool_scores: list[float], order: list[int], scores: np.ndarray,
            chosen: list[int], chunks: Forest) -> dict[str, float]:  # fmt: skip
    lead = chosen[0] if chosen else -1
    n = len(order)
    x: dict[str, float] = {}
    ck = [pool_scores[i] for i in order]
    x["ck_top"] = ck[0] if ck else 0.0
    x["ck_gap12"] = ck[0] - ck[1] if n > 1 else 0.0
    x["ck_promoted"] = float(sum(1 for i in order if i >= dataset.PACKED))
    x["ck_agree_first"] = 1.0 if order and order[0] == 0 else 0.0
    unpacked = [pool_scores[i] for i in range(len(pool_scores)) if i not in order]
    x["ck_cut_gap"] = (ck[-1] - max(unpacked)) if unpacked and ck else 0.0
    if lead >= 0:
        place = packed.found[lead].marker - 1
        x["ck_lead"] = ck[place]
        others = [c for j, c in enumerate(ck) if j != place]
        x["ck_lead_gap"] = ck[place] - max(others) if others else 0.0
        x["ck_lead_pool_rank"] = float(order[place])
        x["ck_lead_promoted"] = 1.0 if order[place] >= dataset.PACKED else 0.0
        top = float(scores[lead])
        other_chunk = [float(s) for c, s in zip(packed.found, scores, strict=True) if c.marker - 1 != place]
        x["s_margin_other_chunk"] = min(top - max(other_chunk), 10.0) if other_chunk else 10.0
        for width in (0.5, 1.0, 2.0):
            near = {c.marker for c, s in zip(packed.found, scores, strict=True) if s >= top - width and c.marker - 1 != place}
            x[f"s_close_chunks_{width}"] = float(len(near))
            x[f"s_close_sent_{width}"] = float(sum(1 for s in scores if s >= top - width) - 1)
        # packed-only: read from the packed evidence alone (what assess sees)
        retr = [s.score for s in packed.evidence]
        x["pk_lead_retr_rank"] = float(sum(1 for s in retr if s > retr[place]))
    else:
        for k in ("ck_lead", "ck_lead_gap", "ck_lead_pool_rank", "ck_lead_promoted"):
            x[k] = -1.0 if k != "ck_lead" else -10.0
        x["s_margin_other_chunk"] = -10.0
        for width in (0.5, 1.0, 2.0):
            x[f"s_close_chunks_{width}"] = 0.0
            x[f"s_close_sent_{width}"] = 0.0
        x["pk_lead_retr_rank"] = -1.0
    retr = [s.score for s in packed.evidence]
    x["pk_first_retr_best"] = 1.0 if retr and retr[0] >= max(retr) else 0.0
    table = fit.chunk_table(packed).tolist()
    pk = chunks.predict(np.asarray(table, dtype=np.float64)).tolist() if table else []
    x["pk_ck_gap12"] = pk[0] - max(pk[1:]) if len(pk) > 1 else 0.0
    x["pk_ck_top"] = pk[0] if pk else 0.0
    return x


class Packer:
    """Packs pools with a chunk model, memoising the repacked examples (the same model's order packs the same example;
    another model's same order does not: the example carries the model's scores, `Example.packing`)."""

    def __init__(self) -> None:
        self._memo: dict[tuple[int, int, tuple[int, ...]], Example] = {}

    def option(self, pool: Example, chunks: Forest) -> tuple[Example, list[float], list[int]]:
        table = fit.chunk_table(pool).tolist()
        scores = chunks.predict(np.asarray(table, dtype=np.float64)).tolist() if table else []
        packed = packing.pack(chunks, table, dataset.PACKED)
        key = (id(pool), id(chunks), packed.places)
        if key not in self._memo:
            self._memo[key] = dataset.repacked(pool, packed)
        return self._memo[key], scores, list(packed.places)

    def example(self, pool: Example, chunks: Forest) -> tuple[Example, list[tuple[Example, Example, list[float], list[int]]]]:
        parts = [self.option(o, chunks) for o in pool.options]
        first = parts[0][0]
        packed = first if len(parts) == 1 else Example(
            first.corpus, first.question, first.analysis, first.counts, first.evidence, first.found, first.rows,
            first.labels, alternatives=tuple(p[0] for p in parts[1:]))  # fmt: skip
        return packed, [(pool.options[i], *parts[i]) for i in range(len(parts))]


def _contexts(pools: list[Example], packer: Packer, chunks: Forest, sentences: Forest, start: int) -> list[Ctx]:
    out: list[Ctx] = []
    owner = start
    for e in pools:
        if e.question.kind == "injection":
            continue
        _, parts = packer.example(e, chunks)
        for i, (pool_option, packed, pool_scores, order) in enumerate(parts):
            composed = fit.compose(packed, sentences)
            scores = sentences.predict(packed.rows) if len(packed.found) else np.zeros(0)
            chosen = list(composed.chosen)
            lead = chosen[0] if chosen else -1
            key: tuple[Any, ...] = ()
            if lead >= 0:
                c = packed.found[lead]
                key = (packed.evidence[c.marker - 1].chunk.document_id, packed.evidence[c.marker - 1].chunk.chunk_index, c.quote)
            out.append(Ctx(e.corpus, e.question.id, e.question.kind, owner, i, composed.row, composed.right,
                           bool(chosen), packed.has_positive, key,
                           _extras(pool_option, packed, pool_scores, order, scores, chosen, chunks)))  # fmt: skip
        owner += 1
    return out


def prepare(seed: int, names: Sequence[str]) -> None:
    pools = {name: train.examples(name, packed=None) for name in names}
    chunk_models = train.ChunkModels(pools, seed=seed)
    packer = Packer()
    folds: dict[str, Any] = {}
    for left_out in [*names, "(shipped)"]:
        kept = [n for n in names if n != left_out]
        group = frozenset(kept)
        packed = {n: [packer.example(e, chunk_models.fitted(group - {n}))[0] for e in pools[n]] for n in kept}
        training: list[Ctx] = []
        for n in kept:
            model = fit.fit_sentences([e for other in kept if other != n for e in packed[other]], seed=seed)
            training += _contexts(pools[n], packer, chunk_models.fitted(group - {n}), model, len({c.owner for c in training}))
        unseen: list[Ctx] = []
        if left_out in pools:
            full = fit.fit_sentences([e for n in kept for e in packed[n]], seed=seed)
            unseen = _contexts(pools[left_out], packer, chunk_models.fitted(group), full, 0)
        folds[left_out] = {"training": training, "unseen": unseen}
        print(f"prepared {left_out}: {len(training)} training readings, {len(unseen)} unseen", flush=True)
    OUT.mkdir(exist_ok=True)
    with (OUT / f"seed-{seed}.pkl").open("wb") as handle:
        pickle.dump(folds, handle)


# ---- arms --------------------------------------------------------------------------------------------------------

# the answer features before this experiment (prepare keeps their row; the others are the candidates' `Ctx.extra`)
BASE = list(features.ANSWER_FEATURES[: features.ANSWER_FEATURES.index("lead_in_top_document") + 1])


def _follow_up(ctxs: list[Ctx]) -> None:
    """The follow-up agreement features, from every reading of each question."""
    by_owner: dict[int, list[Ctx]] = {}
    for c in ctxs:
        by_owner.setdefault(c.owner, []).append(c)
    for group in by_owner.values():
        keys = [c.lead_key for c in group]
        same_text = all(k and k[2] == keys[0][2] for k in keys) if keys[0] else False
        same_doc = all(k and k[0] == keys[0][0] for k in keys) if keys[0] else False
        for c in group:
            c.extra["f_readings"] = float(len(group))
            c.extra["f_agree"] = 1.0 if same_text else 0.0
            c.extra["f_same_doc"] = 1.0 if same_doc else 0.0


def matrix(ctxs: Sequence[Ctx], extra: Sequence[str], drop: Sequence[str] = ()) -> np.ndarray:
    keep = [i for i, name in enumerate(BASE) if name not in drop]
    return np.asarray([[c.row[i] for i in keep] + [c.extra[k] for k in extra] for c in ctxs], dtype=np.float64)


BEFORE = {**fit.ANSWER_PARAMS, "extra_trees": False}  # the answer model's parameters before this experiment


def fit_answers(rows: np.ndarray, labels: np.ndarray, seed: int, params: dict[str, Any], rounds: int) -> Any:
    lgb = fit._lightgbm()
    data = lgb.Dataset(rows, labels, free_raw_data=False)
    return lgb.train({**BEFORE, "seed": seed, **params}, data, num_boost_round=rounds)


def levels(p: np.ndarray, ctxs: Sequence[Ctx], read: np.ndarray) -> dict[str, tuple[float, float]]:
    """(refuse_below, cite_threshold) by each way of choosing them, on out-of-fold P of the training readings."""
    pr = p[read]
    right = np.asarray([ctxs[i].right for i in read])
    should = np.asarray([ctxs[i].kind in ("answerable", "followup") and ctxs[i].has_positive for i in read])
    corp = np.asarray([ctxs[i].corpus for i in read])
    out: dict[str, tuple[float, float]] = {}
    refuse = fit.refuse_threshold(pr, should)
    cite = fit.cite_threshold(pr, right, precision=0.95)
    out["pooled"] = (refuse, cite)
    names = list(dict.fromkeys(corp.tolist()))
    per_refuse = [fit.refuse_threshold(pr[corp == c], should[corp == c]) for c in names]
    per_cite = [fit.cite_threshold(pr[corp == c], right[corp == c], precision=0.95, min_cited=5) for c in names]
    out["every_corpus"] = (min(per_refuse), max(per_cite))  # levels that hold on each training corpus
    out["median_corpus"] = (float(np.median(per_refuse)), float(np.median(per_cite)))
    out["q25_corpus"] = (float(np.quantile(per_refuse, 0.25)), cite)
    out["pooled_3pct"] = (fit.refuse_threshold(pr, should, false_refusals=0.03), cite)
    return out


def judge(p: np.ndarray, ctxs: Sequence[Ctx], refuse: float, cite: float) -> dict[str, Any]:
    read = fit.chosen(p, np.asarray([c.owner for c in ctxs]))
    out = [(ctxs[i], float(p[i])) for i in read]
    answered = [(c, q, q >= refuse and c.has_chosen) for c, q in out]
    A = [a for a in answered if a[0].kind == "answerable"]
    U = [a for a in answered if a[0].kind == "unanswerable"]
    F = [a for a in answered if a[0].kind == "followup"]
    cited = [a for a in answered if a[2] and a[1] >= cite]
    ratio = lambda a, b: round(a / b, 4) if b else None  # noqa: E731
    return {
        "answered_and_right": ratio(sum(1 for c, q, ok in A if ok and c.right), len(A)),
        "answerables_refused": ratio(sum(1 for c, q, ok in A if not ok), len(A)),
        "evidence_refused": ratio(
            sum(1 for c, q, ok in [*A, *F] if c.has_positive and not ok), sum(1 for c, q, ok in [*A, *F] if c.has_positive)
        ),
        "unanswerables_refused": ratio(sum(1 for c, q, ok in U if not ok), len(U)),
        "followups_right": ratio(sum(1 for c, q, ok in F if ok and c.right), len(F)),
        "cited": len(cited),
        "cite_right": sum(1 for c, q, ok in cited if c.right),
        "cite_precision": ratio(sum(1 for c, q, ok in cited if c.right), len(cited)),
        "unanswerable_cited": sum(1 for c, q, ok in cited if c.kind == "unanswerable"),
        "auroc": auroc([q for _, q, _ in answered], [ok and c.right for c, q, ok in answered]),
    }


@dataclass(frozen=True)
class Arm:
    name: str
    extra: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    rounds: int = fit.ANSWER_ROUNDS
    drop: tuple[str, ...] = ()


CK = ("ck_top", "ck_gap12", "ck_promoted", "ck_agree_first", "ck_lead", "ck_lead_gap", "ck_lead_pool_rank",
      "ck_lead_promoted")  # fmt: skip
SENT = ("s_margin_other_chunk", "s_close_chunks_1.0", "s_close_sent_1.0")
FOLLOW = ("f_readings", "f_agree", "f_same_doc")
PK = ("pk_ck_gap12", "pk_ck_top", "pk_lead_retr_rank", "pk_first_retr_best")
MONOTONE = {"top_score": 1, "score_gap": 1, "top_share": 1, "lead_cov_sentence": 1, "lead_cov_context": 1,
            "best_cov_chunk": 1, "evidence_cov": 1, "missing_names": -1, "missing_rare_weight": -1, "missing_weight": -1,
            "quotes_cov": 1}  # fmt: skip
ARMS = {a.name: a for a in [
    Arm("base"),
    Arm("chunk", CK),
    Arm("chunk_lead", ("ck_lead", "ck_lead_gap", "ck_lead_pool_rank")),
    Arm("chunk_gap", ("ck_top", "ck_gap12")),
    Arm("chunk_agree", ("ck_promoted", "ck_agree_first", "ck_lead_promoted", "ck_lead_pool_rank")),
    Arm("sent", SENT),
    Arm("sent_close", ("s_close_chunks_1.0", "s_close_chunks_0.5", "s_close_chunks_2.0")),
    Arm("follow", FOLLOW),
    Arm("packed_only", PK),
    Arm("chunk_sent", CK + SENT),
    Arm("all", CK + SENT + FOLLOW),
    Arm("leaves3", params={"num_leaves": 3}, rounds=300),
    Arm("leaves15", params={"num_leaves": 15}),
    Arm("rounds300", rounds=300),
    Arm("rounds75", rounds=75),
    Arm("mindata60", params={"min_data_in_leaf": 60}),
    Arm("l2_10", params={"lambda_l2": 10.0}),
    Arm("xent", params={"objective": "cross_entropy"}),
    Arm("posweight2", params={"scale_pos_weight": 2.0}),
    Arm("ff05", params={"feature_fraction": 0.5}),
    Arm("extra_trees", params={"extra_trees": True}),
    Arm("monotone", params={"monotone_constraints": [MONOTONE.get(n, 0) for n in BASE],
                            "monotone_constraints_method": "advanced"}),
    Arm("cs_et", CK + SENT, params={"extra_trees": True}),
    Arm("cs_l3", CK + SENT, params={"num_leaves": 3}, rounds=300),
]}  # fmt: skip


def run_arm(folds: dict[str, Any], arm: Arm, seed: int) -> dict[str, Any]:
    result: dict[str, Any] = {"arm": arm.name, "seed": seed, "folds": {}}
    for left_out, fold in folds.items():
        training: list[Ctx] = fold["training"]
        unseen: list[Ctx] = fold["unseen"]
        _follow_up(training)
        _follow_up(unseen)
        X = matrix(training, arm.extra, arm.drop)
        y = np.asarray([c.right for c in training], dtype=np.int32)
        corp = np.asarray([c.corpus for c in training])
        p = np.zeros(len(training))
        for name in dict.fromkeys(corp.tolist()):
            inside = corp == name
            booster = fit_answers(X[~inside], y[~inside], seed, arm.params, arm.rounds)
            p[inside] = fit.sigmoid(booster.predict(X[inside], raw_score=True))
        read = fit.chosen(p, np.asarray([c.owner for c in training]))
        chosen_levels = levels(p, training, read)
        entry: dict[str, Any] = {"levels": chosen_levels}
        if unseen:
            booster = fit_answers(X, y, seed, arm.params, arm.rounds)
            q = fit.sigmoid(booster.predict(matrix(unseen, arm.extra, arm.drop), raw_score=True))
            entry["unseen"] = {way: judge(q, unseen, r, c) for way, (r, c) in chosen_levels.items()}
        result["folds"][left_out] = entry
    return result


def summary(result: dict[str, Any], way: str = "pooled") -> dict[str, Any]:
    rows = {k: v["unseen"][way] for k, v in result["folds"].items() if "unseen" in v}
    measures = ("auroc", "answered_and_right", "answerables_refused", "unanswerables_refused", "followups_right")
    mean = {m: round(float(np.mean([r[m] for r in rows.values() if r[m] is not None])), 4) for m in measures}
    mean["cited"] = sum(r["cited"] for r in rows.values())
    mean["cite_right"] = sum(r["cite_right"] for r in rows.values())
    shipped = result["folds"].get("(shipped)", {}).get("levels", {}).get(way)
    return {"mean": mean, "shipped_levels": shipped, "per_corpus": rows}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("prepare", "run"))
    parser.add_argument("arms", nargs="*")
    parser.add_argument("--seed", type=int, default=fit.SEED)
    parser.add_argument("--corpus", action="append")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    names = args.corpus or list(corpus.CORPORA)
    if args.what == "prepare":
        prepare(args.seed, names)
        return
    with (OUT / f"seed-{args.seed}.pkl").open("rb") as handle:
        folds = pickle.load(handle)
    results = []
    for name in args.arms or ["base"]:
        result = run_arm(folds, ARMS[name], args.seed)
        results.append(result)
        s = summary(result)
        per = {k: (v["auroc"], v["answered_and_right"]) for k, v in s["per_corpus"].items()}
        print(name, json.dumps(s["mean"]), "shipped", s["shipped_levels"], flush=True)
        print("   ", json.dumps(per), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
