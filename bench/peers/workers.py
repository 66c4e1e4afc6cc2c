"""The harness's side of the peer benchmark: the job every variant gets (`job_config`), a worker process
speaking `common`'s protocol (`Worker`), the scripted LLM server process (`LLMServer`), and the reference
answers a variant is checked against (`Reference`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.peers.common import HashingEmbedder, Passage, WorkerConfig, corpus
from bench.peers.llm_server import MODEL, messages_digest
from ragsvc.encodings import get_encoding
from ragsvc.prompts import get_prompt

ROOT = Path(__file__).resolve().parents[2]
# ragsvc's passage header for a chunk without section or page (prompts.format_chunk, marker style).
PASSAGE_TEMPLATE = '[#{marker}] source={source_id} document="{name}"\n<<<\n{text}\n>>>'


def job_config(corpus_size: int, llm_base_url: str) -> WorkerConfig:
    prompt = get_prompt("")  # ragsvc's default: rag-v1, markers, normal strictness
    return WorkerConfig(
        corpus_size=corpus_size,
        llm_base_url=llm_base_url,
        model=MODEL,
        system=prompt.system,
        user_template=prompt.template.user,
        passage_template=PASSAGE_TEMPLATE,
    )


def python_path(src: str | None = None) -> str:
    """PYTHONPATH for a benchmark's child process: `src` first (another checkout's src/, to measure its code
    with this harness), then the caller's own entries (``PYTHONPATH=/path/to/other/src`` does the same for
    every child), then the repository root."""
    return os.pathsep.join(filter(None, (src, os.environ.get("PYTHONPATH"), str(ROOT))))


def worker_env(src: str | None = None) -> dict[str, str]:
    """Offline for every framework: tiktoken's cache seeded with ragsvc's bundled encodings, no hub lookups."""
    for name in ("cl100k_base", "o200k_base"):
        get_encoding(name)  # seeds TIKTOKEN_CACHE_DIR
    return {
        **os.environ,
        "PYTHONPATH": python_path(src),
        "TIKTOKEN_CACHE_DIR": os.environ["TIKTOKEN_CACHE_DIR"],
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HAYSTACK_TELEMETRY_ENABLED": "False",
        "ANONYMIZED_TELEMETRY": "False",
        "OPENAI_API_KEY": "bench-key",
    }


class Worker:
    """One peer's worker process; its constructor waits until the corpus is indexed. `src`: see `python_path`;
    `env`: variables set in its environment on top of `worker_env`'s."""

    def __init__(
        self, python: str, module: str, config: WorkerConfig, *, src: str | None = None, env: Mapping[str, str] = {}
    ) -> None:
        self.module = module
        self._process = subprocess.Popen(
            [python, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**worker_env(src), **env},
            cwd=ROOT,
            text=True,
        )
        self.ready = self._call(asdict(config))
        self.pid = self._process.pid

    def ask(self, queries: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        return self._call({"op": "ask", "queries": [list(q) for q in queries]})["results"]

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._send({"op": "quit"})
                self._process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        self._send(message)
        line = self._process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"worker {self.module} exited with {self._process.wait()}")
        return json.loads(line)

    def _send(self, message: dict[str, Any]) -> None:
        self._process.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        self._process.stdin.flush()  # type: ignore[union-attr]


class LLMControl:
    """The control side of a running scripted LLM server (`bench.peers.llm_server`) at `base_url`."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def drain_log(self) -> list[dict[str, Any]]:
        """What the server served since the previous call: one entry per chat completion, in arrival order."""
        return self._get("/bench/log")

    def script(self, tokens: int = 24, first_token_delay_ms: float = 0.0, token_interval_ms: float = 0.0) -> None:
        """Change the answers of the requests that follow."""
        self._get(f"/bench/script/{tokens}/{first_token_delay_ms}/{token_interval_ms}")

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base_url.removesuffix("/v1") + path, timeout=30) as response:
            return json.loads(response.read())


class LLMServer(LLMControl):
    """The scripted LLM server, in a process of its own."""

    def __init__(self, *args: str) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.peers.llm_server", *args], stdout=subprocess.PIPE, cwd=ROOT, text=True
        )
        super().__init__(self._process.stdout.readline().strip())  # type: ignore[union-attr]
        self.pid = self._process.pid

    def close(self) -> None:
        self._process.terminate()
        self._process.wait(10)


class Reference:
    """Exact answers for the job: the top_k passages of the query's tenant by cosine similarity (brute force over
    the same embeddings), and the digest of the messages a variant must send for them."""

    def __init__(self, config: WorkerConfig, passages: Sequence[Passage] | None = None) -> None:
        self.config = config
        self.passages = list(passages or corpus(config.corpus_size, config.seed))
        self._embedder = HashingEmbedder()
        self._vectors = np.array(self._embedder.embed_many([p.text for p in self.passages]), dtype=np.float32)
        self._tenants = np.array([p.tenant for p in self.passages])

    def top_ids(self, query: str, tenant: str) -> list[str]:
        scores = self._vectors @ np.array(self._embedder.embed(query), dtype=np.float32)
        scores[self._tenants != tenant] = -np.inf
        best = np.argsort(-scores, kind="stable")[: self.config.top_k]
        return [self.passages[i].id for i in best]

    def messages_sha256(self, query: str, ids: Sequence[str]) -> str:
        by_id = {p.id: p for p in self.passages}
        blocks = [self.config.passage_text(n, i, by_id[i].name, by_id[i].text) for n, i in enumerate(ids, start=1)]
        user = self.config.user_message(query, blocks)
        return messages_digest([{"role": "system", "content": self.config.system}, {"role": "user", "content": user}])
