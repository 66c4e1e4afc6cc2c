"""What `ragsvc` prints when things go wrong, and the answer's status line, as a user sees them: a separate process
against a real server (or none at all)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsvc.chat import format_sources
from ragsvc.server.app import RagServer
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.cli import run_cli
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.polling import eventually
from tests.support.servers import connected, running_server


def closed_port() -> str:
    """127.0.0.1:PORT where nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture(scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    async with running_server(tmp_path_factory.mktemp("cli-data"), cache_max_entries=100) as server:
        yield server


@pytest.mark.parametrize("command", [["ask", "What happens on SIGTERM?"], ["chat"], ["docs", "list"],
                                     ["ingest", "README.md"]], ids=lambda c: c[0])
async def test_a_server_that_is_not_there_is_named_with_what_to_do(command: list[str]) -> None:
    address = closed_port()
    code, _, err = await run_cli(*command, env={"RAG_GRPC_ADDRESS": address})
    assert code == 1
    lines = err.strip().splitlines()
    assert lines[0] == f"error: cannot reach ragsvc at {address} (is `make serve` running?)", err
    assert "failed to connect" in lines[1].lower() and len(lines) == 2, "the transport's own words, once"


async def test_a_violation_is_printed_once(server: RagServer) -> None:
    code, out, err = await run_cli("ask", "", "--address", server.address)
    assert (code, out, err) == (1, "", "\nerror: INVALID_ARGUMENT VALIDATION_ERROR\n  query: must not be empty\n")


async def test_a_bad_setting_is_named_with_its_value_and_why() -> None:
    code, out, err = await run_cli("serve", env={"CHAT_MODEL": "gpt-4o", "RAG_GRPC_ADDRESS": closed_port()})
    assert (code, out) == (2, "")
    assert err == (
        "error: invalid configuration\n"
        "  CHAT_MODEL: 'gpt-4o' is not in RAG_MODELS, which lists llama3.2, qwen3:8b, deepseek-r1:32b\n"
    )


async def test_a_second_serve_on_a_data_dir_in_use_says_so(server: RagServer) -> None:
    env = {"RAG_DATA_DIR": str(server.settings.server.data_dir), "RAG_GRPC_ADDRESS": closed_port()}
    code, out, err = await run_cli("serve", env=env)
    assert (code, out) == (1, "")
    assert err.endswith(
        f"error: cannot start: the vector store at {server.settings.server.data_dir / 'qdrant-edge'} is in use by "
        "another process (another `ragsvc serve` on the same RAG_DATA_DIR?)\n"
    ), err
    assert "Traceback" not in err


async def test_the_status_line_names_a_cache_hit_and_the_original_usage(server: RagServer) -> None:
    question = "How are documents chunked?"
    first = await run_cli("ask", question, "--address", server.address)
    again = await run_cli("ask", question, "--address", server.address)

    first_status, again_status = first[1].splitlines()[-1], again[1].splitlines()[-1]
    assert first_status.startswith("grounded; confidence ") and "; model extractive; " in first_status
    assert "cache hit" not in first_status and " completion tokens" in first_status
    assert again_status == first_status + "; cache hit (no stage ran; the tokens are the original answer's)"


async def test_markdown_sources_show_no_page_and_refusals_no_empty_model(server: RagServer) -> None:
    code, out, _ = await run_cli("ask", "What happens on SIGTERM?", "--address", server.address)
    assert code == 0
    [source] = [line for line in out.splitlines() if line.startswith("  [#")]
    assert source.startswith("  [#1] operations.md, section 'Graceful shutdown' (relevance ")
    assert "page" not in source

    code, out, _ = await run_cli("ask", "What is the capital of Peru?", "--address", server.address)
    status = out.splitlines()[-1]
    assert code == 0 and status.startswith("REFUSAL_REASON_SCORE_GATE; confidence 0; ACTION_ROUTE to ")
    assert "model" not in status


def test_chat_sources_show_a_page_only_where_there_is_one() -> None:
    answer = pb.Answer(citations=[
        pb.Citation(marker=1, document_name="operations.md", section="Graceful shutdown", relevance_score=0.58),
        pb.Citation(marker=2, document_name="guide.pdf", page_number=2, relevance_score=0.4),
        pb.Citation(marker=3, document_name="notes.txt", relevance_score=0.35),
    ])
    assert format_sources(answer) == [
        "  [#1] operations.md · section Graceful shutdown · relevance 0.58",
        "  [#2] guide.pdf · page 2 · relevance 0.40",
        "  [#3] notes.txt · relevance 0.35",
    ]


async def test_ragsvc_llm_prints_the_settings_of_a_server_against_it() -> None:
    code, out, _ = await run_cli("llm", "--port", "8123", "--env")
    settings = dict(item.split("=", 1) for item in out.split())
    assert code == 0
    assert settings["OPENAI_BASE_URL"] == "http://127.0.0.1:8123/v1" and settings["RAG_GENERATOR"] == "openai"
    assert settings["RAG_MODELS"].startswith(settings["CHAT_MODEL"] + "=")


async def test_serve_logs_no_line_per_health_probe_of_the_llm(tmp_path: Path) -> None:
    """httpx logs every request at INFO; the probes of the LLM server (every 5 s by default) must not fill the log."""
    async with ScriptedOpenAIServer() as llm:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ragsvc.cli", "serve",
            env={**os.environ, "RAG_GRPC_ADDRESS": "127.0.0.1:0", "RAG_DATA_DIR": str(tmp_path),
                 "RAG_DEMO_CORPUS": "false", "RAG_GENERATOR": "openai", "OPENAI_BASE_URL": llm.base_url,
                 "RAG_HEALTH_PROBE_INTERVAL_SECONDS": "0.2"},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert process.stdout is not None
            line = await asyncio.wait_for(process.stdout.readline(), 60)
            assert line.startswith(b"ragsvc serving on "), line
            await eventually(lambda: len([r for r in llm.requests if r.path == "/v1/models"]) >= 5, within_s=30)
        finally:
            process.terminate()
            _, stderr = await asyncio.wait_for(process.communicate(), 30)
    log = stderr.decode()
    assert "INFO ragsvc.server.components" in log, "the server's own INFO lines stay"
    assert "HTTP Request:" not in log and "httpx" not in log, log[-2000:]


def test_the_cli_module_is_importable_without_the_server() -> None:
    """Clients never load the server: importing the CLI pulls in no server module."""
    code = "import sys, ragsvc.cli; print(sorted(m for m in sys.modules if m.startswith('ragsvc.server')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.stdout.strip() == "[]"


async def test_a_session_is_shown_then_forgotten(server: RagServer) -> None:
    session = "7d3e1f20-5b4a-4c8d-9e6f-1a2b3c4d5e6f"
    async with connected(server) as stubs:  # the same host as the commands below: the same caller
        asked = await stubs.rag.Ask(pb.AskRequest(query="What happens on SIGTERM?", session_id=session), timeout=30)
    code, out, err = await run_cli("session", "show", session, "--address", server.address)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"session {session} (tenant default): 1 turns you may read, ")
    assert lines[3:5] == ["Q: What happens on SIGTERM?", f"A: {asked.answer.text.splitlines()[0]}"]
    cited = ", ".join(dict.fromkeys(c.document_id for c in asked.answer.citations))
    assert f"sources: {cited}" in lines and cited

    code, out, _ = await run_cli("session", "rm", session, "--address", server.address)
    assert (code, out) == (0, f"{session}: deleted (1 turns; the text of 1 audit rows erased)\n")
    code, out, err = await run_cli("session", "show", session, "--address", server.address)
    assert code == 1 and not out
    assert err.strip() == f"error: NOT_FOUND NOT_FOUND: no session {session!r}"
    code, _, err = await run_cli("session", "rm", "not-a-session", "--address", server.address)
    assert code == 1 and "session_id: must be a UUID version 4" in err


async def test_a_caller_is_erased(server: RagServer) -> None:
    """This test's peer, erased in a tenant of its own (no other test's records are touched; with no documents
    there, the answers are refusals: replayable, not cached)."""
    tenant, session = "cli-erasure", "2c9d8e7f-6a5b-4c3d-8e1f-0a9b8c7d6e5f"
    async with connected(server) as stubs:
        for fields in ({"idempotency_key": "once"}, {"session_id": session}):
            await stubs.rag.Ask(pb.AskRequest(query="What happens on SIGTERM?", tenant_id=tenant, **fields), timeout=30)
    code, out, err = await run_cli("erase", "--peer", "ipv4:127.0.0.1", "--tenant", tenant, "--address", server.address)
    assert (code, err) == (0, "")
    assert out == ("erased peer ipv4:127.0.0.1: 1 sessions (2 messages), the text of 2 audit rows, 0 operations, "
                   "0 cached and 1 replayable answers\n")  # fmt: skip
    rows = await server.components.answers.recent(tenant)
    assert [(row["query"], row["caller"]) for row in rows] == [("", "")] * 2
    code, _, err = await run_cli("erase", "--address", server.address)
    assert code == 2 and "one of the arguments --key --peer is required" in err


async def test_the_owner_directory_is_listed_set_and_removed(server: RagServer) -> None:
    address = ("--address", server.address)
    assert await run_cli("owners", "set", "travel", "u7", "travel-lead@example.com", *address) == (
        0, "travel: owned by u7 <travel-lead@example.com>\n", "",
    )  # fmt: skip
    await run_cli("owners", "set", "finance", "u1", "cfo@example.com", *address)
    code, out, _ = await run_cli("owners", "list", *address)
    assert (code, out.splitlines()) == (0, [
        "TAG      OWNER", "finance  u1 <cfo@example.com>", "travel   u7 <travel-lead@example.com>",
    ])  # fmt: skip
    for tag in ("travel", "finance"):
        assert await run_cli("owners", "rm", tag, *address) == (0, f"{tag}: no owner now (routed to the admin)\n", "")
    code, out, err = await run_cli("owners", "rm", "travel", *address)
    assert code == 1 and err.strip() == "error: NOT_FOUND NOT_FOUND: no owner for the tag 'travel'"
    code, _, err = await run_cli("owners", "set", "travel", "u7", "not-an-email", *address)
    assert code == 1 and "tag_owner.owner_email: must be an email address" in err
    assert (await run_cli("owners", "list", *address))[1] == "TAG  OWNER\n"
