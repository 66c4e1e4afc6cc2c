"""Start-up that fails late closes everything it opened; a clean stop closes everything too.

Each case breaks one setting that can only fail once start-up is under way (a port taken, an engine or database
that cannot open, an embedding server that is not there). The server must then refuse to start with a typed
error and leave nothing behind: no file descriptor, thread or task of its own, and the embedded engine's
directory lock released (a second opener fails on it while it is held).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from ragsvc.config import Settings
from ragsvc.errors import DatabaseUnavailable, EmbeddingFailed, InvalidRequest, RagError, RetrievalUnavailable
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.server.app import RagServer

QUIET = {"demo_corpus": False, "request_log": False, "grpc_address": "127.0.0.1:0", "health_probe_interval_s": 60.0}


@dataclass(frozen=True)
class Held:
    """What this process holds: open file descriptors, threads (but the event loop's worker pool, which keeps
    its threads for reuse), and asyncio tasks."""

    fds: frozenset[str]
    threads: frozenset[threading.Thread]
    tasks: frozenset[asyncio.Task[Any]]

    @classmethod
    def now(cls) -> Held:
        threads = {t for t in threading.enumerate() if not t.name.startswith("asyncio_")}
        current = asyncio.current_task()
        return cls(
            frozenset(os.listdir("/proc/self/fd")),
            frozenset(threads),
            frozenset(t for t in asyncio.all_tasks() if t is not current),
        )


@contextlib.contextmanager
def listening() -> Iterator[int]:
    """A loopback port that something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _target(fd: str) -> str:
    """What a descriptor of this process is open on (for a readable failure)."""
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/self/fd/{fd}")
    return "(closed meanwhile)"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
async def warmed(embedder: MiniLMEmbedder, tmp_path_factory: pytest.TempPathFactory) -> None:
    """gRPC and onnxruntime create process-wide threads and descriptors once: at the first server, and (gRPC) at
    the first address that fails to bind. Do both before anything is counted."""
    server = await RagServer.start(Settings.of(**QUIET, data_dir=tmp_path_factory.mktemp("warm")), embedder=embedder)
    await server.stop()
    with listening() as taken:
        refused = grpc.aio.server()
        with pytest.raises(RuntimeError):
            refused.add_insecure_port(f"127.0.0.1:{taken}")
        await refused.stop(None)


async def settled(before: Held) -> Held:
    """What is held once the loop had a moment to finish callbacks the failure scheduled."""
    for _ in range(50):
        held = Held.now()
        if held == before:
            return held
        await asyncio.sleep(0.02)
    return Held.now()


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("grpc port taken", InvalidRequest),
        ("metrics port taken", InvalidRequest),
        ("database cannot open", DatabaseUnavailable),
        ("qdrant server unreachable", RetrievalUnavailable),
        ("embedding server unreachable", EmbeddingFailed),
    ],
)
async def test_a_start_that_fails_late_leaves_nothing_open(
    case: str, expected: type[RagError], warmed: None, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    with listening() as taken:
        overrides: dict[str, Any] = {
            "grpc port taken": {"grpc_address": f"127.0.0.1:{taken}"},
            "metrics port taken": {"metrics_port": taken},
            "database cannot open": {"database_path": str(tmp_path / "a-file" / "ragsvc.sqlite3")},
            "qdrant server unreachable": {
                "qdrant_url": f"http://127.0.0.1:{closed_port()}",
                "qdrant_prefer_grpc": False,
                "qdrant_timeout_s": 1.0,
            },
            "embedding server unreachable": {"embedder": "openai", "embedding_base_url": f"http://127.0.0.1:{closed_port()}/v1"},
        }[case]
        (tmp_path / "a-file").write_text("a file where the database's directory should be")
        settings = Settings.of(**{**QUIET, **overrides, "data_dir": tmp_path / "data"})
        injected = None if "embedder" in overrides else embedder
        before = Held.now()
        with pytest.raises(expected) as refused:
            await RagServer.start(settings, embedder=injected)
        # While the error (and the start-up frames its traceback holds) is alive, what start-up opened must be
        # closed already, not merely unreferenced: no file under the data directory is open, and the engine's
        # directory lock is free (a second opener fails on it while it is held).
        assert [target for fd in Held.now().fds if (target := _target(fd)).startswith(str(tmp_path))] == []
        for shard in (tmp_path / "data").glob("qdrant-edge*"):
            await EdgeEngine.open(shard).close()
        fields = [v.field for v in getattr(refused.value, "violations", ())]
        del refused  # grpc frees a stopped server's descriptors only when the server object goes
        held = await settled(before)
    if expected is InvalidRequest:
        assert fields == ["RAG_GRPC_ADDRESS" if "grpc" in case else "RAG_METRICS_PORT"]
    assert {fd: _target(fd) for fd in held.fds - before.fds} == {}
    assert held.threads == before.threads
    assert held.tasks - before.tasks == frozenset()  # tasks of other fixtures may end meanwhile


async def test_a_clean_stop_closes_everything(warmed: None, embedder: MiniLMEmbedder, tmp_path: Path) -> None:
    before = Held.now()
    server = await RagServer.start(Settings.of(**QUIET, data_dir=tmp_path, metrics_port=closed_port()), embedder=embedder)
    assert Held.now() != before  # it holds things while it runs
    await server.stop()
    assert [target for fd in Held.now().fds if (target := _target(fd)).startswith(str(tmp_path))] == []
    del server
    held = await settled(before)
    assert {fd: _target(fd) for fd in held.fds - before.fds} == {}
    assert (held.threads, held.tasks - before.tasks) == (before.threads, frozenset())


def test_a_bad_owners_file_is_refused_before_anything_opens(tmp_path: Path) -> None:
    owners = tmp_path / "owners.json"
    owners.write_text('{"users": [{"id": "u1"}]}')  # a user without an email
    with pytest.raises(InvalidRequest) as refused:
        Settings.of(owners_file=str(owners))
    assert [v.field for v in refused.value.violations] == ["RAG_OWNERS_FILE"]
