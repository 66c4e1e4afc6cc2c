"""EXPERIMENT: does the cross-encoder of branch `cross` add to the trained reader on corpora it never saw?

    python -m bench.reader.crosslab --seed N prepare        # chunk and sentence models, cross scores (.bench/crosslab)
    python -m bench.reader.crosslab --seed N run [ARM ...]  # answer models and levels per arm and design
    python -m bench.reader.crosslab latency --out L.json    # K=3 and K=6 pairs scored on one thread
    python -m bench.reader.crosslab report RUN.json ... L.json --out R.json  # one results file, tables on stdout
    python -m bench.reader.crosslab --oof --seed N run $GRID --design oof --against rerank6 --loco --out RUN.json
    python -m bench.reader.crosslab report --grid RUN.json ... L.json --out R.json  # the (K, W) grid (GRID_ARMS)
    python -m bench.reader.crosslab --seed N compare A.pkl B.pkl --out C.json  # B's arms less A's (run --answers)
    python -m bench.reader.crosslab --oof --seed N prepare --variants z6 k10w1 l6 l10  # --tag=-r: r6 r10
    python -m bench.reader.crosslab --oof --seed N run --design oof --against rerank6 rerank6 learned6 learned10 ...
    python -m bench.reader.crosslab report --learned RUN.json ... --out R.json  # the learned rankers (LEARNED)
    python -m bench.reader.crosslab --oof --seed N rankers --out R.json  # reading-level screen of RANKER_TRIALS

`--model`, `--scores`, `--model-new4`, `--scores-new4` name the two cross-encoders and their memo files (defaults:
MODEL, SCORES, NEW4, SCORES_NEW4), `--work` the directory of `prepare`'s folds (default OUT), so that two pairs of
models can be screened side by side; `run --answers A.pkl` keeps each arm's answers for `compare`, which bootstraps
(`paired`) the same arm and design of two runs against each other, the questions resampled alike.

The cross-encoder (`git show cross:src/ragsvc/reading/models/cross.onnx > .bench/cross/cross.onnx`: six MiniLM
layers, int8, cosine head, 22.9 MB) was fine-tuned on pgdocs, pydocs, httpd, handbook, sqlite and gitdocs only, so
its scores on UNSEEN (djangodocs, postfix, borgdocs, zshdocs) are out of sample. Nothing here is imported by the
server; the model stays outside the package. It scores the six probes its training run recorded
(`git show cross:bench/results/cross-train-2026-11-27.json`) to 1e-6 with this code.

`prepare` follows bench/reader/answerlab.py (bench/reader/train.py's recipe: per corpus left out, the training
corpora's answers read chunks packed by chunk models fitted without them and are composed by sentence models
fitted without them; the corpus left out is packed and composed by the models fitted on all nine others), for the
four UNSEEN corpora left out. Per reading it keeps the answer row of ANSWER_FEATURES as the shipped reader composes
it, and the cross-encoder's scores of the sentence model's top K candidates (near-duplicates once, as quoted), and
the same reading with its quotes re-ranked by the z-score sum of the sentence model's and the cross-encoder's
scores among its top K (`VARIANTS`). `run` fits only answer models (and chooses the levels the shipped way, on
out-of-fold P of the training corpora), so arms differ only in what they change. The evidence is the reader's cache
as `make train-reader` last wrote it (`corpus_pools`). The grid (RERANKS, GRID_ARMS: K 6, 8, 10, 15 candidates, the
cross score's z weighted 1, 2, 4, or alone) has rerank6's columns in every arm; `run --loco` picks (K, W) per corpus
on the others. The learned second stage (LEARNED, arms learned6, learned10, learned6r, learned10r) orders the top K
by a LambdaRank forest over RANKER_FEATURES (bench.reader.learned), fitted per fold on other corpora only:
the ranker ordering a training corpus's quotes never saw that corpus, nor the corpus left out. Two designs:

- `three` (primary): the answer model of a corpus left out is trained on the other three UNSEEN corpora only, so no
  training row carries an in-sample cross score;
- `nine` (reference): trained on all nine others, six of which carry in-sample cross scores.

`--oof` (out of fold, every corpus): each corpus is scored by a cross-encoder that never saw it: the four UNSEEN by
branch cross's, the six others by `cross-new4.onnx`, the same recipe trained on UNSEEN only (`python -m
bench.reader.cross_train --corpus djangodocs --corpus postfix --corpus borgdocs --corpus zshdocs --no-folds --out
.bench/cross/cross-new4.onnx`). `prepare --oof` leaves out each of the ten corpora; `run --oof` has two designs:

- `oof`: the answer model trained on all nine others, every row's cross score from a model that never saw that row's
  corpus (though it may have seen the corpus left out: a training row of pgdocs is scored by cross-new4, trained on
  djangodocs, when djangodocs is left out);
- `same`: trained only on the others scored by the model that scores the corpus left out (the other three of UNSEEN,
  or the other five of the six), so that no cross score of the fold comes from a model that saw the corpus left out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.quality import corpus, datasets
from bench.quality.questions import contains
from bench.reader import answerlab, dataset, evidence, fit, train
from bench.reader.answerlab import Ctx, Packer
from bench.reader.crossmemo import Scores
from bench.reader.dataset import Example
from bench.reader.learned import RANKER_FEATURES, learned, ranker_rows
from ragsvc.reading import features
from ragsvc.reading.cross import CROSS_ANSWER_FEATURES, CrossEncoder, cross_answer_features, reranked
from ragsvc.reading.forest import Forest
from ragsvc.reading.trained import MAX_QUOTES, choose

OUT = Path(".bench/crosslab")  # in the checkout: helpers share /tmp
MODEL = Path(".bench/cross/cross.onnx")
SCORES = Path(".bench/cross/scores.pkl")  # (search text, quote) -> cross logit, filled as pairs are first scored
UNSEEN = ("djangodocs", "postfix", "borgdocs", "zshdocs")  # corpora the cross-encoder was not trained on
NEW4 = Path(".bench/cross/cross-new4.onnx")  # the same recipe trained on UNSEEN only: scores the six others
SCORES_NEW4 = Path(".bench/cross/scores-new4.pkl")
# A re-ranking: the best MAX_QUOTES of the sentence model's top K by z(sentence score) + W * z(cross score) among
# those K; W None: by the cross score alone. "z3" and "z6" (K 3 and 6, W 1) are the first screen's names; z6 ships.
CROSS_ALONE = None
RERANKS: dict[str, tuple[int, float | None]] = {"z3": (3, 1.0), "z6": (6, 1.0)}
GRID_KS = (6, 8, 10, 15)
GRID_WEIGHTS: tuple[float | None, ...] = (1.0, 2.0, 4.0, CROSS_ALONE)


def grid_name(k: int, w: float | None) -> str:
    """The variant of the grid (GRID_KS x GRID_WEIGHTS) at K `k` and weight `w`: k8w2, k15wx (cross alone)."""
    return "z6" if (k, w) == (6, 1.0) else f"k{k}w{'x' if w is None else f'{w:g}'}"


RERANKS.update({grid_name(k, w): (k, w) for k in GRID_KS for w in GRID_WEIGHTS})
# A learned second stage: the best MAX_QUOTES of the sentence model's top K as a LambdaRank forest over
# RANKER_FEATURES orders them (bench.reader.learned; fit.fit_ranker), fitted per fold on other corpora only
# (l6, l10: fit.fit_ranker's LambdaRank; r6, r10: regularised, RANKER_REGULARISED, the `rankers` screen's pick)
RANKER_REGULARISED = {**fit.SENTENCE_PARAMS, "num_leaves": 7, "min_data_in_leaf": 100, "lambda_l2": 10.0}
RANKER_REGULARISED_ROUNDS = 100
LEARNED: dict[str, tuple[int, dict[str, Any] | None, int]] = {
    "l6": (6, None, fit.RANKER_ROUNDS),
    "l10": (10, None, fit.RANKER_ROUNDS),
    "r6": (6, RANKER_REGULARISED, RANKER_REGULARISED_ROUNDS),
    "r10": (10, RANKER_REGULARISED, RANKER_REGULARISED_ROUNDS),
}
VARIANTS = ("base", *RERANKS, *LEARNED)  # the quotes as the sentence model orders them, then each re-ranking
# the candidates scored: the cross columns read the top 6
KS = tuple(sorted({k for k, _ in RERANKS.values()} | {k for k, _, _ in LEARNED.values()} | {6}))
LATENCY_KS = (3, *GRID_KS)


def cross_features(chosen: Sequence[int], top: Sequence[int], lexical: np.ndarray, cross: dict[int, float]) -> dict[str, float]:
    """The answer's cross columns (ragsvc.reading.cross.CROSS_ANSWER_FEATURES), by name."""
    return dict(zip(CROSS_ANSWER_FEATURES, cross_answer_features(chosen, top, lexical, cross), strict=True))


def rerank(top: Sequence[int], lexical: np.ndarray, cross: dict[int, float], k: int, w: float | None) -> list[int]:
    """The quotes of re-ranking (k, w) (RERANKS). W 1 is the shipped ragsvc.reading.cross.reranked itself."""
    if w == 1.0:
        return reranked(top, lexical, cross, k, quotes=MAX_QUOTES)
    head = list(top[:k])
    if len(head) < 2:
        return head[:MAX_QUOTES]
    x = np.asarray([cross[i] for i in head], dtype=np.float64)
    if w is None:
        z = x
    else:
        lex = lexical[head]
        z = (lex - lex.mean()) / (lex.std() + 1e-9) + w * (x - x.mean()) / (x.std() + 1e-9)
    order = sorted(range(len(head)), key=lambda j: (-z[j], j))
    return [head[j] for j in order][:MAX_QUOTES]


@dataclass(frozen=True)
class Reading:
    """One reading of a question (injection probes aside) with its candidates as the fold's models score them: the
    sentence model's top max(KS) (`top`, its order), its scores (`lexical`, by candidate) and their cross scores."""

    example: Example  # the question's pool
    option: int  # which of its searches
    packed: Example
    lexical: np.ndarray
    top: list[int]
    cross: dict[int, float]


def _readings(pools: list[Example], packer: Packer, chunks: Forest, sentences: Forest, scores: Scores) -> list[Reading]:
    """Every reading of `pools` packed by `chunks`, its candidates scored by `sentences` and the cross-encoder."""
    out = []
    for e in pools:
        if e.question.kind == "injection":
            continue
        _, parts = packer.example(e, chunks)
        for i, (_, packed, _, _) in enumerate(parts):
            composed = fit.compose(packed, sentences)
            lexical = sentences.predict(packed.rows) if len(packed.found) else np.zeros(0)
            top = choose(packed.found, lexical.tolist(), max_quotes=max(KS))
            assert list(composed.chosen) == top[:MAX_QUOTES]  # the quotes are the top 3 of the same order
            assert _answer(packed, lexical, top[:MAX_QUOTES]) == (composed.row, composed.right)
            cross = dict(zip(top, scores(packed.analysis.search, [packed.found[j].quote for j in top]).tolist(), strict=True))
            out.append(Reading(e, i, packed, lexical, top, cross))
    return out


def ranker_data(readings: Sequence[Reading], k: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The learned ranker's training rows (RANKER_FEATURES of each top-`k` candidate), labels (it holds a key fact)
    and groups, from the readings whose top `k` hold at least two candidates, one with a key fact."""
    rows, labels, groups = [], [], []
    for r in readings:
        head = r.top[:k]
        label = r.packed.labels[head]
        if len(head) < 2 or not label.any():
            continue
        rows.append(ranker_rows(head, r.lexical, r.cross, r.packed.rows))
        labels.append(label)
        groups.append(len(head))
    return np.vstack(rows), np.concatenate(labels), groups


def fit_rankers(readings: Sequence[Reading], seed: int, variants: Sequence[str]) -> dict[str, Forest]:
    """The ranker of each LEARNED variant of `variants`, fitted on `readings` (never the readings it will order)."""
    return {
        v: fit.fit_ranker(*ranker_data(readings, k), seed=seed, params=params, rounds=rounds)
        for v, (k, params, rounds) in LEARNED.items()
        if v in variants
    }


def _contexts(
    readings: Sequence[Reading], start: int, rankers: dict[str, Forest], variants: Sequence[str]
) -> dict[str, list[Ctx]]:
    """Each reading as each of `variants` (VARIANTS) composes it, with its cross columns (`rankers`: the LEARNED
    variants' forests, fitted without the readings' corpus); `start` numbers the first question."""
    out: dict[str, list[Ctx]] = {v: [] for v in variants}
    owner = start - 1
    previous = None
    for r in readings:
        if r.example is not previous:
            owner, previous = owner + 1, r.example
        e, packed, lexical, top, cross = r.example, r.packed, r.lexical, r.top, r.cross
        for variant in variants:
            if variant == "base":
                k, chosen = MAX_QUOTES, top[:MAX_QUOTES]
            elif variant in LEARNED:
                k = LEARNED[variant][0]
                chosen = learned(top, lexical, cross, packed.rows, rankers[variant], k, quotes=MAX_QUOTES)
            else:
                k, chosen = RERANKS[variant][0], rerank(top, lexical, cross, *RERANKS[variant])
            row, right = _answer(packed, lexical, chosen)
            lead = chosen[0] if chosen else -1
            key: tuple[Any, ...] = ()
            if lead >= 0:
                c = packed.found[lead]
                chunk = packed.evidence[c.marker - 1].chunk
                key = (chunk.document_id, chunk.chunk_index, c.quote)
            extra = cross_features(chosen, top, lexical, cross)
            extra["_lead_fact"] = float(lead >= 0 and bool(packed.labels[lead]))
            extra["_quote_fact"] = float(any(packed.labels[j] for j in chosen))
            extra["_top_k_fact"] = float(any(packed.labels[j] for j in top[:k]))  # the candidates it chose among
            out[variant].append(Ctx(e.corpus, e.question.id, e.question.kind, owner, r.option, row, right, bool(chosen),
                                    packed.has_positive, key, extra))  # fmt: skip
    return out


def _answer(packed: Example, lexical: np.ndarray, chosen: list[int]) -> tuple[list[float], bool]:
    """The answer row and rightness of `packed` quoting `chosen` (lead first), as fit.compose makes them."""
    packing = packed.packing or features.Packing(tuple(range(len(packed.evidence))), (0.0,) * len(packed.evidence))
    lead = chosen[0] if chosen else -1
    row = features.answer_features(packed.analysis, packed.found, packed.rows.tolist(), lexical.tolist(), lead,
                                   packed.evidence, packing, chosen)  # fmt: skip
    q = packed.question
    right = q.should_answer and any(contains(packed.found[i].quote, f) for i in chosen for f in q.key_facts)
    return row, right


def corpus_pools(name: str, packed: int | None = None) -> list[Example]:
    """The corpus's examples reading every chunk retrieved (train.examples' pools), or retrieval's first `packed`,
    from the newest evidence file of the reader's cache that holds every question of the corpus: train.examples keys
    the file by the index's directory, and every change to the code of the index renames that, though the evidence
    retrieved is the same (pgdocs re-ingested and re-retrieved with af7861d's code gave a file byte for byte the
    newest cached one)."""
    questions = datasets.questions(name)
    path = evidence_file(name)
    found = evidence.load(path)
    print(f"{name}: {path.name}", flush=True)
    return [dataset.example(name, q, found[q.id], packed=packed) for q in questions]


def evidence_file(name: str) -> Path:
    """The newest evidence file of corpus `name` in the reader's cache that holds every question of the corpus."""
    questions = datasets.questions(name)
    for path in sorted(train.CACHE.glob(f"evidence-{name}-*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True):
        found = evidence.load(path)
        if all(q.id in found for q in questions):
            return path
    raise SystemExit(f"no evidence file of {name} in {train.CACHE} holds every question: run make train-reader")


@dataclass(frozen=True)
class Models:
    """The cross-encoder trained on the six (scores UNSEEN) and the one trained on UNSEEN (scores the six, `--oof`),
    each with its memo file."""

    model: Path = MODEL
    scores: Path = SCORES
    new4: Path = NEW4
    scores_new4: Path = SCORES_NEW4
    work: Path = OUT  # where `prepare` writes its folds and `run` reads them


def scorers(oof: bool, models: Models = Models()) -> dict[str, Scores]:
    """Each corpus's cross scores: from branch cross's model, or with `oof` from the model that never saw the corpus
    (its training corpora, recorded in the model file, are checked)."""
    old = Scores(CrossEncoder(models.model), models.scores)
    if not oof:
        return dict.fromkeys(corpus.CORPORA, old)
    new = Scores(CrossEncoder(models.new4), models.scores_new4)
    chosen = {name: old if name in UNSEEN else new for name in corpus.CORPORA}
    for name, scores in chosen.items():
        seen = json.loads(scores.model.meta["training"])["corpora"]
        assert name not in seen, f"{name}'s cross scores would come from a model trained on it ({seen})"
    return chosen


def prepare(seed: int, oof: bool, sets: Sequence[Models] = (Models(),), variants: Sequence[str] = VARIANTS,
            tag: str = "") -> None:  # fmt: skip
    """The folds (`folds_file`) of each set of models (`sets`: the same chunk and sentence models, each set's cross
    scores, each into its own `work` directory): per corpus left out, every reading of the training corpora and of
    the corpus left out as each of `variants` (base among them) composes it."""
    assert "base" in variants and set(variants) <= set(VARIANTS), variants
    names = list(corpus.CORPORA)
    pools = {name: corpus_pools(name) for name in names}
    chunk_models = train.ChunkModels(pools, seed=seed)
    packer = Packer()
    by_set = [scorers(oof, models) for models in sets]
    memos = [s for by_corpus in by_set for s in {id(s): s for s in by_corpus.values()}.values()]
    folds: list[dict[str, Any]] = [{} for _ in sets]
    started = time.monotonic()
    for left_out in names if oof else UNSEEN:
        kept = [n for n in names if n != left_out]
        group = frozenset(kept)
        packed = {n: [packer.example(e, chunk_models.fitted(group - {n}))[0] for e in pools[n]] for n in kept}
        sentences = {n: fit.fit_sentences([e for other in kept if other != n for e in packed[other]], seed=seed) for n in kept}
        full = fit.fit_sentences([e for n in kept for e in packed[n]], seed=seed)
        for out, by_corpus in zip(folds, by_set, strict=True):
            readings = {
                n: _readings(pools[n], packer, chunk_models.fitted(group - {n}), sentences[n], by_corpus[n]) for n in kept
            }
            unseen_readings = _readings(pools[left_out], packer, chunk_models.fitted(group), full, by_corpus[left_out])
            # a training corpus's quotes are ordered by rankers fitted on the other training corpora only, the corpus
            # left out's by rankers fitted on all of them: each reading's order comes from a ranker that never saw it
            training: dict[str, list[Ctx]] = {v: [] for v in variants}
            for n in kept:
                rankers = fit_rankers([r for m in kept if m != n for r in readings[m]], seed, variants)
                start = len({c.owner for c in training["base"]})
                for v, ctxs in _contexts(readings[n], start, rankers, variants).items():
                    training[v] += ctxs
            rankers = fit_rankers([r for n in kept for r in readings[n]], seed, variants)
            out[left_out] = {"training": training, "unseen": _contexts(unseen_readings, 0, rankers, variants)}
        for scores in memos:
            scores.save()
        print(f"prepared {left_out}: {len(folds[0][left_out]['training']['base'])} training readings, "
              f"{len(folds[0][left_out]['unseen']['base'])} unseen; {sum(s.scored for s in memos)} pairs scored, "
              f"{time.monotonic() - started:.0f} s", flush=True)  # fmt: skip
    for models, out in zip(sets, folds, strict=True):
        models.work.mkdir(parents=True, exist_ok=True)
        folds_file(seed, oof, models.work, tag).write_bytes(pickle.dumps(out))


# the rankers screened by `rankers` (reading level, no answer model): name -> (K, LightGBM params, rounds, columns)
_SCORE_COLUMNS = 13  # RANKER_FEATURES' scores, ranks, z-scores and gaps, and K: not the sentence row
_BINARY = {**fit.SENTENCE_PARAMS, "objective": "binary"}
del _BINARY["lambdarank_truncation_level"]
RANKER_TRIALS: dict[str, tuple[int, dict[str, Any], int, int | None]] = {
    f"{name}{k}": (k, params, rounds, columns)
    for k in (6, 10)
    for name, params, rounds, columns in (
        ("lambdarank", fit.SENTENCE_PARAMS, fit.RANKER_ROUNDS, None),  # LEARNED's ranker
        ("regularised", RANKER_REGULARISED, RANKER_REGULARISED_ROUNDS, None),
        ("scores_only", fit.SENTENCE_PARAMS, fit.RANKER_ROUNDS, _SCORE_COLUMNS),
        ("binary", _BINARY, fit.RANKER_ROUNDS, None),
    )
}


def screen_rankers(seed: int, out: Path | None) -> None:
    """Reading-level screen of RANKER_TRIALS against the z-sum: each corpus's readings packed and composed by models
    fitted without it (cross scores out of fold), each ranker fitted on the other nine corpora's readings and judged
    on its: of the answerable readings whose top K holds a key fact, the share whose lead holds one (P@1) and whose
    top 3 hold one; in-sample (fitted on all ten) too, to see overfitting."""
    names = list(corpus.CORPORA)
    pools = {name: corpus_pools(name) for name in names}
    chunk_models = train.ChunkModels(pools, seed=seed)
    packer = Packer()
    by_corpus = scorers(True)
    every = frozenset(names)
    packed = {n: [packer.example(e, chunk_models.fitted(every - {n}))[0] for e in pools[n]] for n in names}
    readings: dict[str, list[Reading]] = {}
    for n in names:
        model = fit.fit_sentences([e for m in names if m != n for e in packed[m]], seed=seed)
        readings[n] = _readings(pools[n], packer, chunk_models.fitted(every - {n}), model, by_corpus[n])
        print(f"read {n}: {len(readings[n])}", flush=True)

    def judged(rs: Sequence[Reading], k: int, order: Any) -> tuple[float, float]:
        leads, quotes = [], []
        for r in rs:
            head = r.top[:k]
            if r.example.question.kind != "answerable" or len(head) < 2 or not r.packed.labels[head].any():
                continue
            chosen = order(r)
            leads.append(bool(r.packed.labels[chosen[0]]))
            quotes.append(bool(r.packed.labels[chosen].any()))
        return float(np.mean(leads)), float(np.mean(quotes))

    def by(forest: Forest, k: int, columns: int | None) -> Any:
        def order(r: Reading) -> list[int]:
            head = r.top[:k]
            scores = forest.predict(ranker_rows(head, r.lexical, r.cross, r.packed.rows)[:, :columns])
            return [head[j] for j in sorted(range(len(head)), key=lambda j: (-scores[j], j))][:MAX_QUOTES]

        return order

    result: dict[str, Any] = {"seed": seed, "trials": {}}
    for k in (6, 10):
        zsum = {n: judged(readings[n], k, lambda r, k=k: reranked(r.top, r.lexical, r.cross, k, quotes=MAX_QUOTES))
                for n in names}  # fmt: skip
        result["trials"][f"zsum{k}"] = {"per_corpus": zsum, "mean": np.mean(list(zsum.values()), axis=0).tolist()}
        print(f"zsum{k}: P@1 {result['trials'][f'zsum{k}']['mean']}", flush=True)
    for name, (k, params, rounds, columns) in RANKER_TRIALS.items():
        per = {}
        for n in names:
            rows, labels, groups = ranker_data([r for m in names if m != n for r in readings[m]], k)
            forest = fit.fit_ranker(rows[:, :columns], labels, groups, seed=seed, params=params, rounds=rounds)
            per[n] = judged(readings[n], k, by(forest, k, columns))
        rows, labels, groups = ranker_data([r for m in names for r in readings[m]], k)
        forest = fit.fit_ranker(rows[:, :columns], labels, groups, seed=seed, params=params, rounds=rounds)
        inside = float(np.mean([judged(readings[n], k, by(forest, k, columns))[0] for n in names]))
        mean_ = np.mean(list(per.values()), axis=0).tolist()
        result["trials"][name] = {"per_corpus": per, "mean": mean_, "in_sample_lead": inside}
        print(f"{name}: unseen (lead, top 3) {mean_}, in sample lead {inside:.4f}", flush=True)
    if out:
        out.write_text(json.dumps(result, indent=1) + "\n")


def folds_file(seed: int, oof: bool, work: Path = OUT, tag: str = "") -> Path:
    return work / f"seed-{seed}{'-oof' if oof else ''}{tag}.pkl"


# ---- arms --------------------------------------------------------------------------------------------------------

CROSS = CROSS_ANSWER_FEATURES[:-1]


@dataclass(frozen=True)
class Arm:
    name: str
    variant: str = "base"  # which composition of the quotes (VARIANTS)
    extra: tuple[str, ...] = ()  # cross columns beside ANSWER_FEATURES


ARMS = {a.name: a for a in [
    Arm("base"),                                             # (a) the shipped recipe
    Arm("cross", extra=CROSS),                               # (b) + cross columns in the answer model
    Arm("cross_z", extra=(*CROSS, "x_lead_zsum3")),          # (b) + the lead's z-sum too
    Arm("rerank3", "z3", (*CROSS, "x_lead_zsum3")),          # (c) quotes re-ranked by the z-sum in the top 3, + columns
    Arm("rerank3_only", "z3"),                               # (c) without the columns: what the re-ranking alone does
    Arm("rerank6", "z6", (*CROSS, "x_lead_zsum3")),          # the z-sum's top 3 of the sentence model's top 6
    Arm("rerank6_only", "z6"),                               # ... without the columns
    Arm("learned6", "l6", (*CROSS, "x_lead_zsum3")),         # a learned ranker's top 3 of the top 6, rerank6's columns
    Arm("learned10", "l10", (*CROSS, "x_lead_zsum3")),       # ... of the top 10
    Arm("learned6r", "r6", (*CROSS, "x_lead_zsum3")),        # the regularised ranker (RANKER_REGULARISED)
    Arm("learned10r", "r10", (*CROSS, "x_lead_zsum3")),
    # the grid of RERANKS (K, W), with rerank6's columns: rerank_k8w1 ... rerank_k15wx (rerank6 is K 6, W 1)
    *(Arm(f"rerank_{v}", v, (*CROSS, "x_lead_zsum3")) for v in RERANKS if v not in ("z3", "z6")),
]}  # fmt: skip
GRID_ARMS = {name: RERANKS[arm.variant] for name, arm in ARMS.items()
             if arm.variant in RERANKS and RERANKS[arm.variant][0] in GRID_KS and arm.name != "rerank6_only"}  # fmt: skip
DESIGNS = {"three": set(UNSEEN), "nine": set(corpus.CORPORA)}
# `--oof`: `oof` trained on the nine others, every cross score out of fold; `same` trained only on the others scored
# by the model that scored the corpus left out (the other three of UNSEEN, or the other five of the six), so that no
# training row's cross score comes from a model that saw the corpus left out
OOF_DESIGNS = {"oof": set(corpus.CORPORA), "same": set()}


def training_corpora(design: str, left_out: str) -> set[str]:
    """The corpora whose rows train the answer model of `left_out` in `design` (itself never among them)."""
    if design == "same":
        return set(UNSEEN) if left_out in UNSEEN else set(corpus.CORPORA) - set(UNSEEN)
    return {**DESIGNS, **OOF_DESIGNS}[design] - {left_out}


def matrix(ctxs: Sequence[Ctx], extra: Sequence[str]) -> np.ndarray:
    return np.asarray([c.row + [c.extra[k] for k in extra] for c in ctxs], dtype=np.float64)


def fit_answers(rows: np.ndarray, labels: np.ndarray, seed: int) -> Any:
    lgb = fit._lightgbm()
    return lgb.train({**fit.ANSWER_PARAMS, "seed": seed}, lgb.Dataset(rows, labels), num_boost_round=fit.ANSWER_ROUNDS)


def oracle_coverage(p: np.ndarray, ctxs: Sequence[Ctx], refuse: float, precision: float = 0.95) -> float:
    """Coverage (answerable questions CITEd and right) at the lowest CITE level whose CITEd answers are right at
    least `precision` of the time, the level chosen on this corpus's own labels (an oracle no deployment has)."""
    read = fit.chosen(p, np.asarray([c.owner for c in ctxs]))
    answered = sorted(((float(p[i]), ctxs[i]) for i in read if p[i] >= refuse and ctxs[i].has_chosen), key=lambda t: -t[0])
    answerable = sum(1 for i in read if ctxs[i].kind == "answerable")
    best = hits = covered = 0
    for n, (q, c) in enumerate(answered, start=1):
        hits += int(c.right)
        covered += int(c.right and c.kind == "answerable")
        last = n == len(answered) or answered[n][0] < q  # a level sits between distinct P only
        if last and hits / n >= precision:
            best = max(best, covered)
    return round(best / answerable, 4) if answerable else 0.0


def lead_fact(p: np.ndarray, ctxs: Sequence[Ctx], what: str = "_lead_fact") -> float:
    """Share of the answerable questions whose answer (the reading chosen) leads with a sentence holding a key fact,
    or (`what`) quotes one ("_quote_fact"), or whose candidates re-ranked (the sentence model's top K) hold one
    ("_top_k_fact": the top K's recall)."""
    read = [ctxs[i] for i in fit.chosen(p, np.asarray([c.owner for c in ctxs]))]
    answerable = [c for c in read if c.kind == "answerable"]
    return round(sum(c.extra[what] for c in answerable) / len(answerable), 4)


@dataclass(frozen=True)
class Answered:
    """A fold's answers to the corpus left out, one a question (its reading chosen), for paired comparisons."""

    p: np.ndarray  # P(right)
    good: np.ndarray  # answered and right (what the AUROC ranks)
    answerable: np.ndarray
    lead: np.ndarray  # the answer's lead sentence holds a key fact


def run_arm(folds: dict[str, Any], arm: Arm, design: str, seed: int) -> tuple[dict[str, Any], dict[str, Answered]]:
    out: dict[str, Any] = {}
    answers: dict[str, Answered] = {}
    for left_out, fold in folds.items():
        training = [c for c in fold["training"][arm.variant] if c.corpus in training_corpora(design, left_out)]
        unseen: list[Ctx] = fold["unseen"][arm.variant]
        X = matrix(training, arm.extra)
        y = np.asarray([c.right for c in training], dtype=np.int32)
        corp = np.asarray([c.corpus for c in training])
        p = np.zeros(len(training))
        for name in dict.fromkeys(corp.tolist()):  # out-of-fold P of the training corpora: the levels' ground
            inside = corp == name
            p[inside] = fit.sigmoid(fit_answers(X[~inside], y[~inside], seed).predict(X[inside], raw_score=True))
        read = fit.chosen(p, np.asarray([c.owner for c in training]))
        refuse, cite = answerlab.levels(p, training, read)["pooled"]
        q = fit.sigmoid(fit_answers(X, y, seed).predict(matrix(unseen, arm.extra), raw_score=True))
        entry = answerlab.judge(q, unseen, refuse, cite)
        entry.update(refuse_below=round(refuse, 4), cite_threshold=round(cite, 4), training_corpora=sorted(set(corp.tolist())),
                     oracle_coverage_95=oracle_coverage(q, unseen, refuse), lead_holds_key_fact=lead_fact(q, unseen))  # fmt: skip
        if "_top_k_fact" in unseen[0].extra:  # folds prepared before the grid lack them
            entry.update(quote_holds_key_fact=lead_fact(q, unseen, "_quote_fact"),
                         top_k_recall=lead_fact(q, unseen, "_top_k_fact"))  # fmt: skip
        out[left_out] = entry
        chosen = fit.chosen(q, np.asarray([c.owner for c in unseen]))
        answers[left_out] = Answered(
            q[chosen],
            np.asarray([q[i] >= refuse and unseen[i].has_chosen and unseen[i].right for i in chosen]),
            np.asarray([unseen[i].kind == "answerable" for i in chosen]),
            np.asarray([unseen[i].extra["_lead_fact"] > 0 for i in chosen]),
        )
    return out, answers


def _auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """bench.quality.metrics.auroc (ranks, ties half) in numpy, for the bootstrap."""
    positives = int(labels.sum())
    negatives = len(labels) - positives
    if not positives or not negatives:
        return float("nan")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    average = np.cumsum(counts) - (counts - 1) / 2.0  # the average rank of each distinct score, from 1
    return float((average[inverse][labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def paired(a: dict[str, Answered], b: dict[str, Answered], seed: int, rounds: int = 2000) -> dict[str, Any]:
    """Arm `b` less arm `a` on the mean of the corpora (AUROC of P(right), answered and right, the lead holds a key
    fact), with a 95% interval from a bootstrap of the questions, resampled alike in both arms within each corpus."""
    rng = np.random.default_rng(seed)
    deltas: dict[str, list[float]] = {"auroc": [], "answered_and_right": [], "lead_holds_key_fact": []}

    def measures(x: Answered, pick: np.ndarray) -> tuple[float, float, float]:
        answerable = x.answerable[pick]
        return _auroc(x.p[pick], x.good[pick]), float(x.good[pick][answerable].mean()), float(x.lead[pick][answerable].mean())

    for draw in range(rounds + 1):
        per = []
        for name in a:
            n = len(a[name].p)
            pick = np.arange(n) if draw == 0 else rng.integers(0, n, n)
            ma, mb = measures(a[name], pick), measures(b[name], pick)
            per.append(tuple(y - x for x, y in zip(ma, mb, strict=True)))
        for k, v in zip(deltas, np.mean(per, axis=0), strict=True):
            deltas[k].append(float(v))
    return {k: {"delta": round(v[0], 4), "ci95": [round(float(np.quantile(v[1:], q)), 4) for q in (0.025, 0.975)]}
            for k, v in deltas.items()}  # fmt: skip


MEASURES = ("auroc", "answered_and_right", "oracle_coverage_95", "lead_holds_key_fact", "followups_right",
            "unanswerables_refused", "quote_holds_key_fact", "top_k_recall")  # fmt: skip


def mean(per: dict[str, dict[str, Any]]) -> dict[str, Any]:
    m: dict[str, Any] = {k: round(float(np.mean([r[k] for r in per.values() if r.get(k) is not None])), 4)
                         for k in MEASURES if all(k in r for r in per.values())}  # fmt: skip
    m["cited"] = sum(r["cited"] for r in per.values())
    m["cite_right"] = sum(r["cite_right"] for r in per.values())
    m["unanswerable_cited"] = sum(r["unanswerable_cited"] for r in per.values())
    return m


def latency(n: int = 200, seed: int = fit.SEED) -> dict[str, Any]:
    """Wall time of scoring K of a question's candidate sentences, one thread: `n` questions drawn from those
    `prepare` scored (the benchmark's search texts and the top candidates of their evidence)."""
    by_question: dict[str, list[str]] = {}
    for question, quote in pickle.loads(SCORES.read_bytes()):
        by_question.setdefault(question, []).append(quote)
    questions = [q for q, quotes in by_question.items() if len(quotes) >= max(LATENCY_KS)]
    rng = np.random.default_rng(seed)
    picked = [questions[i] for i in sorted(rng.choice(len(questions), size=min(n, len(questions)), replace=False))]
    model = CrossEncoder(MODEL)
    model.score(picked[0], by_question[picked[0]][:1])  # warm-up
    report: dict[str, Any] = {"pairs_per_question": list(LATENCY_KS), "questions": len(picked), "threads": 1,
                              "load_average_before": Path("/proc/loadavg").read_text().split()[:3]}  # fmt: skip
    for k in LATENCY_KS:
        times = []
        for q in picked:
            started = time.perf_counter()
            model.score(q, by_question[q][:k])
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        report[f"k{k}_ms"] = {"p50": round(statistics.median(times), 2), "p95": round(times[int(0.95 * len(times)) - 1], 2),
                              "mean": round(statistics.fmean(times), 2)}  # fmt: skip
    report["load_average_after"] = Path("/proc/loadavg").read_text().split()[:3]
    return report


def report(runs: Sequence[Path], timing: Path, out: Path) -> None:
    """The seeds' `run` results and the latency in one file, with what was run; per-corpus tables on stdout."""
    seeds = [json.loads(path.read_text()) for path in runs]
    digest = hashlib.sha256(MODEL.read_bytes()).hexdigest()
    result = {
        "what": __doc__.split("\n\n")[0].strip() if __doc__ else "",
        "run": "python -m bench.reader.crosslab --seed S prepare; ... --seed S run; ... latency; ... report",
        "model": {
            "file": str(MODEL),
            "sha256": digest,
            "bytes": MODEL.stat().st_size,
            "from": "git show cross:src/ragsvc/reading/models/cross.onnx (297ed37)",
            "meta": CrossEncoder(MODEL).meta,
        },
        "unseen_by_cross": list(UNSEEN),
        "designs": {
            "three": "answer model trained on the other three of the four corpora unseen by the cross-encoder",
            "nine": "answer model trained on all nine others (six of them carry in-sample cross scores)",
        },
        "arms": {name: {"variant": arm.variant, "extra": list(arm.extra)} for name, arm in ARMS.items()},
        "levels": "chosen the shipped way: refuse_below and the CITE level (95%, at least 20) on out-of-fold P of the "
        "training corpora (answer models fitted without each)",
        "seeds": {str(r["seed"]): r for r in seeds},
        "latency": json.loads(timing.read_text()),
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    tables(seeds, DESIGNS)


def report_oof(runs: Sequence[Path], out: Path, training: Path | None, models: Models = Models()) -> None:
    """The seeds' `run --oof` results under the key "out_of_fold" of the results file `out` (its other keys kept),
    with both models, which scored each corpus and cross-new4's training report (`training`, from cross_train's
    --report); per-corpus tables on stdout."""
    seeds = [json.loads(path.read_text()) for path in runs]
    by_corpus = scorers(oof=True, models=models)

    def described(path: Path, scores: Scores) -> dict[str, Any]:
        return {"file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "bytes": path.stat().st_size,
                "trained_on": json.loads(scores.model.meta["training"])["corpora"],
                "scores": sorted(n for n, s in by_corpus.items() if s is scores)}  # fmt: skip

    result = json.loads(out.read_text()) if out.exists() else {}
    result["out_of_fold"] = {
        "what": "every corpus left out in turn, each corpus's cross scores from the cross-encoder that never saw it; "
        "answer model trained on the nine others (design `oof`), or only on the others scored by the same model as the "
        "corpus left out (design `same`: the other three of the four, the other five of the six; no second-order leak)",
        "run": "python -m bench.reader.crosslab --oof --seed S prepare; ... --oof --seed S run base cross rerank6 "
        "rerank6_only --out RUN.json; ... --oof report RUN.json ... --training TRAIN.json --out THIS",
        "models": {
            "cross": described(models.model, by_corpus[UNSEEN[0]]),
            "cross-new4": described(models.new4, next(s for n, s in by_corpus.items() if n not in UNSEEN)),
        },
        "second_order_leakage": "a training row's cross score never comes from a model trained on that row's corpus, "
        "but it may come from one trained on the corpus left out (pgdocs' rows are scored by cross-new4, trained on "
        "djangodocs, when djangodocs is left out): the answer model may learn how cross scores behave on questions "
        "like the unseen corpus's; the unseen corpus's own scores are always out of sample",
        "levels": "chosen the shipped way: refuse_below and the CITE level (95%, at least 20) on out-of-fold P of the "
        "training corpora (answer models fitted without each)",
        "arms": {name: {"variant": ARMS[name].variant, "extra": list(ARMS[name].extra)} for name in seeds[0]["arms"]},
        "seeds": {str(r["seed"]): r for r in seeds},
    }
    if training is not None:
        result["out_of_fold"]["cross_new4_training"] = json.loads(training.read_text())
    out.write_text(json.dumps(result, indent=1) + "\n")
    tables(seeds, OOF_DESIGNS)


def loco(
    results: dict[str, Any], answers: dict[tuple[str, str], dict[str, Answered]], design: str, against: str, seed: int
) -> dict[str, Any]:
    """Leave one corpus out over GRID_ARMS: each corpus's (K, W) is the arm of the best mean answered-and-right over
    the OTHER corpora (ties: their mean AUROC), and the corpus's figures are that arm's; the composite against arm
    `against` (paired bootstrap)."""
    arms = [name for name in GRID_ARMS if name in results]
    corpora = list(results[arms[0]][design]["per_corpus"])
    picks: dict[str, str] = {}

    def others(name: str, measure: str, left_out: str) -> float:
        return float(np.mean([results[name][design]["per_corpus"][c][measure] for c in corpora if c != left_out]))

    for c in corpora:
        picks[c] = max(arms, key=lambda name: (others(name, "answered_and_right", c), others(name, "auroc", c)))
    per = {c: results[picks[c]][design]["per_corpus"][c] for c in corpora}
    composite = {c: answers[(picks[c], design)][c] for c in corpora}
    return {"picks": {c: {"arm": a, "k": GRID_ARMS[a][0], "w": GRID_ARMS[a][1]} for c, a in picks.items()},
            "same_pick_every_fold": len(set(picks.values())) == 1, "mean": mean(per), "per_corpus": per,
            f"against_{against}": paired(answers[(against, design)], composite, seed)}  # fmt: skip


def report_grid(runs: Sequence[Path], timing: Path, out: Path) -> None:
    """The seeds' `run --oof --against rerank6 --loco` results over GRID_ARMS and the latency by K in one file
    (`out`), the mean table and the leave-one-corpus-out picks on stdout."""
    seeds = [json.loads(path.read_text()) for path in runs]
    by_corpus = scorers(oof=True)
    latency_ = json.loads(timing.read_text())
    result = {
        "what": "the re-ranking's K (the sentence model's top K re-ranked) and the cross score's weight W in "
        "z(sentence score) + W z(cross score) (W x: the cross score alone), each corpus left out, its cross scores from "
        "the fold cross-encoder that never saw it, the answer model (ANSWER_FEATURES + rerank6's cross columns, top 3 / "
        "top 6 of the same candidates) trained on the nine others (design oof); then (K, W) chosen per corpus on the "
        "nine others (best mean answered and right, ties mean AUROC)",
        "run": "python -m bench.reader.crosslab --oof --seed S prepare; ... --oof --seed S run --design oof "
        "--against rerank6 --loco "
        f"{' '.join(GRID_ARMS)} --out RUN.json; ... latency --out L.json; ... report --grid RUN.json ... L.json --out THIS",
        "grid": {name: {"k": k, "w": "cross alone" if w is None else w} for name, (k, w) in GRID_ARMS.items()},
        "models": {
            path.name: {
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                "scores": sorted(n for n, s in by_corpus.items() if s.model.path == path),
            }
            for path in (MODEL, NEW4)
        },
        "measures": {
            "top_k_recall": "share of the answerable questions (the reading the answer model chose) whose "
            "sentence model's top K candidates hold a key fact",
            "quote_holds_key_fact": "... whose quotes hold one",
            "lead_holds_key_fact": "... whose first quote holds one",
        },
        "levels": "chosen the shipped way: refuse_below and the CITE level (95%, at least 20) on out-of-fold P of the "
        "training corpora (answer models fitted without each)",
        "seeds": {str(r["seed"]): r for r in seeds},
        "latency": latency_,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    head = ("arm", "K", "W", "AUROC", "answered and right", "CITE right/CITEd", "coverage at 95%, oracle",
            "lead holds a key fact", "a quote holds one", "top-K recall", "cross ms p50 / p95")  # fmt: skip
    print(f"oof, mean of ten: seeds {' / '.join(str(r['seed']) for r in seeds)}")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, (k, w) in GRID_ARMS.items():
        rows = [r["arms"][name]["oof"]["mean"] for r in seeds]
        timed = latency_.get(f"k{k}_ms", {})
        cells = [str(k), "x" if w is None else f"{w:g}",
                 " / ".join(f"{row['auroc']:.3f}" for row in rows),
                 " / ".join(f"{100 * row['answered_and_right']:.1f}%" for row in rows),
                 " / ".join(f"{row['cite_right']}/{row['cited']}" for row in rows),
                 " / ".join(f"{100 * row['oracle_coverage_95']:.1f}%" for row in rows),
                 *(" / ".join(f"{100 * row[m]:.1f}%" for row in rows)
                   for m in ("lead_holds_key_fact", "quote_holds_key_fact", "top_k_recall")),
                 f"{timed.get('p50', '')} / {timed.get('p95', '')}"]  # fmt: skip
        print(f"| {name} | " + " | ".join(cells) + " |")
    _print_against_rerank6(seeds, list(GRID_ARMS))
    for r in seeds:
        chosen = r["loco"]["oof"]
        print(f"\nLOCO seed {r['seed']}: same pick every fold: {chosen['same_pick_every_fold']}; mean "
              f"{json.dumps(chosen['mean'])}; against rerank6 {json.dumps(chosen['against_rerank6'])}")  # fmt: skip
        for c, pick in chosen["picks"].items():
            row, shipped = chosen["per_corpus"][c], r["arms"]["rerank6"]["oof"]["per_corpus"][c]
            print(f"| {c} | {pick['arm']} | {shipped['auroc']:.3f} -> {row['auroc']:.3f} | "
                  f"{100 * shipped['answered_and_right']:.1f} -> {100 * row['answered_and_right']:.1f}% | "
                  f"{shipped['cite_right']}/{shipped['cited']} -> {row['cite_right']}/{row['cited']} | "
                  f"{100 * shipped['lead_holds_key_fact']:.1f} -> {100 * row['lead_holds_key_fact']:.1f}% |")  # fmt: skip


def _print_against_rerank6(seeds: Sequence[dict[str, Any]], names: Sequence[str]) -> None:
    """Each arm of `names` that the runs compared with rerank6 (`run --against rerank6`): its paired differences,
    the seeds' side by side."""
    for name in names:
        if name in seeds[0]["against_rerank6"]:
            d = [r["against_rerank6"][name]["oof"] for r in seeds]
            print(f"{name} less rerank6: " + "; ".join(
                k + " " + " / ".join(f"{x[k]['delta']:+.4f} [{x[k]['ci95'][0]:+.4f}, {x[k]['ci95'][1]:+.4f}]" for x in d)
                for k in d[0]))  # fmt: skip


def report_learned(runs: Sequence[Path], out: Path) -> None:
    """The seeds' `run --oof --design oof --against rerank6` results of the learned rankers (LEARNED_ARMS) in one
    file (`out`); the mean table, the paired differences and the per-corpus table on stdout."""
    seeds = [json.loads(path.read_text()) for path in runs]
    arms = list(seeds[0]["arms"])
    result = {
        "what": "a learned second stage: the best 3 of the sentence model's top K ordered by a LambdaRank forest over "
        "each candidate's RANKER_FEATURES (bench.reader.learned, fit.fit_ranker; label: it holds a key fact) "
        "instead of the fixed z-sum; each corpus left out, its cross scores from the fold cross-encoder that never saw "
        "it; per fold the ranker that orders a training corpus's quotes is fitted on the other training corpora only, "
        "the one that orders the corpus left out's on all nine; answer model ANSWER_FEATURES + rerank6's cross "
        "columns trained on the nine others (design oof), levels chosen the shipped way",
        "run": "python -m bench.reader.crosslab --oof --seed S prepare --variants z6 k10w1 l6 l10; ... --oof --seed S "
        f"run --design oof --against rerank6 {' '.join(arms)} --out RUN.json; ... report --learned RUN.json ... --out THIS",
        "ranker": {
            "features": list(RANKER_FEATURES),
            "variants": {
                ARMS[a].variant: {"k": k, "params": params or fit.SENTENCE_PARAMS, "rounds": rounds}
                for a in arms
                if ARMS[a].variant in LEARNED
                for k, params, rounds in [LEARNED[ARMS[a].variant]]
            },
        },
        "models": {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in (MODEL, NEW4)},
        "seeds": {str(r["seed"]): r for r in seeds},
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    measures = ("auroc", "answered_and_right", "oracle_coverage_95", "lead_holds_key_fact", "quote_holds_key_fact",
                "top_k_recall")  # fmt: skip
    print(f"oof, mean of ten: seeds {' / '.join(str(r['seed']) for r in seeds)}")
    print("| arm | " + " | ".join(measures) + " | CITE right/CITEd |")
    print("|" + "---|" * (len(measures) + 2))
    for name in arms:
        rows = [r["arms"][name]["oof"]["mean"] for r in seeds]
        cells = [" / ".join(f"{row[m]:.3f}" if m == "auroc" else f"{100 * row[m]:.1f}%" for row in rows) for m in measures]
        print(f"| {name} | " + " | ".join(cells) + " | " + " / ".join(f"{r['cite_right']}/{r['cited']}" for r in rows) + " |")
    _print_against_rerank6(seeds, arms)
    print("\n| corpus left out | " + " | ".join(f"{a}: AUROC / answered and right / lead holds a key fact" for a in arms) + " |")
    for c in seeds[0]["arms"][arms[0]]["oof"]["per_corpus"]:
        cells = []
        for name in arms:
            rows = [r["arms"][name]["oof"]["per_corpus"][c] for r in seeds]
            cells.append(", ".join(" / ".join(f"{row[m]:.3f}" if m == "auroc" else f"{100 * row[m]:.1f}" for row in rows)
                                   for m in ("auroc", "answered_and_right", "lead_holds_key_fact")))  # fmt: skip
        print(f"| {c} | " + " | ".join(cells) + " |")


def tables(seeds: Sequence[dict[str, Any]], designs: dict[str, set[str]]) -> None:
    """Per design, arm and corpus left out (then their mean), the seeds' figures in each cell, in the order given."""
    for design in designs:
        print(f"\n{design}: seeds {' / '.join(str(r['seed']) for r in seeds)}")
        head = ("arm", "corpus", "AUROC", "answered and right", "CITE (right/CITEd)", "unanswerables CITEd",
                "coverage at 95%, oracle level", "lead holds a key fact")  # fmt: skip
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for name in seeds[0]["arms"]:
            arms = [r["arms"][name][design] for r in seeds]
            for corpus_name in [*arms[0]["per_corpus"], "mean"]:
                rows = [a["mean"] if corpus_name == "mean" else a["per_corpus"][corpus_name] for a in arms]
                cells = [
                    " / ".join(f"{row['auroc']:.3f}" for row in rows),
                    " / ".join(f"{100 * row['answered_and_right']:.1f}%" for row in rows),
                    " / ".join(f"{row['cite_right']}/{row['cited']}" for row in rows),
                    " / ".join(str(row["unanswerable_cited"]) for row in rows),
                    " / ".join(f"{100 * row['oracle_coverage_95']:.1f}%" for row in rows),
                    " / ".join(f"{100 * row['lead_holds_key_fact']:.1f}%" for row in rows),
                ]
                print(f"| {name} | {corpus_name} | " + " | ".join(cells) + " |")
        for name in seeds[0]["against_base"]:
            if design in seeds[0]["against_base"][name]:
                deltas = [r["against_base"][name][design] for r in seeds]
                cells = [" / ".join(f"{d[k]['delta']:+.4f} [{d[k]['ci95'][0]:+.4f}, {d[k]['ci95'][1]:+.4f}]"
                                    for d in deltas if k in d) for k in deltas[0]]  # fmt: skip
                print(f"{name} less base ({', '.join(deltas[0])}): " + "; ".join(cells))


def compare(before: Path, after: Path, seed: int) -> dict[str, Any]:
    """Each arm and design that both `run --answers` files hold: `after`'s less `before`'s (`paired`)."""
    a, b = (pickle.loads(path.read_bytes()) for path in (before, after))
    return {key: paired(a[key], b[key], seed) for key in a if key in b}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("prepare", "run", "latency", "report", "compare", "rankers"))
    parser.add_argument("arms", nargs="*")
    parser.add_argument("--seed", type=int, default=fit.SEED)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--oof", action="store_true", help="every corpus left out, its cross scores out of fold")
    parser.add_argument("--training", type=Path, help="with report --oof: cross-new4's training report")
    parser.add_argument("--against", default="base", help="run: the arm the others are compared with")
    parser.add_argument("--design", action="append", help="run: only these designs (default: every one)")
    parser.add_argument("--loco", action="store_true", help="run: (K, W) chosen per corpus on the other corpora")
    parser.add_argument("--grid", action="store_true", help="report: the grid's runs (run --loco), then the latency's")
    # each of the five once, or (prepare only) each as many times: one set of models a time, the folds of each set
    parser.add_argument("--model", type=Path, action="append", help=f"the cross-encoder trained on the six ({MODEL})")
    parser.add_argument("--scores", type=Path, action="append", help=f"its memo file ({SCORES})")
    parser.add_argument("--model-new4", type=Path, action="append", help=f"the one trained on UNSEEN, --oof ({NEW4})")
    parser.add_argument("--scores-new4", type=Path, action="append", help=f"its memo file ({SCORES_NEW4})")
    parser.add_argument("--work", type=Path, action="append", help=f"prepare's folds, written by prepare, read by run ({OUT})")
    parser.add_argument("--answers", type=Path, help="with run: each arm's answers, for compare")
    parser.add_argument("--tag", default="", help="prepare, run: the folds file's suffix (folds_file)")
    parser.add_argument("--learned", action="store_true", help="report: the learned rankers' runs (run --against rerank6)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=VARIANTS, help="prepare: only these (and base)")
    args = parser.parse_intermixed_args(argv)
    given = [args.model or [MODEL], args.scores or [SCORES], args.model_new4 or [NEW4], args.scores_new4 or [SCORES_NEW4],
             args.work or [OUT]]  # fmt: skip
    sets = [Models(*paths) for paths in zip(*given, strict=True)]
    models = sets[0]
    if args.what == "rankers":
        screen_rankers(args.seed, args.out)
        return
    if args.what == "prepare":
        prepare(args.seed, args.oof, sets, tuple(dict.fromkeys(["base", *args.variants])), args.tag)
        return
    if args.what == "compare":  # arms: two run --answers files
        before, after = map(Path, args.arms)
        compared = compare(before, after, args.seed)
        print(json.dumps(compared, indent=1), flush=True)
        if args.out:
            args.out.write_text(json.dumps(compared, indent=1) + "\n")
        return
    if args.what == "report" and args.grid:  # arms: the runs' JSON files, then the latency's
        *runs, timing = map(Path, args.arms)
        report_grid(runs, timing, args.out)
        return
    if args.what == "report" and args.learned:  # arms: the runs' JSON files
        report_learned(list(map(Path, args.arms)), args.out)
        return
    if args.what == "report" and args.oof:  # arms: the runs' JSON files
        report_oof(list(map(Path, args.arms)), args.out, args.training, models)
        return
    if args.what == "report":  # arms: the runs' JSON files, then the latency's
        *runs, timing = map(Path, args.arms)
        report(runs, timing, args.out)
        return
    if args.what == "latency":
        timing = latency()
        print(json.dumps(timing), flush=True)
        if args.out:
            args.out.write_text(json.dumps(timing, indent=1) + "\n")
        return
    with folds_file(args.seed, args.oof, models.work, args.tag).open("rb") as handle:
        folds = pickle.load(handle)
    results: dict[str, Any] = {"seed": args.seed, "arms": {}, f"against_{args.against}": {}}
    answers: dict[tuple[str, str], dict[str, Answered]] = {}
    for name in args.arms or list(ARMS):
        for design in args.design or (OOF_DESIGNS if args.oof else DESIGNS):
            per, answers[(name, design)] = run_arm(folds, ARMS[name], design, args.seed)
            results["arms"].setdefault(name, {})[design] = {"mean": mean(per), "per_corpus": per}
            print(name, design, json.dumps(mean(per)), flush=True)
    for (name, design), arm_answers in answers.items():
        if name != args.against and (args.against, design) in answers:
            compared = paired(answers[(args.against, design)], arm_answers, args.seed)
            results[f"against_{args.against}"].setdefault(name, {})[design] = compared
            print(name, design, f"against {args.against}:", json.dumps(compared), flush=True)
    if args.loco:
        results["loco"] = {d: loco(results["arms"], answers, d, args.against, args.seed) for d in {d for _, d in answers}}
        print("loco", json.dumps(results["loco"]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    if args.answers:
        args.answers.write_bytes(pickle.dumps({f"{name}/{design}": a for (name, design), a in answers.items()}))


if __name__ == "__main__":
    sys.exit(main())
