"""`ragsvc ask` as a user runs it (a separate process, its output a pipe) against a real server whose scripted model
writes a draft that ends refused: the validated stream never shows it, the raw stream shows it and then visibly
withdraws it for the refusal, and `--json` prints the final answer, whose text is the refusal."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsvc.prompts import REFUSAL_SENTENCE
from ragsvc.server.app import RagServer
from tests.ingest.test_cli_ingest import run_cli
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.servers import running_server

QUESTION = "What happens on SIGTERM?"
DRAFT = ["The server ", "explodes ", "on Mars. ", "Nobody knows why."]
GROUNDED = ["On SIGTERM the server reports ", "NOT_SERVING [#1]."]


@pytest.fixture(scope="module")
async def llm() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer(deltas=DRAFT) as server:
        yield server


@pytest.fixture(scope="module")
async def server(llm: ScriptedOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    async with running_server(
        Path(tmp_path_factory.mktemp("cli-ask")), generator="openai", openai_base_url=llm.base_url
    ) as served:
        yield served


async def ask(server: RagServer, *options: str) -> str:
    code, out, err = await run_cli("ask", QUESTION, "--address", server.address, *options)
    assert code == 0, err
    return out


async def test_a_validated_stream_never_shows_the_refused_draft(server: RagServer, llm: ScriptedOpenAIServer) -> None:
    llm.deltas = DRAFT
    out = await ask(server)
    assert "Mars" not in out and "withdrawn" not in out
    assert out.startswith(REFUSAL_SENTENCE) and "REFUSAL_REASON_UNSUPPORTED_ANSWER" in out


async def test_a_raw_stream_shows_the_draft_then_withdraws_it_visibly(server: RagServer, llm: ScriptedOpenAIServer) -> None:
    llm.deltas = DRAFT
    out = await ask(server, "--stream", "raw")
    draft, _, after = out.partition("[draft withdrawn: not supported]\n")
    assert "".join(DRAFT) in draft, "the raw draft was streamed"
    assert after.startswith(REFUSAL_SENTENCE + "\n"), "and then replaced by the refusal"


async def test_json_prints_the_final_answer_whose_text_is_the_refusal(server: RagServer, llm: ScriptedOpenAIServer) -> None:
    llm.deltas = DRAFT
    printed = json.loads(await ask(server, "--json"))
    assert printed["text"] == REFUSAL_SENTENCE and "Mars" not in json.dumps(printed)
    explained = json.loads(await ask(server, "--json", "--explain"))
    assert "Mars" in explained["explanation"]["draft"], "the draft is there for whoever asks to see it"


async def test_a_grounded_answer_is_shown_once_with_its_sources(server: RagServer, llm: ScriptedOpenAIServer) -> None:
    llm.deltas = GROUNDED
    for options in ((), ("--stream", "raw")):
        out = await ask(server, *options)
        assert out.startswith("".join(GROUNDED) + "\n") and "withdrawn" not in out
        assert "Sources:" in out and "grounded" in out
