"""EXPERIMENT, not served: a semantic similarity between the question and each candidate sentence as extra reader
features, to measure whether meaning (the bundled MiniLM's vectors) helps the trained reader on corpora it never saw.

    python -m bench.reader.semantic --train standalone|pooled   # the reader's offline metrics (train.py's, no model written)
    python -m bench.reader.semantic                              # the sentence model's picks alone

Each candidate's row gets SENTENCE_COLUMNS after features.SENTENCE_FEATURES; fit.compose gives the answer row
ANSWER_COLUMNS after features.ANSWER_FEATURES (`fit.extra_answer_columns`). The query vector is the search text's (a follow-up's
rewritten search, without instructions to a model), embedded as retrieval embeds a query (MiniLMEmbedder, fp32
compute). A sentence's vector is made one of two ways:

- **standalone**: the candidate's text embedded alone (one forward pass per sentence: what serving could not afford);
- **pooled**: one forward pass over the chunk's passages (passages.passages, labels included, joined by newlines,
  the text the reader quotes from, about as long as the chunk), then the model's token outputs mean-pooled over each
  passage's character span: what ingest could compute with one pass per chunk (its own chunk vector's pass, were it
  run on this text) and store per sentence. A chunk longer than the model's 256 tokens is run in windows of whole
  passages.

Vectors are cached on disk by text hash (.bench/semantic/), so a rerun computes none and reads the same numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from bench.quality import corpus
from bench.reader import fit, train
from bench.reader.dataset import Example
from ragsvc.reading.forest import Forest
from ragsvc.reading.passages import passages
from ragsvc.reading.trained import choose
from ragsvc.retrieval.embedders import MAX_TOKENS, MiniLMEmbedder

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".bench" / "semantic"
MODES = ("standalone", "pooled")
MAX_POSITIONS = 512  # the model's position embeddings: a single passage longer than a window is cut there
SENTENCE_COLUMNS = (
    "sim_sentence",  # cosine of the question's vector and the sentence's
    "sim_gap",  # the best candidate's sim_sentence minus this one's
    "sim_rank",  # log1p of its place among the candidates by sim_sentence (0 best)
)
ANSWER_COLUMNS = (  # what fit.extra_answer_columns makes of SENTENCE_COLUMNS
    "lead_sim",  # the lead sentence's sim_sentence
    "best_sim",  # the best candidate's
    "lead_sim_gap",  # best_sim minus lead_sim
)


class Vectors:
    """Unit vectors of texts, cached on disk by hash (one .npz per kind): a text's, one row; a chunk's passages', a
    row per passage."""

    def __init__(self, cache: Path = CACHE) -> None:
        self._cache = cache
        self._stores: dict[str, dict[str, np.ndarray]] = {}
        self._dirty: set[str] = set()
        self._embedder: MiniLMEmbedder | None = None
        self._tokenizer: Tokenizer | None = None

    def _store(self, kind: str) -> dict[str, np.ndarray]:
        if kind not in self._stores:
            path = self._cache / f"{kind}.npz"
            store: dict[str, np.ndarray] = {}
            if path.exists():
                with np.load(path) as data:
                    split = np.split(data["vectors"], np.cumsum(data["counts"])[:-1])
                    store = dict(zip(data["keys"].tolist(), split, strict=True))
            self._stores[kind] = store
        return self._stores[kind]

    def save(self) -> None:
        self._cache.mkdir(parents=True, exist_ok=True)
        for kind in sorted(self._dirty):
            store = self._stores[kind]
            keys = np.asarray(list(store), dtype=str)
            counts = np.asarray([len(v) for v in store.values()], dtype=np.int64)
            vectors = np.vstack(list(store.values())).astype(np.float32) if store else np.zeros((0, 384), np.float32)
            np.savez(self._cache / f"{kind}.npz", keys=keys, counts=counts, vectors=vectors)
        self._dirty.clear()

    @property
    def embedder(self) -> MiniLMEmbedder:
        if self._embedder is None:
            self._embedder = MiniLMEmbedder.load(threads=1)
        return self._embedder

    def text(self, kind: str, text: str) -> np.ndarray:
        """`text` embedded alone, as MiniLMEmbedder embeds a query or a chunk."""
        store = self._store(kind)
        key = _digest(text)
        if key not in store:
            store[key] = self.embedder._embed_one(text).astype(np.float32)[None, :]
            self._dirty.add(kind)
        return store[key][0]

    def pooled(self, chunk_text: str) -> np.ndarray:
        """One unit vector per passage of `chunk_text` (passages.passages order), pooled from the chunk's pass."""
        store = self._store("pooled")
        key = _digest(chunk_text)
        if key not in store:
            store[key] = self._pool(chunk_text).astype(np.float32)
            self._dirty.add("pooled")
        return store[key]

    def _pool(self, chunk_text: str) -> np.ndarray:
        found = [p.text for p in passages(chunk_text)]
        if not found:
            return np.zeros((0, 384), np.float32)
        if self._tokenizer is None:  # the embedder's tokenizer, without truncation: windows are cut by passage
            self._tokenizer = Tokenizer.from_str(resources.files("ragsvc").joinpath("data", "tokenizer.json").read_text())
            self._tokenizer.no_truncation()
            self._tokenizer.no_padding()
        lengths = [len(self._tokenizer.encode(t, add_special_tokens=False).ids) for t in found]
        out = np.zeros((len(found), 384), np.float32)
        for window in _windows(lengths, MAX_TOKENS - 2):
            joined, spans, at = [], [], 0
            for i in window:
                spans.append((at, at + len(found[i])))
                joined.append(found[i])
                at += len(found[i]) + 1
            encoding = self._tokenizer.encode("\n".join(joined))
            ids = np.asarray([encoding.ids[:MAX_POSITIONS]], dtype=np.int64)
            hidden = self._hidden(ids)
            offsets = encoding.offsets[: ids.shape[1]]
            special = encoding.special_tokens_mask[: ids.shape[1]]
            for i, (start, end) in zip(window, spans, strict=True):
                inside = [t for t, (a, b) in enumerate(offsets) if not special[t] and a < end and b > start]
                if inside:
                    pooled = hidden[inside].mean(axis=0)
                    out[i] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return out

    def _hidden(self, ids: np.ndarray) -> np.ndarray:
        embedder = self.embedder
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        names = embedder._input_names
        (hidden,) = embedder._session.run([embedder._output_name], {k: v for k, v in feeds.items() if k in names})
        result: np.ndarray = hidden[0]
        return result


def _windows(lengths: Sequence[int], budget: int) -> Iterable[list[int]]:
    """Consecutive passages packed greedily into windows of at most `budget` tokens (a longer passage alone)."""
    window: list[int] = []
    used = 0
    for i, n in enumerate(lengths):
        if window and used + n + 1 > budget:
            yield window
            window, used = [], 0
        window.append(i)
        used += n + 1
    if window:
        yield window


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def sims(example: Example, mode: str, vectors: Vectors) -> np.ndarray:
    """Cosine of the search's vector and each candidate's."""
    if not example.found:
        return np.zeros(0)
    query = vectors.text("query", example.analysis.search)
    if mode == "standalone":
        matrix = np.vstack([vectors.text("sentence", c.text) for c in example.found])
    else:
        matrix = np.vstack([vectors.pooled(example.evidence[c.marker - 1].chunk.text)[c.position] for c in example.found])
    result: np.ndarray = matrix @ query
    return result


def sentence_columns(sim: np.ndarray) -> np.ndarray:
    """SENTENCE_COLUMNS of every candidate, from their similarities."""
    if sim.size == 0:
        return np.zeros((0, len(SENTENCE_COLUMNS)))
    order = np.argsort(-sim, kind="stable")
    rank = np.empty(len(sim))
    rank[order] = np.arange(len(sim))
    return np.column_stack([sim, sim.max() - sim, np.log1p(rank)])


def extended(by_corpus: dict[str, list[Example]], mode: str) -> dict[str, list[Example]]:
    """The examples with SENTENCE_COLUMNS after their rows."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: {MODES}")
    vectors = Vectors(CACHE / mode)  # one directory per mode: runs of both modes may go side by side
    result: dict[str, list[Example]] = {}
    try:
        for name, group in by_corpus.items():
            result[name] = [
                dataclasses.replace(e, rows=np.hstack([e.rows, sentence_columns(sims(e, mode, vectors))])) for e in group
            ]
            print(f"semantic {mode}: {name} embedded", flush=True)
    finally:
        vectors.save()
    return result


def picked(examples: Sequence[Example], sentences: Forest, quotes: int) -> float:
    """Share of the examples whose packed evidence holds a key fact in which one of the first `quotes` chosen holds
    it."""
    held = [e for e in examples if e.has_positive]
    right = sum(1 for e in held if e.labels[choose(e.found, sentences.predict(e.rows).tolist())[:quotes]].any())
    return right / len(held)


def main(argv: Sequence[str] | None = None) -> None:
    """With --train MODE, train.py's offline leave-one-out metrics with MODE's columns, reading retrieval's first
    five chunks (no model written). Otherwise, per corpus left out, how often the sentence model fitted on the others
    quotes a key fact first (top-1) and in its three quotes (top-3), without and with the columns of each mode (seed
    fit.SEED)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", choices=MODES, help="the reader's offline metrics with this mode's columns")
    parser.add_argument("--seed", type=int, default=fit.SEED)
    args = parser.parse_args(argv)
    if args.train:
        by_corpus = extended({name: train.examples(name) for name in corpus.CORPORA}, args.train)
        train.run(by_corpus, seed=args.seed, write=False, retrieval_order=True)
        return
    base = {name: train.examples(name) for name in corpus.CORPORA}
    runs = {"baseline": base, **{mode: extended(base, mode) for mode in MODES}}
    for left_out in corpus.CORPORA:
        cells = []
        for label, by_corpus in runs.items():
            model = fit.fit_sentences([e for name, group in by_corpus.items() if name != left_out for e in group], seed=args.seed)
            cells.append(f"{label} {picked(by_corpus[left_out], model, 1):.3f}/{picked(by_corpus[left_out], model, 3):.3f}")
        print(f"{left_out}: top-1/top-3 " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
