"""The trained reader (RAG_READER=trained): two models trained by `make train-reader` on labelled questions over
several documentation corpora (bench/reader), shipped in the package (reading/models/reader.npz) and evaluated
with numpy.

- The **chunk model** orders the chunks retrieval found (the pool, RAG_READER_POOL of them) and the answer reads the
  best top_k of them (reading.packing).
- The **sentence model** scores every candidate sentence of the evidence (features.SENTENCE_FEATURES); an
  extractive answer quotes the best ones.
- With the cross-encoder (reading.cross; RAG_READER_CROSS_CANDIDATES, extractive answers only), the quotes are the
  best MAX_QUOTES of the sentence model's top K by the z-sum of its score and the cross-encoder's.
- The **answer model** gives the probability that an answer is right from features.ANSWER_FEATURES of the answer:
  its leading sentence's score and features, how the other candidates score, how much of the question the
  evidence holds, the names and rare terms it lacks, and how sure the chunk model was of the chunks it packed
  (`features.Packing`, kept from `pack` for the `assess` and `judge` of the evidence it packed).
- The **extractive answer model** judges the answers it quotes itself with the cross-encoder (extractive, K > 0):
  ANSWER_FEATURES and the cross scores of its quotes and of the sentence model's top K
  (cross.CROSS_ANSWER_FEATURES), with its own levels. An LLM's answer, or an extractive one without the
  cross-encoder, is judged by the answer model.

The evidence answers the question when the best answer it holds is right with probability `refuse_below` or more
(else INSUFFICIENT_EVIDENCE); an answer is CITEd from `cite_threshold` on, chosen when training for 95% precision
on the training corpora. An LLM's answer is judged the same way: its sentences are scored as candidates would be.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ragsvc.domain import Chunk, ScoredChunk, TermCounts
from ragsvc.reading import Assessment, Judgement
from ragsvc.reading.chunks import candidates
from ragsvc.reading.cross import CROSS_ANSWER_FEATURES, CrossEncoder, cross_answer_features, reranked
from ragsvc.reading.features import (
    ANSWER_FEATURES,
    SENTENCE_FEATURES,
    Analysis,
    Packing,
    analyse,
    answer_features,
    counted_terms,
    sentence_features,
)
from ragsvc.reading.followups import FollowUpRules
from ragsvc.reading.forest import Forest
from ragsvc.reading.packing import CHUNK_FEATURES, as_read, chunk_features, pack
from ragsvc.reading.relevance import Candidate, quoted_answer
from ragsvc.reading.sentences import MARKER, sentences, without_markers

MAX_QUOTES = 3  # sentences an extractive answer quotes
_DUPLICATE_OVERLAP = 0.8  # share of the smaller passage's terms that makes two passages the same
MODEL_FILE = "reader.npz"
_RECENT = 64  # readings and packings kept (see TrainedReader.read, TrainedReader.pack)
_V = TypeVar("_V")


def choose(found: Sequence[Candidate], scores: Sequence[float], *, max_quotes: int = MAX_QUOTES) -> list[int]:
    """The candidates to quote (indices into `found`), best score first, near-duplicates (overlapping chunks repeat
    text) once."""
    order = sorted(range(len(found)), key=lambda i: (-scores[i], found[i].marker, found[i].position))
    chosen: list[int] = []
    for i in order:
        if any(near_duplicates(found[i], found[j]) for j in chosen):
            continue
        chosen.append(i)
        if len(chosen) == max_quotes:
            break
    return chosen


def rerank_quotes(
    found: Sequence[Candidate], scores: Sequence[float], search: str, cross: Callable[[str, Sequence[str]], np.ndarray], k: int
) -> tuple[list[int], dict[int, float], list[int]]:
    """(top, their cross scores, chosen): the sentence model's top `k` of `found` (`choose`), each scored against
    the search text by `cross` (a CrossEncoder's `score`, or a memo of it), and the MAX_QUOTES of them an extractive
    answer quotes, by the z-sum (`cross.reranked`): how the server re-ranks, and how training composes its answers."""
    top = choose(found, scores, max_quotes=k)
    by_candidate = dict(zip(top, cross(search, [found[i].quote for i in top]).tolist(), strict=True))
    return top, by_candidate, reranked(top, np.asarray(scores, dtype=np.float64), by_candidate, k, quotes=MAX_QUOTES)


def near_duplicates(a: Candidate, b: Candidate) -> bool:
    """True when most terms of the smaller passage also occur in the other."""
    return len(a.terms & b.terms) >= _DUPLICATE_OVERLAP * min(len(a.terms), len(b.terms))


@dataclass(frozen=True, slots=True, eq=False)
class Model:
    """A trained reader's weights and calibration, as `make train-reader` writes them."""

    chunks: Forest
    sentences: Forest
    answers: Forest
    cite_threshold: float  # P(right) from which an answer is CITEd
    refuse_below: float  # P(right) of the best answer under which the evidence does not answer
    extractive: Forest  # the answer model of answers quoted with the cross-encoder (+ CROSS_ANSWER_FEATURES)
    extractive_cite_threshold: float
    extractive_refuse_below: float
    meta: dict[str, Any]
    sha256: str = dataclasses.field(init=False)  # of its arrays (`_digest`), computed once: what identifies it

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha256", _digest(self.arrays()))

    @classmethod
    def load(cls, path: Path | None = None) -> Model:
        """The model at `path`, or the one shipped in the package."""
        source = path if path is not None else resources.files("ragsvc.reading").joinpath("models", MODEL_FILE)
        with source.open("rb") as handle, np.load(handle) as arrays:
            meta = json.loads(str(arrays["meta"]))
            features = (meta["sentence_features"], meta["answer_features"], meta.get("chunk_features"),
                        meta.get("cross_answer_features"))  # fmt: skip
            if tuple(map(tuple, features)) != (SENTENCE_FEATURES, ANSWER_FEATURES, CHUNK_FEATURES, CROSS_ANSWER_FEATURES):
                raise ValueError("trained on other features than this ragsvc computes (retrain: make train-reader)")
            return cls(
                chunks=Forest.from_arrays(arrays, "chunks"),
                sentences=Forest.from_arrays(arrays, "sentences"),
                answers=Forest.from_arrays(arrays, "answers"),
                cite_threshold=float(meta["cite_threshold"]),
                refuse_below=float(meta["refuse_below"]),
                extractive=Forest.from_arrays(arrays, "extractive"),
                extractive_cite_threshold=float(meta["extractive_cite_threshold"]),
                extractive_refuse_below=float(meta["extractive_refuse_below"]),
                meta=meta,
            )

    def arrays(self) -> dict[str, Any]:
        """The model as the named arrays of its .npz file."""
        meta = {**self.meta, "cite_threshold": self.cite_threshold, "refuse_below": self.refuse_below,
                "extractive_cite_threshold": self.extractive_cite_threshold,
                "extractive_refuse_below": self.extractive_refuse_below,
                "sentence_features": list(SENTENCE_FEATURES), "answer_features": list(ANSWER_FEATURES),
                "chunk_features": list(CHUNK_FEATURES), "cross_answer_features": list(CROSS_ANSWER_FEATURES)}  # fmt: skip
        forests = {**self.chunks.arrays("chunks"), **self.sentences.arrays("sentences"), **self.answers.arrays("answers"),
                   **self.extractive.arrays("extractive")}  # fmt: skip
        return {**forests, "meta": np.asarray(json.dumps(meta))}

    def levels(self, *, extractive: bool) -> tuple[float, float]:
        """(cite_threshold, refuse_below) of the answer model that judges an answer (`extractive`: one quoted with the
        cross-encoder)."""
        if extractive:
            return self.extractive_cite_threshold, self.extractive_refuse_below
        return self.cite_threshold, self.refuse_below

    def p_right(self, row: Sequence[float], *, extractive: bool = False) -> float:
        """P(right) of an answer's row: ANSWER_FEATURES, and with `extractive` CROSS_ANSWER_FEATURES after them."""
        forest = self.extractive if extractive else self.answers
        return 1.0 / (1.0 + math.exp(-float(forest.predict(np.asarray([row], dtype=np.float64))[0])))


def _digest(arrays: dict[str, Any]) -> str:
    """The SHA-256 of named arrays (a model's, as its .npz file holds them): each one's name, type, shape and bytes,
    by name. The same arrays give the same digest however the file was compressed."""
    sha = hashlib.sha256()
    for name in sorted(arrays):
        array = np.asarray(arrays[name])
        sha.update(json.dumps([name, array.dtype.str, array.shape]).encode())
        sha.update(array.tobytes())
    return sha.hexdigest()


@dataclass(frozen=True, slots=True)
class Read:
    """The evidence as read for one question: its candidate sentences, their rows and scores, the quotes chosen;
    with the cross-encoder, the sentence model's top K it chose them from and their cross scores."""

    found: tuple[Candidate, ...]
    rows: list[list[float]]
    scores: list[float]
    chosen: tuple[int, ...]
    top: tuple[int, ...] = ()
    cross: dict[int, float] = dataclasses.field(default_factory=dict)


class TrainedReader(FollowUpRules):
    def __init__(
        self, model: Model, *, rare_share: float, pool: int, cross: CrossEncoder | None = None, candidates: int = 0
    ) -> None:
        """`pool`: the chunks retrieval hands it to choose the evidence from (RAG_READER_POOL; 0: none, it reads
        retrieval's top_k in its order); `cross`, `candidates`: the quotes are re-ranked by `cross` among the
        sentence model's top `candidates` (RAG_READER_CROSS_CANDIDATES; without `cross` or at 0, its order)."""
        self._model = model
        self._rare_share = rare_share
        self._pool = pool
        self._cross = cross if candidates else None
        self._candidates = candidates if cross is not None else 0
        self._recent: OrderedDict[tuple[object, ...], Read] = OrderedDict()
        self._packings: OrderedDict[tuple[object, ...], Packing] = OrderedDict()

    @property
    def name(self) -> str:
        return "trained"

    @property
    def fingerprint(self) -> str:
        cross = f"{self._cross.sha256} candidates={self._candidates}" if self._cross is not None else "off"
        return f"trained model={self._model.sha256} pool={self._pool} rare_share={self._rare_share!r} cross={cross}"

    @property
    def model(self) -> Model:
        return self._model

    @property
    def cite_threshold(self) -> float | None:
        """The level of the answer model that judges this reader's answers: with the cross-encoder (extractive
        answers only) the extractive one's."""
        return self._model.levels(extractive=self._cross is not None)[0]

    @property
    def pool(self) -> int:
        return self._pool

    def counted_terms(self, search: str) -> list[str]:
        return counted_terms(search)

    def analyse(self, search: str, question: str, counts: TermCounts | None) -> Analysis:
        return analyse(search, question, counts, rare_share=self._rare_share)

    def pack(self, analysis: Analysis, evidence: Sequence[ScoredChunk], *, limit: int) -> tuple[ScoredChunk, ...]:
        """The `limit` chunks of `evidence` the chunk model ranks best, best first (without a pool, the first
        `limit`)."""
        if not self._pool:
            return tuple(evidence[:limit])
        found = tuple(candidates(evidence))
        packing = pack(self._model.chunks, chunk_features(found, sentence_features(analysis, found, evidence), evidence), limit)
        packed = tuple(evidence[i] for i in packing.places)
        _keep(self._packings, _key(analysis, packed), packing)  # how sure the chunk model was: P(right) reads it
        return packed

    def packing(self, analysis: Analysis, evidence: tuple[ScoredChunk, ...], read: Read) -> Packing:
        """How `evidence` was packed for this question from retrieval's pool (`pack`); evidence not packed here (a
        caller's selection, a model's budgeted context) is read in its own order, and kept: the assessment and
        the answer's judgement read the same evidence's packing."""
        key = _key(analysis, evidence)
        packing = self._packings.get(key)
        if packing is None:
            packing = as_read(self._model.chunks, chunk_features(read.found, read.rows, evidence))
            _keep(self._packings, key, packing)
        return packing

    def assess(self, analysis: Analysis, evidence: Sequence[ScoredChunk]) -> Assessment:
        read = self.read(analysis, tuple(evidence))
        lead = read.chosen[0] if read.chosen else -1
        packing = self.packing(analysis, tuple(evidence), read)
        row = answer_features(analysis, read.found, read.rows, read.scores, lead, evidence, packing, read.chosen)
        p = self._p_right(row, read, read.chosen)
        everywhere: set[str] = set()
        for candidate in read.found:
            everywhere |= candidate.terms | candidate.label | candidate.heading
        missing = tuple(
            dict.fromkeys(  # a name of two terms ("ZEBRA-4412") is named once
                analysis.surfaces[t]
                for t in analysis.terms
                if t in analysis.names and t not in everywhere and analysis.rare.get(t, False)
            )
        )
        refuse_below = self._model.levels(extractive=self._cross is not None)[1]
        return Assessment(answerable=bool(read.chosen) and p >= refuse_below, score=p, missing=missing)

    def quotes(self, analysis: Analysis, evidence: Sequence[ScoredChunk], *, limit: int) -> list[Candidate]:
        read = self.read(analysis, tuple(evidence))
        return [read.found[i] for i in read.chosen[:limit]]

    def judge(self, analysis: Analysis, answer: str, evidence: Sequence[ScoredChunk]) -> Judgement:
        """An extractive answer is judged by the quotes it is made of; a model's answer by its first sentence, read as
        a candidate of the chunk it cites first (with the cross-encoder, which only serves extractive answers, that
        sentence is scored by it too, as the extractive answer model reads every lead's cross score)."""
        read = self.read(analysis, tuple(evidence))
        chosen = [read.chosen[:n] for n in range(1, len(read.chosen) + 1)]
        quoted = next((c for c in chosen if quoted_answer([read.found[i] for i in c]) == answer.strip()), ())
        found, rows, scores = list(read.found), list(read.rows), list(read.scores)
        lead = quoted[0] if quoted else -1
        first = next((s for s in sentences(answer) if without_markers(s).strip()), "")
        if lead < 0 and first:
            own = _as_candidate(" ".join(without_markers(first).split()), _first_marker(first, len(evidence)), evidence)
            if own is not None:
                found.append(own)
                rows += sentence_features(analysis, [*read.found, own], evidence, rows_of=slice(-1, None))
                scores.append(float(self._model.sentences.predict(np.asarray([rows[-1]], dtype=np.float64))[0]))
                lead = len(found) - 1
                if self._cross is not None:
                    cross = {**read.cross, lead: float(self._cross.score(analysis.search, [own.quote])[0])}
                    read = dataclasses.replace(read, cross=cross)
        packing = self.packing(analysis, tuple(evidence), read)
        row = answer_features(analysis, found, rows, scores, lead, evidence, packing, quoted)
        p = self._p_right(row, read, quoted if quoted or lead < 0 else (lead,), scores)
        return Judgement(support=_share(scores, lead), p_right=p)

    def _p_right(self, row: list[float], read: Read, chosen: Sequence[int], scores: Sequence[float] | None = None) -> float:
        """P(right) of an answer quoting `chosen` (lead first) with ANSWER_FEATURES `row`: by the extractive answer
        model with the cross columns when this reader re-ranks with the cross-encoder, else by the answer model."""
        if self._cross is None:
            return self._model.p_right(row)
        lexical = np.asarray(read.scores if scores is None else scores, dtype=np.float64)
        return self._model.p_right([*row, *cross_answer_features(chosen, read.top, lexical, read.cross)], extractive=True)

    def read(self, analysis: Analysis, evidence: tuple[ScoredChunk, ...]) -> Read:
        """The evidence read for the question: kept for the next few calls, since the read stage, the extractive
        generator and validation read the same evidence for one question."""
        key = _key(analysis, evidence)
        read = self._recent.get(key)
        if read is None:
            found = tuple(candidates(evidence))
            rows = sentence_features(analysis, found, evidence)
            matrix = np.asarray(rows, dtype=np.float64).reshape(len(found), len(SENTENCE_FEATURES))
            scores = self._model.sentences.predict(matrix).tolist()
            read = self._chosen(analysis, Read(found, rows, scores, ()))
            _keep(self._recent, key, read)
        return read

    def _chosen(self, analysis: Analysis, read: Read) -> Read:
        """`read` with its quotes: the sentence model's best, or with the cross-encoder the best of its top K by the
        z-sum (and that top K with its cross scores)."""
        if self._cross is None:
            return dataclasses.replace(read, chosen=tuple(choose(read.found, read.scores)))
        top, cross, chosen = rerank_quotes(read.found, read.scores, analysis.search, self._cross.score, self._candidates)
        return dataclasses.replace(read, chosen=tuple(chosen), top=tuple(top), cross=cross)


def _key(analysis: Analysis, evidence: tuple[ScoredChunk, ...]) -> tuple[object, ...]:
    """What a reading or a packing of `evidence` is kept under: the question as analysed, and the evidence."""
    return (analysis.search, analysis.question, tuple(analysis.weights.items()), evidence)


def _keep(recent: OrderedDict[tuple[object, ...], _V], key: tuple[object, ...], value: _V) -> None:
    """`value` kept under `key` among the _RECENT latest."""
    recent[key] = value
    while len(recent) > _RECENT:
        recent.popitem(last=False)


def _share(scores: Sequence[float], lead: int) -> float:
    """The lead's softmax share among the candidates' scores (0 without a lead)."""
    if lead < 0 or not scores:
        return 0.0
    peak = max(scores)
    return math.exp(scores[lead] - peak) / sum(math.exp(s - peak) for s in scores)


def _first_marker(sentence: str, size: int) -> int:
    digits = [int(n) for n in MARKER.findall(sentence)]
    return next((n for n in digits if 1 <= n <= size), 1)


def _as_candidate(text: str, marker: int, evidence: Sequence[ScoredChunk]) -> Candidate | None:
    """A sentence of a model's answer as a candidate of the chunk it cites (its headings, its score)."""
    if not evidence:
        return None
    cited = evidence[marker - 1]
    chunk = Chunk(cited.chunk.document_id, cited.chunk.chunk_index, text, page_title=cited.chunk.page_title,
                  section=cited.chunk.section)  # fmt: skip
    own = next(candidates([ScoredChunk(chunk, cited.score)]), None)
    return None if own is None else dataclasses.replace(own, marker=marker, scope=(marker, -1, -1))
