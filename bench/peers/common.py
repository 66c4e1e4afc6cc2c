"""What every variant of the peer benchmark shares, standard library only (it is imported by the workers, each
in the venv of its framework): the synthetic corpus and queries, the token-hashing embedder, the prompt, and
the worker protocol.

A worker is ``python -m bench.peers.<peer>`` with the repository root on PYTHONPATH. It speaks JSON lines:
the harness sends a `WorkerConfig`, the worker indexes the corpus and answers ``{"ready": ...}``; then each
``{"op": "ask", "queries": [[text, tenant], ...]}`` is answered with one result per query, in order;
``{"op": "quit"}`` ends it.

Each result carries `store_ms`, the time spent inside the peer's Qdrant store call (see `StoreClock`), so that
overhead can be compared on the same store whatever engine a variant uses.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import random
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

DIMENSION = 384
TENANTS = 4
WORDS_PER_PASSAGE = 120
QUERY_WORDS = 12
_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class Passage:
    """One passage of the corpus; ragsvc ingests it as a document of one chunk, source id ``<id>:0``."""

    id: str
    tenant: str
    name: str
    text: str

    @property
    def source_id(self) -> str:
        return f"{self.id}:0"


def vocabulary(size: int = 4000, seed: int = 11) -> list[str]:
    """Pronounceable made-up words, so that no word is a stop word of any framework."""
    rng = random.Random(seed)
    onsets, vowels, codas = "bcdfghjklmnprstvz", "aeiou", ["", "n", "r", "s", "l", "m"]
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.randint(2, 3)
        words.add("".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(syllables)))
    return sorted(words)


def corpus(size: int, seed: int = 7) -> list[Passage]:
    """`size` passages of WORDS_PER_PASSAGE words spread over TENANTS tenants; each passage draws most of its
    words from a topic of its own, so a query drawn from a passage finds it and its neighbours."""
    rng = random.Random(seed)
    words = vocabulary()
    passages = []
    for i in range(size):
        topic = rng.sample(words, 40)
        text = " ".join(rng.choice(topic) if rng.random() < 0.7 else rng.choice(words) for _ in range(WORDS_PER_PASSAGE))
        passages.append(Passage(id=f"p{i:05d}", tenant=f"tenant-{i % TENANTS}", name=f"Passage {i}", text=text + "."))
    return passages


def queries(passages: Sequence[Passage], count: int, seed: int) -> list[tuple[str, str]]:
    """`count` (question, tenant) pairs, each made of QUERY_WORDS words of one passage, asked in its tenant."""
    rng = random.Random(seed)
    asked = []
    for _ in range(count):
        passage = rng.choice(passages)
        words = passage.text.rstrip(".").split()
        asked.append(("What is said about " + " ".join(rng.sample(words, QUERY_WORDS)) + "?", passage.tenant))
    return asked


class HashingEmbedder:
    """A deterministic 384-dimension embedding: each lower-cased word adds ±1 to a dimension chosen by its hash,
    then the vector is scaled to unit length. Every variant embeds through this class, so model cost is equal
    (a few microseconds) and is measured: `seconds` is the time spent embedding so far."""

    def __init__(self, dimension: int = DIMENSION) -> None:
        self.dimension = dimension
        self.seconds = 0.0
        self._cache: dict[str, tuple[int, float]] = {}

    def embed(self, text: str) -> list[float]:
        started = time.perf_counter()
        vector = [0.0] * self.dimension
        for token in _TOKEN.findall(text.lower()):
            slot = self._cache.get(token)
            if slot is None:
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                slot = self._cache[token] = (value % self.dimension, 1.0 if value >> 63 else -1.0)
            vector[slot[0]] += slot[1]
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        vector = [v / norm for v in vector]
        self.seconds += time.perf_counter() - started
        return vector

    def embed_many(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed(text) for text in texts]


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """The job, the same for every peer. `system` and `user_template` are ragsvc's default prompt
    (``{query}`` and ``{context}`` placeholders); the context is the `passage_template` renderings of the top_k
    passages, best first, joined by a blank line, so that every variant sends the LLM identical messages."""

    corpus_size: int
    llm_base_url: str
    model: str
    system: str
    user_template: str
    passage_template: str
    top_k: int = 5
    temperature: float = 0.1
    seed: int = 7

    def passage_text(self, marker: int, passage_id: str, name: str, text: str) -> str:
        return self.passage_template.format(marker=marker, source_id=f"{passage_id}:0", name=name, text=text)

    def user_message(self, query: str, passages: Sequence[str]) -> str:
        return self.user_template.format(query=query, context="\n\n".join(passages))


class Peer(Protocol):
    """One framework doing the job. Built with the corpus already indexed (its constructor indexes)."""

    last_ids: list[str]  # the top-k passage ids of the latest `ask`, best first
    store: Any  # the qdrant_client.QdrantClient the framework queries (its store calls are timed)

    def ask(self, query: str, tenant: str) -> Iterator[str]:
        """Retrieve the top_k passages of `tenant` for `query` and stream the LLM's answer, token by token."""
        ...


PeerFactory = Callable[[WorkerConfig, Sequence[Passage], HashingEmbedder], Peer]


def rss_mib(pid: int | str = "self") -> float:
    """Resident memory of a process (default: this one), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def versions(*packages: str) -> dict[str, str]:
    found = {"python": sys.version.split()[0]}
    for package in packages:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


class StoreClock:
    """Times the store calls of one qdrant-client instance: its search methods are wrapped on that instance, so
    whatever path a framework takes to them, `seconds` and `calls` count the time spent inside them (a call made
    from within another counts once, as part of the outer one)."""

    METHODS = ("query_points", "search")  # what the integrations call to search (qdrant-client 1.x)

    def __init__(self, client: Any) -> None:
        self.seconds = 0.0
        self.calls = 0
        self._depth = 0
        for name in self.METHODS:
            if hasattr(client, name):
                setattr(client, name, self._timed(getattr(client, name)))

    def _timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self._depth -= 1
                if not self._depth:
                    self.seconds += time.perf_counter() - started
                    self.calls += 1

        return timed


def start_worker() -> tuple[Any, WorkerConfig]:
    """The protocol's output stream (stdout; what prints goes to stderr from now on, so that a framework that
    prints cannot corrupt the protocol) and the job, read from stdin."""
    out = sys.stdout
    sys.stdout = sys.stderr
    return out, WorkerConfig(**json.loads(sys.stdin.readline()))


def serve_commands(out: Any, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Answers each command from stdin with `answer(command)` until ``{"op": "quit"}`` or the end of input."""
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "quit":
            break
        send(out, answer(command))


def run_worker(factory: PeerFactory, *packages: str) -> None:
    """The worker loop on stdin/stdout (see the module docstring); `packages` are the versions to report."""
    out, config = start_worker()
    embedder = HashingEmbedder()
    passages = corpus(config.corpus_size, config.seed)
    started = time.perf_counter()
    peer = factory(config, passages, embedder)
    store = StoreClock(peer.store)
    ready = {"ready": True, "index_s": time.perf_counter() - started, "rss_mib": rss_mib(), "versions": versions(*packages)}
    send(out, ready)
    serve_commands(out, lambda command: {"results": [_timed_ask(peer, embedder, store, q, t) for q, t in command["queries"]]})


def _timed_ask(peer: Peer, embedder: HashingEmbedder, store: StoreClock, text: str, tenant: str) -> dict[str, Any]:
    embedded_before = embedder.seconds
    stored_before, calls_before = store.seconds, store.calls
    started = time.perf_counter()
    first_token = None
    answer = []
    window = [time.monotonic()]
    for token in peer.ask(text, tenant):
        if first_token is None and token:  # some frameworks pass on the empty role chunk that opens a stream
            first_token = time.perf_counter()
        answer.append(token)
    ended = time.perf_counter()
    window.append(time.monotonic())
    return {
        "window": window,  # when the question was asked and answered, on the LLM server's clock (its log's received_at)
        "total_ms": (ended - started) * 1000,
        "ttft_ms": ((first_token or ended) - started) * 1000,
        "embed_ms": (embedder.seconds - embedded_before) * 1000,
        "store_ms": (store.seconds - stored_before) * 1000,
        "store_calls": store.calls - calls_before,
        "ids": list(peer.last_ids),
        "answer": "".join(answer),
        "rss_mib": rss_mib(),
    }


def send(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


__all__ = [
    "DIMENSION",
    "HashingEmbedder",
    "Passage",
    "Peer",
    "StoreClock",
    "WorkerConfig",
    "asdict",
    "corpus",
    "queries",
    "run_worker",
    "send",
    "serve_commands",
    "start_worker",
    "versions",
]
