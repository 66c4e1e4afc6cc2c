"""An index whose terms and readings another analyser version wrote, as an operator meets it: `ragsvc serve` refuses
it with the versions and the rebuild command, `ragsvc reindex` rewrites the terms and readings (holding the shard's
lock, as the server does), and the server then serves it. Real processes, on the embedded engine (both engines'
rewrite is in tests/retrieval/test_stored_terms.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2

from ragsvc.domain import Chunk
from ragsvc.errors import IndexOutdated
from ragsvc.reading.chunks import stored_reading
from ragsvc.reading.text import ANALYSER_VERSION, index_terms
from ragsvc.retrieval.edge import ANALYSER_FILE, EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.layout import indexed_text
from ragsvc.retrieval.stored_terms import UNMARKED_VERSION
from ragsvc.server.app import RagServer
from ragsvc.v1 import rag_service_pb2 as pb
from tests.retrieval.conftest import store
from tests.support.cli import run_cli
from tests.support.local_server import free_port
from tests.support.servers import connected, serve_process, server_settings, wait_for_health
from tests.support.stored_terms import OLD, stored_rows, terms_by_text, write_with_the_old_analyser

SHARD = "qdrant-edge"  # the embedded engine's shard under RAG_DATA_DIR with the default embedder
CHUNKS = [
    Chunk("backups", 0, "The storage cluster takes a snapshot backup every night at 2 am.", tenant_id="default",
          page_title="Backups"),
    Chunk("backups", 1, "Snapshots are kept for 30 days, then deleted.", tenant_id="default", page_title="Backups"),
    Chunk("vpn", 0, "Connect to the corporate VPN before opening the intranet.", tenant_id="default"),
    Chunk("leave", 0, "Employees accrue two vacation days per month of service.", tenant_id="globex"),
    Chunk("leave", 1, "Unused vacation days expire at the end of March.", tenant_id="globex"),
]  # fmt: skip
SERVING = health_pb2.HealthCheckResponse.SERVING


async def written_index(data_dir: Path, embedder: MiniLMEmbedder) -> Path:
    """The shard `ragsvc serve` opens in `data_dir`, holding CHUNKS."""
    engine = EdgeEngine.open(data_dir / SHARD)
    try:
        await store(engine, embedder, CHUNKS)
    finally:
        await engine.close()
    return data_dir / SHARD


async def test_serve_refuses_an_index_of_another_analyser_until_reindex_rewrites_it(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    shard = await written_index(tmp_path, embedder)
    engine = EdgeEngine.open(shard)
    try:
        await write_with_the_old_analyser(engine)
    finally:
        await engine.close()
    env = {"RAG_DATA_DIR": str(tmp_path), "RAG_DEMO_CORPUS": "false", "RAG_GRPC_ADDRESS": f"127.0.0.1:{free_port()}"}

    code, out, err = await run_cli("serve", env=env)

    assert (code, out) == (1, ""), "it never served"
    assert err.endswith(
        f"error: cannot start: the index terms and readings in {shard} were written by analyser version {OLD}, and "
        f"this ragsvc reads with version {ANALYSER_VERSION}: stop the server and run `ragsvc reindex` with the same "
        "settings to rewrite them\n"
    ), err
    assert "Traceback" not in err

    code, out, err = await run_cli("reindex", "--page-size", "2", env=env)

    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"rewriting the index terms and readings in {shard} with analyser version {ANALYSER_VERSION}"
    assert lines[1] == "  2 of 5 chunks read, 2 rewritten"
    assert lines[-1] == (f"done: 5 chunks read, 5 rewritten; the index's analyser version was {OLD} and is {ANALYSER_VERSION}")
    engine = EdgeEngine.open(shard)
    try:
        assert await engine.analyser_version() == ANALYSER_VERSION
        assert await terms_by_text(engine) == {indexed_text(c): index_terms(indexed_text(c)) for c in CHUNKS}
        stored = {row.chunk.text: row.reading for row in await stored_rows(engine)}
        assert stored == {c.text: stored_reading(c.text, c.page_title, c.section or "") for c in CHUNKS}
    finally:
        await engine.close()

    async with serve_process(tmp_path, {"RAG_DEMO_CORPUS": "false"}) as served, connected(served.address) as stubs:
        await wait_for_health(stubs.health, "", SERVING, within_s=30)
        answer = (await stubs.rag.Ask(pb.AskRequest(query="How long are snapshots kept?"), timeout=30)).answer
        assert answer.grounded and answer.citations[0].document_id == "backups", answer

        code, out, err = await run_cli("reindex", env=env)  # the server holds the shard

        assert (code, out) == (1, "")
        assert err == (
            f"error: cannot reindex: the vector store at {shard} is in use by another process (another `ragsvc "
            "serve` on the same RAG_DATA_DIR?)\n"
        )


async def test_an_index_written_before_indexes_recorded_their_analyser_counts_as_version_1(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    shard = await written_index(tmp_path, embedder)
    (shard / ANALYSER_FILE).unlink()
    settings = server_settings(tmp_path, demo_corpus=False)

    if ANALYSER_VERSION != UNMARKED_VERSION:  # the analyser has changed since: refused like any older index
        with pytest.raises(IndexOutdated, match=f"written by analyser version {UNMARKED_VERSION}, "):
            await RagServer.start(settings)
        return
    server = await RagServer.start(settings)
    try:
        async with connected(server) as stubs:
            await wait_for_health(stubs.health, "", SERVING, within_s=30)
            answer = (await stubs.rag.Ask(pb.AskRequest(query="How long are snapshots kept?"), timeout=30)).answer
            assert answer.grounded and answer.citations[0].document_id == "backups", answer
    finally:
        await server.stop()


async def test_the_help_names_the_command() -> None:
    code, out, _ = await run_cli("--help")

    assert code == 0
    assert "reindex" in out.split("positional arguments:")[1]
    assert "rewrite the index terms stored with every chunk" in " ".join(out.split())
