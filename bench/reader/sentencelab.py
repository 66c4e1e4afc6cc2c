"""EXPERIMENT: which candidate sentence holds the key fact, screened leaving each corpus out (top-3).

    python -m bench.reader.sentencelab --seed N [--out F.json] ARM ...

For each corpus left out, as bench/reader/train.py composes answers: the training corpora's examples read the chunks
packed by chunk models fitted without them, the corpus left out those packed by the chunk model fitted on every
training corpus; one sentence model is fitted on the training corpora and judged on the corpus left out by top-3
(the share of the questions whose packed evidence holds a key fact in which one of the three quotes holds it).
An arm adds sentence columns; a column learned from labels (the word-association table) is fitted fold-respecting:
a training corpus's rows read a table fitted on the other training corpora, the corpus left out one fitted on
every training corpus.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pickle
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.quality import corpus, datasets
from bench.reader import dataset, evidence, fit, train
from bench.reader.dataset import Example
from ragsvc.reading import features
from ragsvc.reading.text import STOPWORDS, stem

_TOKEN = re.compile(r"[a-z0-9]+")
ANY = "<any>"  # a question token every question holds: the table's row of what answer sentences hold whatever asked


def q_tokens(question: str) -> list[str]:
    return [ANY, *dict.fromkeys(stem(t) for t in _TOKEN.findall(question.lower()))]


def s_tokens(text: str) -> list[str]:
    return list(dict.fromkeys(stem(t) for t in _TOKEN.findall(text.lower())))


class Assoc:
    """Word associations between question tokens and answer-sentence tokens, counted per corpus once (on every
    chunk retrieved, so independent of the fold's packing) and combined for any set of corpora."""

    def __init__(
        self, pools: dict[str, list[Example]], *, min_corpora: int = 3, vs: int = 4000, asking_only: bool = False
    ) -> None:
        q_corpora: dict[str, set[str]] = {}
        s_corpora: dict[str, set[str]] = {}
        s_count: dict[str, int] = {}
        for name, group in pools.items():
            for e in group:
                for t in q_tokens(e.question.question):
                    q_corpora.setdefault(t, set()).add(name)
                for c in e.found:
                    for t in s_tokens(c.quote):
                        s_corpora.setdefault(t, set()).add(name)
                        s_count[t] = s_count.get(t, 0) + 1
        asking = {ANY, *(stem(w) for w in STOPWORDS)}  # how a question asks, not what about
        kept = (t for t, c in q_corpora.items() if len(c) >= min_corpora and (t in asking or not asking_only))
        self.qv = {t: i for i, t in enumerate(sorted(kept))}
        common = sorted((t for t, c in s_corpora.items() if len(c) >= min_corpora), key=lambda t: (-s_count[t], t))[:vs]
        self.sv = {t: i for i, t in enumerate(common)}
        self._s_cache: dict[str, list[int]] = {}
        self.min_corpora = min_corpora
        shape = (len(self.qv), len(self.sv))
        self.stats: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for name, group in pools.items():
            pos = np.zeros(shape, np.float32)
            base = np.zeros(shape, np.float32)
            seen = np.zeros(shape, np.float32)
            for e in group:
                for o in e.options:
                    if not o.has_positive or len(o.found) < 2:
                        continue
                    qi = self.q_index(o.question.question)
                    m = self.s_matrix(o)
                    lab = o.labels.astype(bool)
                    p = m[lab].mean(axis=0)
                    b = m.mean(axis=0)
                    pos[qi] += p
                    base[qi] += b
                    seen[qi] += (b > 0).astype(np.float32)
            self.stats[name] = (pos, base, seen)
        print(f"assoc: {shape[0]} question tokens x {shape[1]} sentence tokens", flush=True)

    def q_index(self, question: str) -> np.ndarray:
        return np.asarray([self.qv[t] for t in q_tokens(question) if t in self.qv], dtype=np.int64)

    def s_index(self, text: str) -> list[int]:
        found = self._s_cache.get(text)
        if found is None:
            found = [j for j in (self.sv.get(t) for t in s_tokens(text)) if j is not None]
            self._s_cache[text] = found
        return found

    def s_matrix(self, e: Example) -> np.ndarray:
        m = np.zeros((len(e.found), len(self.sv)), np.float32)
        for row, c in enumerate(e.found):
            m[row, self.s_index(c.quote)] = 1.0
        return m

    def table(self, corpora: Sequence[str], *, alpha: float = 1.0, min_seen: float = 10.0) -> np.ndarray:
        pos = sum(self.stats[n][0] for n in corpora)
        base = sum(self.stats[n][1] for n in corpora)
        seen = sum(self.stats[n][2] for n in corpora)
        support = sum((self.stats[n][2] >= 2).astype(np.float32) for n in corpora)
        lift = np.log((pos + alpha) / (base + alpha))
        lift[(seen < min_seen) | (support < self.min_corpora)] = 0.0
        return lift.astype(np.float64)

    def columns(self, e: Example, table: np.ndarray) -> np.ndarray:
        """Per candidate: the mean over the question's tokens of the summed lift of the sentence's tokens other than
        the question's own, the question-independent lift alone (the ANY row), and the best single pair's lift."""
        qi = self.q_index(e.question.question)
        own = {self.sv[t] for t in q_tokens(e.question.question) if t in self.sv}
        any_row = table[self.qv[ANY]] if ANY in self.qv else np.zeros(len(self.sv))
        asked = [i for i in qi.tolist() if i != self.qv.get(ANY)]
        sub = table[asked] if asked else np.zeros((1, len(self.sv)))
        vec = sub.mean(axis=0)
        out = np.zeros((len(e.found), 3))
        for row, c in enumerate(e.found):
            idx = self.s_index(c.quote)
            other = [j for j in idx if j not in own]
            out[row, 0] = float(vec[other].sum()) if other else 0.0
            out[row, 1] = float(any_row[idx].sum()) if idx else 0.0
            out[row, 2] = float(sub[:, other].max()) if other else 0.0
        return out


_COV = features.SENTENCE_FEATURES.index("cov_sentence")
SHAPE = ("prev_cov", "next_cov", "offset_from_best", "chunk_cov_rank", "is_question", "prev_is_question")


def shape_columns(e: Example) -> np.ndarray:
    """Per candidate: where it sits against the passages of its chunk that hold the question's words (the coverage
    of the passage before and after it, its signed distance from its chunk's best-covering passage, its coverage's
    rank in its chunk), and whether it, or the passage before it, asks a question (a FAQ's answer follows the
    question it restates)."""
    cov = e.rows[:, _COV]
    at = {(c.marker, c.position): i for i, c in enumerate(e.found)}
    best: dict[int, int] = {}
    for i, c in enumerate(e.found):
        if c.marker not in best or cov[i] > cov[best[c.marker]]:
            best[c.marker] = i
    asks = [c.text.rstrip().endswith("?") for c in e.found]
    out = np.zeros((len(e.found), len(SHAPE)))
    for i, c in enumerate(e.found):
        prev, nxt = at.get((c.marker, c.position - 1)), at.get((c.marker, c.position + 1))
        out[i, 0] = cov[prev] if prev is not None else -1.0
        out[i, 1] = cov[nxt] if nxt is not None else -1.0
        out[i, 2] = float(max(-4, min(4, c.position - e.found[best[c.marker]].position)))
        out[i, 3] = float(sum(1 for j, o in enumerate(e.found) if o.marker == c.marker and cov[j] > cov[i]))
        out[i, 4] = 1.0 if asks[i] else 0.0
        out[i, 5] = 1.0 if prev is not None and asks[prev] else 0.0
    return out


def novelty_columns(e: Example) -> np.ndarray:
    """Per candidate: how much it says beyond the question (the log count and the share of its terms the question
    does not hold, the same beyond its heading and label too)."""
    asked = set(e.analysis.terms)
    out = np.zeros((len(e.found), 3))
    for i, c in enumerate(e.found):
        new = c.terms - asked
        out[i, 0] = float(np.log1p(len(new)))
        out[i, 1] = len(new) / len(c.terms) if c.terms else 0.0
        out[i, 2] = float(np.log1p(len(new - c.heading - c.label)))
    return out


def with_columns(e: Example, extra: Callable[[Example], np.ndarray]) -> Example:
    def one(o: Example) -> Example:
        cols = extra(o) if len(o.found) else np.zeros((0, 0))
        rows = np.hstack([o.rows, cols]) if len(o.found) else o.rows
        return dataclasses.replace(o, rows=rows, alternatives=())

    first = one(e)
    return dataclasses.replace(first, alternatives=tuple(one(a) for a in e.alternatives))


def examples(name: str) -> list[Example]:
    """The corpus's examples over every chunk retrieved, read from the newest cached evidence (.bench/reader): the
    cache's key names the index directory it was retrieved from, which this screen does not rebuild."""
    newest = max(train.CACHE.glob(f"evidence-{name}-*.jsonl"), key=lambda p: p.stat().st_mtime)
    found = evidence.load(newest)
    return [dataset.example(name, q, found[q.id], packed=None) for q in datasets.questions(name)]


class _Unpickler(pickle.Unpickler):
    """Finds this module's classes pickled when it ran as __main__."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(__name__ if module == "__main__" else module, name)


def prepared(seed: int, names: Sequence[str]) -> Prepared:
    """`Prepared` from /tmp/sentence4 when this seed's is there (packing is the costly part)."""
    path = Path(f"/tmp/sentence4/prep-{seed}.pkl")
    if path.exists():
        with path.open("rb") as handle:
            loaded: Prepared = _Unpickler(handle).load()
        return loaded
    prep = Prepared(seed, names)
    path.parent.mkdir(exist_ok=True)
    with path.open("wb") as handle:
        pickle.dump(prep, handle)
    return prep


class Prepared:
    """Per fold: each training corpus's examples as packed for the training, and the corpus left out's."""

    def __init__(self, seed: int, names: Sequence[str]) -> None:
        self.seed = seed
        self.names = list(names)
        self.pools = {name: examples(name) for name in names}
        chunk_models = train.ChunkModels(self.pools, seed=seed)
        self.folds: dict[str, tuple[dict[str, list[Example]], list[Example]]] = {}
        for left_out in names:
            kept = frozenset(n for n in names if n != left_out)
            packed = {n: [fit.packed(e, chunk_models.fitted(kept - {n})) for e in self.pools[n]] for n in sorted(kept)}
            unseen = [fit.packed(e, chunk_models.fitted(kept)) for e in self.pools[left_out]]
            self.folds[left_out] = (packed, unseen)
            print(f"packed {left_out}", flush=True)


def _both(assoc: Assoc, e: Example, table: np.ndarray, shaped: bool) -> np.ndarray:
    cols = assoc.columns(e, table)
    return np.hstack([shape_columns(e), cols]) if shaped else cols


def run_arm(prep: Prepared, arm: str, assoc: Assoc | None) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for left_out, (packed, unseen) in prep.folds.items():
        kept = list(packed)
        if arm == "base":
            training = [e for n in kept for e in packed[n]]
            judged = unseen
        elif arm == "novelty":
            training = [with_columns(e, novelty_columns) for n in kept for e in packed[n]]
            judged = [with_columns(e, novelty_columns) for e in unseen]
        elif arm == "shape":
            training = [with_columns(e, shape_columns) for n in kept for e in packed[n]]
            judged = [with_columns(e, shape_columns) for e in unseen]
        else:
            assert assoc is not None
            nested = arm != "assoc-flat"
            shaped = arm == "shape+assoc"
            full = assoc.table(kept)
            training = []
            for n in kept:
                table = assoc.table([k for k in kept if k != n]) if nested else full
                training += [with_columns(e, functools.partial(_both, assoc, table=table, shaped=shaped)) for e in packed[n]]
            judged = [with_columns(e, functools.partial(_both, assoc, table=full, shaped=shaped)) for e in unseen]
        model = fit.fit_sentences(training, seed=prep.seed)
        out[left_out] = fit.top3(judged, model)
        print(f"{arm} seed {prep.seed} without {left_out}: top-3 {out[left_out]}", flush=True)
    values = [v for v in out.values() if v is not None]
    out["mean"] = round(float(np.mean(values)), 4)
    print(f"{arm} seed {prep.seed}: mean top-3 {out['mean']}", flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=fit.SEED)
    parser.add_argument("--out")
    parser.add_argument("--asking-only", action="store_true", help="the table's question tokens: stopwords only")
    parser.add_argument("arms", nargs="+", choices=("base", "assoc", "assoc-flat", "shape", "shape+assoc", "novelty"))
    args = parser.parse_args(argv)
    prep = prepared(args.seed, list(corpus.CORPORA))
    assoc = Assoc(prep.pools, asking_only=args.asking_only) if any("assoc" in a for a in args.arms) else None
    report: dict[str, Any] = {"seed": args.seed, "arms": {}}
    for arm in args.arms:
        report["arms"][arm] = run_arm(prep, arm, assoc)
        if args.out:
            with open(args.out, "w") as handle:
                json.dump(report, handle, indent=1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
