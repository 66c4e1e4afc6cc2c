"""The cross-encoder that re-ranks an extractive answer's quotes (RAG_READER_CROSS_CANDIDATES,
RAG_READER_CROSS_MODEL): six MiniLM layers fine-tuned on (question, sentence) pairs of the benchmark's corpora
(bench/reader/cross_train.py), int8 ONNX, shipped in the package (reading/models/cross.onnx) and run with
onnxruntime on one thread.

The trained reader quotes the best MAX_QUOTES of the sentence model's top K by the z-sum of the two scores
(`reranked`): on each corpus unseen, answered-and-right +3.5/+3.8 points over the sentence model's order
(docs/reading.md, "A cross-encoder re-ranks the quotes"). Only extractive answers are re-ranked: an LLM's
answer is never waited on for it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ragsvc.reading.features import SENTENCE_FEATURES
from ragsvc.reading.forest import Forest

__all__ = [
    "CROSS_ANSWER_FEATURES",
    "MODEL_FILE",
    "RANKER_FEATURES",
    "CrossEncoder",
    "cross_answer_features",
    "learned",
    "pair_tokenizer",
    "ranker_rows",
    "reranked",
    "shipped_path",
]

MODEL_FILE = "cross.onnx"


def shipped_path() -> Path:
    """The cross-encoder shipped in the package."""
    return Path(str(resources.files("ragsvc.reading").joinpath("models", MODEL_FILE)))


def pair_tokenizer(max_tokens: int) -> Any:
    """The tokenizer shipped in ragsvc/data (MiniLM's word pieces), encoding "[CLS] question [SEP] passage [SEP]"
    cut to `max_tokens` (the longer of the two is shortened first), padded to the longest pair of a batch (not
    tokenizer.json's fixed padding): how the cross-encoder reads a pair, in training and here."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(resources.files("ragsvc").joinpath("data", "tokenizer.json").read_text())
    tokenizer.enable_truncation(max_tokens, strategy="longest_first")
    tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
    return tokenizer


class CrossEncoder:
    """Scores (question, sentence) pairs: a logit each, comparable across questions. The session is made at first
    use, once (one thread: the cores are shared). Each pair runs alone: the int8 model quantizes its activations
    with one scale per run, so a pair batched with others would score differently."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else shipped_path()
        self.sha256 = hashlib.sha256(self.path.read_bytes()).hexdigest()
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any, dict[str, str]] | None = None

    @property
    def meta(self) -> dict[str, str]:
        """The model file's metadata: max_tokens, and its training run (`training`, JSON: the corpora, the seed)."""
        return self._load()[2]

    @property
    def corpora(self) -> list[str]:
        """The corpora the model was trained on, as its file records them."""
        return list(json.loads(self.meta["training"])["corpora"])

    def _load(self) -> tuple[Any, Any, dict[str, str]]:
        with self._lock:
            if self._loaded is None:
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.intra_op_num_threads = 1
                options.inter_op_num_threads = 1
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # the cores are shared
                session = ort.InferenceSession(self.path.read_bytes(), options, providers=["CPUExecutionProvider"])
                meta = dict(session.get_modelmeta().custom_metadata_map)
                self._loaded = (session, pair_tokenizer(int(meta["max_tokens"])), meta)
            return self._loaded

    def score(self, question: str, passages: Sequence[str]) -> np.ndarray:
        """The logit of each (question, passage) pair."""
        session, tokenizer, _ = self._load()
        out = np.zeros(len(passages), dtype=np.float64)
        for i, passage in enumerate(passages):
            e = tokenizer.encode(question, passage)
            feeds = {
                name: np.asarray([values], dtype=np.int64)
                for name, values in (("input_ids", e.ids), ("attention_mask", e.attention_mask), ("token_type_ids", e.type_ids))
            }
            (logits,) = session.run(None, feeds)
            out[i] = float(np.asarray(logits).reshape(-1)[0])
        return out


def _z_scores(values: np.ndarray) -> np.ndarray:
    """`values` as z-scores among a question's top K (the sentence model's and the cross scores on one scale)."""
    return np.asarray((values - values.mean()) / (values.std() + 1e-9), dtype=np.float64)


def reranked(top: Sequence[int], lexical: np.ndarray, cross: Mapping[int, float], k: int, *, quotes: int) -> list[int]:
    """The first `quotes` of the sentence model's top `k` (`top`: candidate indices, its order) in the order of the
    z-sum of its scores (`lexical`, by candidate) and the cross scores (`cross`, by candidate); ties keep its order."""
    head = list(top[:k])
    if len(head) < 2:
        return head[:quotes]
    z = _z_sum(head, lexical, cross)
    order = sorted(range(len(head)), key=lambda j: (-z[j], j))
    return [head[j] for j in order][:quotes]


def _z_sum(among: Sequence[int], lexical: np.ndarray, cross: Mapping[int, float]) -> np.ndarray:
    """Each candidate of `among`: the z-score of its sentence-model score plus that of its cross score, both among
    `among`."""
    return np.asarray(
        _z_scores(lexical[list(among)]) + _z_scores(np.asarray([cross[i] for i in among], dtype=np.float64)), dtype=np.float64
    )


# The columns an extractive answer re-ranked with the cross-encoder adds to features.ANSWER_FEATURES for its own
# answer model (trained.Model.extractive): the lead's cross score, the best of its quotes', the best of the sentence
# model's top 3 and top 6, the lead's gap to those, and the lead's z-sum of sentence and cross score in the top 3.
# Screened by bench/reader/crosslab.py (arm rerank6): AUROC +0.022/+0.026 over the answer model without them.
CROSS_ANSWER_FEATURES = ("x_lead", "x_quoted_max", "x_top3_max", "x_top6_max", "x_lead_gap3", "x_lead_gap6", "x_lead_zsum3")
NO_LEAD = -10.0  # every column of an answer without a lead


def cross_answer_features(
    chosen: Sequence[int], top: Sequence[int], lexical: np.ndarray, cross: Mapping[int, float]
) -> list[float]:
    """CROSS_ANSWER_FEATURES of an answer quoting `chosen` (lead first) among the sentence model's `top` (candidate
    indices, its order), with its scores (`lexical`, by candidate) and the cross scores of `top` (`cross`)."""
    if not chosen:
        return [NO_LEAD] * len(CROSS_ANSWER_FEATURES)
    lead = chosen[0]
    best3, best6 = (max(cross[i] for i in top[:k]) for k in (3, 6))
    three = list(top[:3])
    zsum3 = NO_LEAD
    if lead in three:
        zsum3 = float(_z_sum(three, lexical, cross)[three.index(lead)])
    quoted = max(cross[i] for i in chosen)
    return [cross[lead], quoted, best3, best6, cross[lead] - best3, cross[lead] - best6, zsum3]


# A learned second stage (bench/reader/crosslab.py, variants l6 and l10): a LambdaRank forest over each of the
# sentence model's top K candidates orders them instead of the fixed z-sum. Its columns: the sentence model's score,
# its rank (0 best), z-score and gap to the best among the K; the same of the cross score and of their z-sum; K; then
# the candidate's SENTENCE_FEATURES row (what the sentence model reads, its chunk's place in the evidence among them).
RANKER_FEATURES = (
    *(f"r_{what}_{m}" for what in ("s", "x", "zsum") for m in ("score", "rank", "z", "gap")),
    "r_k",
    *(f"r_row_{name}" for name in SENTENCE_FEATURES),
)


def _ranks(values: np.ndarray) -> np.ndarray:
    """Each value's rank among `values`, 0 the highest, ties in their order."""
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[np.argsort(-values, kind="stable")] = np.arange(len(values), dtype=np.float64)
    return ranks


def ranker_rows(head: Sequence[int], lexical: np.ndarray, cross: Mapping[int, float], rows: np.ndarray) -> np.ndarray:
    """RANKER_FEATURES of each candidate of `head` (the sentence model's top K, its order), from the sentence
    model's scores (`lexical`, by candidate), the cross scores (`cross`) and the SENTENCE_FEATURES rows (`rows`)."""
    among = list(head)
    s = np.asarray(lexical[among], dtype=np.float64)
    x = np.asarray([cross[i] for i in among], dtype=np.float64)
    zs, zx = _z_scores(s), _z_scores(x)
    columns = []
    for values in (s, x, zs + zx):
        columns += [values, _ranks(values), _z_scores(values), values - values.max()]
    columns.append(np.full(len(among), float(len(among))))
    return np.column_stack([*columns, np.asarray(rows, dtype=np.float64)[among]])


def learned(
    top: Sequence[int], lexical: np.ndarray, cross: Mapping[int, float], rows: np.ndarray, ranker: Forest, k: int, *, quotes: int
) -> list[int]:
    """The first `quotes` of the sentence model's top `k` in the order of the `ranker`'s scores of their
    RANKER_FEATURES (`ranker_rows`); ties keep the sentence model's order."""
    head = list(top[:k])
    if len(head) < 2:
        return head[:quotes]
    scores = ranker.predict(ranker_rows(head, lexical, cross, rows))
    order = sorted(range(len(head)), key=lambda j: (-scores[j], j))
    return [head[j] for j in order][:quotes]
