"""Static word-piece vectors distilled from the bundled all-MiniLM-L6-v2 (the model2vec recipe): each vocabulary
entry is run through the model alone ("[CLS] piece [SEP]"), its output mean-pooled, then the vectors are centred and
reduced by PCA. A text's vector is then the weighted mean of its pieces' vectors: no model run at query time."""

from __future__ import annotations

import numpy as np

from ragsvc.retrieval.embedders import MiniLMEmbedder

DIMENSIONS = 128
BATCH = 1024


def distil(dimensions: int = DIMENSIONS) -> np.ndarray:
    embedder = MiniLMEmbedder.load()
    session = embedder._session
    vocab = embedder._tokenizer.get_vocab_size()
    names = {i.name for i in session.get_inputs()}
    out = np.zeros((vocab, 384), dtype=np.float32)
    for start in range(0, vocab, BATCH):
        ids = np.arange(start, min(start + BATCH, vocab), dtype=np.int64)
        batch = np.stack([np.full_like(ids, 101), ids, np.full_like(ids, 102)], axis=1)
        feeds = {"input_ids": batch, "attention_mask": np.ones_like(batch), "token_type_ids": np.zeros_like(batch)}
        (hidden,) = session.run(None, {k: v for k, v in feeds.items() if k in names})
        out[start : start + len(ids)] = hidden.mean(axis=1)
    centred = out - out.mean(axis=0)
    _, _, vt = np.linalg.svd(centred[1000:], full_matrices=False)  # the [unused] rows left out of the fit
    reduced = centred @ vt[:dimensions].T
    return reduced.astype(np.float32)
