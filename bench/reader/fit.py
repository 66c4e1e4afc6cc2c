"""Fitting the reader's two models with LightGBM (a training-only dependency: the `train` extra), deterministic for
a fixed seed, and the offline judgement of a fitted reader on examples it never saw.

- The sentence model ranks each question's candidate sentences (LambdaRank over questions that have a sentence
  holding a key fact).
- The chunk model ranks the chunks retrieval found (the pool) so that the answer reads the best few (LambdaRank over
  questions with a chunk holding a key fact; `ragsvc.reading.packing`).
- The answer model gives P(answer right) from ANSWER_FEATURES of the answer the sentence model composes (binary
  log-loss). Its training rows come from sentence scores *cross-fitted* by corpus: a corpus's answers are composed by
  a sentence model that never saw that corpus, as an unseen corpus's will be.

With `reranking` (what `make train-reader` trains with), each answer quotes the best MAX_QUOTES of the sentence
model's top K by the z-sum of its and a cross-encoder's scores, as the served extractive answer does
(ragsvc.reading.cross), each corpus's cross scores from a model that never saw it (bench/quality/crossfolds.py), and
its row has the cross columns (CROSS_ANSWER_FEATURES) after ANSWER_FEATURES: the extractive answer model reads them
all, the answer model ANSWER_FEATURES only.

A follow-up searched two ways (`Example.options`) is read with each search's evidence, both readings train both
models, and it is answered from the reading the answer model judges likelier right (`likeliest`), as the pipeline
answers it (`Pipeline._best_read`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.quality.metrics import auroc
from bench.quality.questions import contains
from bench.reader import dataset
from bench.reader.dataset import Example
from ragsvc.reading import features, packing
from ragsvc.reading.cross import CROSS_ANSWER_FEATURES, cross_answer_features
from ragsvc.reading.forest import Forest
from ragsvc.reading.trained import choose, rerank_quotes

SEED = 20261127


def _lightgbm() -> Any:
    import lightgbm  # training only

    return lightgbm


SENTENCE_PARAMS = {
    "objective": "lambdarank",
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_data_in_leaf": 20,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "lambdarank_truncation_level": 10,
    "verbose": -1,
    "deterministic": True,
    "num_threads": 1,
    "force_row_wise": True,
}
SENTENCE_ROUNDS = 200
ANSWER_PARAMS = {
    "objective": "binary",
    # thresholds drawn at random: with the chunk and sentence models' sureness among its features, AUROC +0.009 on
    # the mean of the ten unseen corpora in each of two seeds (+0.005 and +0.008 without them; docs/reading.md)
    "extra_trees": True,
    "learning_rate": 0.05,
    "num_leaves": 7,
    "min_data_in_leaf": 20,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "verbose": -1,
    "deterministic": True,
    "num_threads": 1,
    "force_row_wise": True,
}
ANSWER_ROUNDS = 150


def fit_sentences(examples: Sequence[Example], *, seed: int = SEED) -> Forest:
    lgb = _lightgbm()
    used = [o for e in examples for o in e.options if o.has_positive and len(o.found) > 1]
    rows = np.vstack([e.rows for e in used])
    labels = np.concatenate([e.labels for e in used])
    data = lgb.Dataset(rows, labels, group=[len(e.found) for e in used], free_raw_data=False)
    booster = lgb.train({**SENTENCE_PARAMS, "seed": seed}, data, num_boost_round=SENTENCE_ROUNDS)
    return Forest.from_lightgbm(booster.dump_model())


RANKER_ROUNDS = 200  # with SENTENCE_PARAMS: the learned second stage over the top K (bench.reader.learned)


def fit_ranker(
    rows: np.ndarray,
    labels: np.ndarray,
    groups: Sequence[int],
    *,
    seed: int = SEED,
    params: Mapping[str, Any] | None = None,
    rounds: int = RANKER_ROUNDS,
) -> Forest:
    """The learned second stage: LambdaRank over each reading's top K candidates (RANKER_FEATURES rows, `groups`
    their counts, readings with a candidate holding a key fact only), 1 where the candidate holds a key fact
    (`params`: SENTENCE_PARAMS, or others; an objective other than lambdarank ignores the groups)."""
    lgb = _lightgbm()
    params = {**(SENTENCE_PARAMS if params is None else params), "seed": seed}
    ranking = params["objective"] == "lambdarank"
    data = lgb.Dataset(rows, labels, group=list(groups) if ranking else None, free_raw_data=False)
    booster = lgb.train(params, data, num_boost_round=rounds)
    return Forest.from_lightgbm(booster.dump_model())


CHUNK_ROUNDS = 200  # with SENTENCE_PARAMS


def chunk_table(example: Example) -> np.ndarray:
    """CHUNK_FEATURES of each chunk of the example's evidence."""
    table = packing.chunk_features(example.found, example.rows.tolist(), example.evidence)
    return np.asarray(table, dtype=np.float64).reshape(len(example.evidence), len(packing.CHUNK_FEATURES))


def chunk_labels(example: Example) -> np.ndarray:
    """1 for each chunk of the example's evidence that holds a candidate sentence with a key fact."""
    labels = np.zeros(len(example.evidence), dtype=np.int32)
    for candidate, label in zip(example.found, example.labels, strict=True):
        labels[candidate.marker - 1] |= int(label)
    return labels


def fit_chunks(pools: Sequence[Example], *, seed: int = SEED) -> Forest:
    """The chunk model, from examples holding every chunk retrieved (the pool)."""
    lgb = _lightgbm()
    used = [o for e in pools for o in e.options if o.has_positive and len(o.evidence) > 1]
    rows = np.vstack([chunk_table(e) for e in used])
    labels = np.concatenate([chunk_labels(e) for e in used])
    data = lgb.Dataset(rows, labels, group=[len(e.evidence) for e in used], free_raw_data=False)
    booster = lgb.train({**SENTENCE_PARAMS, "seed": seed}, data, num_boost_round=CHUNK_ROUNDS)
    return Forest.from_lightgbm(booster.dump_model())


def retrieval_order() -> Forest:
    """A chunk model without trees: every chunk scores 0, so the answer reads retrieval's first chunks (the arm
    without a chunk model: `train.py --retrieval-order`)."""
    none = np.zeros(0, dtype=np.int32)
    return Forest(feature=none, threshold=np.zeros(0), left=none, right=none, value=np.zeros(0), roots=none, depth=0)


def packed(pool: Example, chunks: Forest, limit: int = dataset.PACKED) -> Example:
    """`pool` reading the `limit` chunks the chunk model packs, in its order, and so each of its other searches (as
    the server packs each search's evidence before it chooses between them)."""
    first = _packed(pool, chunks, limit)
    if not pool.alternatives:
        return first
    return dataclasses.replace(first, alternatives=tuple(_packed(other, chunks, limit) for other in pool.alternatives))


def _packed(pool: Example, chunks: Forest, limit: int) -> Example:
    """One search's pool reading what the chunk model packs, with how it packed it."""
    return dataset.repacked(pool, packing.pack(chunks, chunk_table(pool).tolist(), limit))


def fit_answers(rows: np.ndarray, labels: np.ndarray, *, seed: int = SEED) -> Forest:
    lgb = _lightgbm()
    data = lgb.Dataset(rows, labels, free_raw_data=False)
    booster = lgb.train({**ANSWER_PARAMS, "seed": seed}, data, num_boost_round=ANSWER_ROUNDS)
    return Forest.from_lightgbm(booster.dump_model())


@dataclass(frozen=True, slots=True)
class Composed:
    """An example's answer as the fitted reader composes it."""

    chosen: tuple[int, ...]  # candidate indices quoted, lead first
    row: list[float]  # ANSWER_FEATURES, and re-ranked (`reranking`) CROSS_ANSWER_FEATURES
    right: bool  # a quoted sentence holds a key fact


_ANSWER_MASK: list[int] = []  # answer columns zeroed (an ablation: `answer_mask`)


@contextlib.contextmanager
def answer_mask(columns: Sequence[int]) -> Iterator[None]:
    """Compose answer rows with `columns` zeroed while the block runs (an ablation of answer features)."""
    _ANSWER_MASK[:] = columns
    try:
        yield
    finally:
        _ANSWER_MASK[:] = []


CrossScores = Callable[[str, Sequence[str]], np.ndarray]  # (search text, quotes) -> a cross score each


@dataclass(frozen=True, slots=True)
class Rerank:
    """The quotes re-ranked among the sentence model's top `candidates` with each corpus's cross scores."""

    scores: Mapping[str, CrossScores]  # by corpus
    candidates: int


_RERANK: list[Rerank] = []  # the re-ranking `compose` applies (`reranking`)
_WITHOUT_CROSS: list[bool] = []  # compose rows without the cross columns (`without_cross_columns`)


@contextlib.contextmanager
def reranking(rerank: Rerank | None) -> Iterator[None]:
    """Compose answers quoting the re-ranked sentences while the block runs (None: the sentence model's order)."""
    _RERANK[:] = [rerank] if rerank is not None else []
    try:
        yield
    finally:
        _RERANK[:] = []


@contextlib.contextmanager
def without_cross_columns() -> Iterator[None]:
    """Compose re-ranked answers' rows without their cross columns while the block runs (for the answer model, which
    judges an LLM's answers)."""
    _WITHOUT_CROSS[:] = [True]
    try:
        yield
    finally:
        _WITHOUT_CROSS[:] = []


def cross_columns() -> int:
    """How many cross columns end each answer row `compose` makes (0 without re-ranking)."""
    return len(CROSS_ANSWER_FEATURES) if _RERANK and not _WITHOUT_CROSS else 0


def quotes(example: Example, scores: np.ndarray) -> tuple[list[int], list[float]]:
    """The candidates an answer quotes, lead first: the sentence model's best, or re-ranked (`reranking`) as the
    served reader re-ranks them (TrainedReader._chosen), with the answer's cross columns (CROSS_ANSWER_FEATURES;
    none without re-ranking)."""
    if not _RERANK:
        return choose(example.found, scores.tolist()), []
    rerank = _RERANK[0]
    top, cross, chosen = rerank_quotes(
        example.found, scores.tolist(), example.analysis.search, rerank.scores[example.corpus], rerank.candidates
    )
    return chosen, cross_answer_features(chosen, top, scores, cross)


def top3(examples: Sequence[Example], sentences: Forest) -> float | None:
    """Share of the examples whose evidence holds the answer in which a chosen quote holds it."""
    held = [e for e in examples if e.has_positive]
    found = sum(1 for e in held if any(e.labels[i] for i in choose(e.found, sentences.predict(e.rows).tolist())))
    return round(found / len(held), 4) if held else None


def extra_answer_columns(extra: np.ndarray, lead: int) -> list[float]:
    """The answer's columns of an experiment's extra sentence columns (one row a candidate, its first column a score
    such as bench/reader/semantic.py's similarity): the lead's score (-1 without a lead), the best candidate's (-1
    without candidates) and the gap between them (0 without a lead)."""
    if extra.shape[0] == 0:
        return [-1.0, -1.0, 0.0]
    best = float(extra[:, 0].max())
    lead_score = float(extra[lead, 0]) if lead >= 0 else -1.0
    return [lead_score, best, best - lead_score if lead >= 0 else 0.0]


def compose(example: Example, sentences: Forest) -> Composed:
    scores = sentences.predict(example.rows) if len(example.found) else np.zeros(0)
    chosen, cross = quotes(example, scores)
    lead = chosen[0] if chosen else -1
    packed = example.packing or features.Packing(tuple(range(len(example.evidence))), (0.0,) * len(example.evidence))
    row = features.answer_features(
        example.analysis, example.found, example.rows.tolist(), scores.tolist(), lead, example.evidence, packed, chosen
    )
    for column in _ANSWER_MASK:
        row[column] = 0.0
    extra = example.rows[:, len(features.SENTENCE_FEATURES) :]
    if extra.shape[1]:  # an experiment's columns (bench/reader/semantic.py): the answer reads them too
        row += extra_answer_columns(extra, lead)
    row += [] if _WITHOUT_CROSS else cross  # last: the answer model's rows are these without them (`cross_columns`)
    facts = example.question.key_facts
    right = example.question.should_answer and any(contains(example.found[i].quote, f) for i in chosen for f in facts)
    return Composed(tuple(chosen), row, right)


def likeliest(example: Example, sentences: Forest, answers: Forest) -> tuple[Example, Composed, float]:
    """The reading of `example` (among its options) whose answer the answer model judges likeliest right (the first
    on a tie, as `Pipeline._best_read` chooses), its answer and P(right)."""
    best: tuple[Example, Composed, float] | None = None
    for option in example.options:
        composed = compose(option, sentences)
        p = float(sigmoid(answers.predict(np.asarray([composed.row])))[0])
        if best is None or p > best[2]:
            best = (option, composed, p)
    assert best is not None  # an example is its own first option
    return best


def cross_fitted(
    by_corpus: dict[str, list[Example]], *, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray, list[Example], np.ndarray]:
    """Answer rows and labels of every reading of every example (`Example.options`), each corpus's composed by a
    sentence model fitted on the others, the readings in order, and the index of the question each belongs to."""
    rows: list[list[float]] = []
    labels: list[int] = []
    order: list[Example] = []
    owners: list[int] = []
    for name, examples in by_corpus.items():
        others = [e for other, group in by_corpus.items() if other != name for e in group]
        model = fit_sentences(others, seed=seed)
        for e in examples:
            if e.question.kind == "injection":
                continue
            question = owners[-1] + 1 if owners else 0
            for option in e.options:
                composed = compose(option, model)
                rows.append(composed.row)
                labels.append(int(composed.right))
                order.append(option)
                owners.append(question)
    return np.asarray(rows, dtype=np.float64), np.asarray(labels, dtype=np.int32), order, np.asarray(owners)


def chosen(p: np.ndarray, owners: np.ndarray) -> np.ndarray:
    """Per question (`owners`, in order), the index of its reading with the highest `p` (the first on a tie)."""
    best: dict[int, int] = {}
    for i, owner in enumerate(owners.tolist()):
        if owner not in best or p[i] > p[best[owner]]:
            best[owner] = i
    return np.asarray(list(best.values()), dtype=np.int64)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def cite_threshold(p: np.ndarray, right: np.ndarray, *, precision: float = 0.95, min_cited: int = 20) -> float:
    """The lowest threshold at which the answers with P >= it are right at least `precision` of the time (counting
    at least `min_cited` answers); 1.0 when none is."""
    order = np.argsort(-p, kind="stable")
    best = 1.0
    hits = 0
    for n, i in enumerate(order, start=1):
        hits += int(right[i])
        if n >= min_cited and hits / n >= precision:
            best = float(p[i])
    return best


def refuse_threshold(p: np.ndarray, answerable: np.ndarray, *, false_refusals: float = 0.05) -> float:
    """The highest threshold below which refusing turns away at most `false_refusals` of the questions whose
    evidence holds the answer (a refusal that should have been an answer is a defect; unsure answers are routed,
    not refused)."""
    held = np.sort(p[answerable])
    if held.size == 0:
        return 0.0
    return float(held[int(np.floor(false_refusals * held.size))])


def evidence_answers(readings: Sequence[Example]) -> np.ndarray:
    """For each reading, whether its question should be answered and its packed evidence holds a key fact (what the
    refusal level is chosen to spare; an answerability model's label: bench/reader/refuselab.py)."""
    return np.asarray([e.question.should_answer and e.has_positive for e in readings], dtype=bool)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a fitted reader answers one question: the reading it chose, P(right), and what it did."""

    example: Example
    read: Example
    p: float
    answered: bool
    right: bool  # answered, and a quote holds a key fact
    cited: bool


def outcomes(
    examples: Sequence[Example], sentences: Forest, answers: Forest, cite_t: float, refuse_t: float, gate: Forest | None = None
) -> list[Outcome]:
    """Each example answered from its likeliest reading, refused when P(right) (or, with `gate`, the gate's P of that
    reading: an answerability model) is under `refuse_t`, CITEd from `cite_t` on."""
    out = []
    for e in examples:
        read, composed, p = likeliest(e, sentences, answers)
        sure = p if gate is None else float(sigmoid(gate.predict(np.asarray([composed.row])))[0])
        answered = sure >= refuse_t and bool(composed.chosen)
        out.append(Outcome(e, read, p, answered, answered and composed.right, answered and p >= cite_t))
    return out


def judge(examples: Sequence[Example], sentences: Forest, answers: Forest, cite_t: float, refuse_t: float) -> dict[str, Any]:
    """Offline metrics of a fitted reader on `examples` (the benchmark's definitions)."""
    return metrics(outcomes(examples, sentences, answers, cite_t, refuse_t))


def metrics(outcomes_: Sequence[Outcome]) -> dict[str, Any]:
    """`judge`'s metrics of a reader's outcomes."""

    def kind(*kinds: str) -> list[Outcome]:
        return [o for o in outcomes_ if o.example.question.kind in kinds]

    answerable, followups, unanswerable = kind("answerable"), kind("followup"), kind("unanswerable")
    scored = kind("answerable", "followup", "unanswerable")
    cited = [o for o in scored if o.cited]
    # answerable questions whose expected page is among the chunks the answer reads
    found = sum(
        1 for o in answerable if set(o.example.question.expected_documents) & {s.chunk.document_id for s in o.read.evidence}
    )
    ratio = lambda a, b: round(a / b, 4) if b else None  # noqa: E731
    return {
        "n": len(scored),
        "coverage": ratio(sum(1 for o in answerable if o.cited and o.right), len(answerable)),
        "cite_precision": ratio(sum(1 for o in cited if o.right), len(cited)),
        "cited": len(cited),
        "unanswerable_cited": ratio(sum(1 for o in unanswerable if o.cited), len(unanswerable)),
        "unanswerable_refused": ratio(sum(1 for o in unanswerable if not o.answered), len(unanswerable)),
        "answered_and_right": ratio(sum(1 for o in answerable if o.right), len(answerable)),
        "followups_right": ratio(sum(1 for o in followups if o.right), len(followups)),
        "key_fact_packed": ratio(sum(1 for o in answerable if o.example.has_positive), len(answerable)),
        "hit_at_5": ratio(found, len(answerable)),  # bench/quality/metrics.py's hit@5, of the packed chunks
        "auroc": _round(auroc([o.p for o in scored], [o.right for o in scored])),
    }


def _round(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else round(value, 4)
