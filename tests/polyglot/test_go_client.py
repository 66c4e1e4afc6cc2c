"""The Go client of docs/examples/go, built from the committed Go stubs, against a live `ragsvc serve`.

One server process for the module (its start dominates the time): the demo corpus, an OpenAI-compatible LLM
scripted to stream word by word (so the deltas are real), authentication on and a rate limit of 3 calls a
minute per key, which is what one run of the client makes. The client's own output is printed (pytest -s).

The Go toolchain and modules come from `make go-tools` (see gotools.py); `make test` installs them and sets
POLYGLOT_REQUIRED, so these tests fail there, rather than skip, when something is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.polyglot import gotools
from tests.polyglot.helpers import require_tools
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.servers import serve_process

DELTAS = (*(f"word{i} " for i in range(12)), "[#1]")
KEYS = {
    "keys": [
        {"name": "go-client", "token": "tok-go", "tenant": "default"},
        {"name": "go-limited", "token": "tok-limited", "tenant": "default"},
    ]
}


@pytest.fixture(scope="module")
def go_client() -> Path:
    """The example, vendored and built (`make test` builds it first, so the cold build of ~1 minute is not inside
    a test's time limit; the build cache makes this ~1 s)."""
    require_tools(gotools.toolchain_missing())
    return gotools.build()


@pytest.fixture(scope="module")
async def address(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """`ragsvc serve` in its own process on a free loopback port; yields the address it printed."""
    async with ScriptedOpenAIServer(deltas=DELTAS, token_delay_s=0.05) as llm:
        env = {
            "RAG_GENERATOR": "openai",
            "OPENAI_BASE_URL": llm.base_url,
            "RAG_AUTH_ENABLED": "true",
            "RAG_API_KEYS": json.dumps(KEYS),
            "RAG_API_RATE_LIMIT": "3",
            # Only the answer itself from the LLM: no classification, self-score or follow-up calls.
            "RAG_LLM_CLASSIFY": "false",
            "RAG_LLM_SELF_SCORE": "false",
            "RAG_DEFAULT_FOLLOW_UP_COUNT": "0",
        }
        async with serve_process(tmp_path_factory.mktemp("go-client-server"), env) as served:
            yield served.address


async def run_client(binary: Path, address: str, *, token: str = "") -> subprocess.CompletedProcess[str]:
    """The client in its own process, in a thread: the loop goes on serving the scripted LLM meanwhile."""
    env = {**os.environ, "RAG_GRPC_ADDRESS": address, "RAG_API_TOKEN": token}
    command = [str(binary), "How is the confidence score computed?"]
    return await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True, text=True, timeout=60, check=False)


def sections(stdout: str) -> dict[str, str]:
    """The client's output by its `== heading` lines (the question after a colon left out)."""
    parts = re.split(r"^== (.+)$", stdout, flags=re.M)
    return {heading.split(":")[0]: body.strip() for heading, body in zip(parts[1::2], parts[2::2], strict=True)}


async def test_health_stream_ask_and_a_decoded_violation(go_client: Path, address: str) -> None:
    result = await run_client(go_client, address, token="tok-go")
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    out = sections(result.stdout)

    assert out["grpc.health.v1.Health/Check"].splitlines() == ['"": SERVING', '"ragsvc.v1.RagService": SERVING']

    stream = out["RagService/AskStream"].splitlines()
    assert stream[0] == "".join(DELTAS), "the deltas, printed as they came, make up the answer"
    deltas = int(re.fullmatch(r"\((\d+) text deltas, 1 citation event\)", stream[1]).group(1))  # type: ignore[union-attr]
    assert deltas >= len(DELTAS) // 2, f"{deltas} deltas for {len(DELTAS)} streamed tokens: the stream came in one piece"
    assert re.fullmatch(r"grounded; confidence \d+; ACTION_(CITE|ROUTE); model openai:llama3\.2", stream[2]), stream
    assert stream[3] == "Sources:"
    assert re.fullmatch(r"  \[#1\] [\w-]+\.md, section '[^']+' \([\w-]+:\d+, relevance 0\.\d\d\)", stream[4]), stream

    ask = out["RagService/Ask"].splitlines()
    assert ask[0] == "".join(DELTAS)
    assert ask[1].startswith("grounded; confidence ")
    assert ask[3] == stream[4], "the same citation"

    assert out["RagService/Ask with an empty query"].splitlines() == [
        "status: INVALID_ARGUMENT: query: must not be empty",
        "  ErrorInfo: reason=VALIDATION_ERROR domain=ragsvc.v1",
        '  BadRequest: field "query": must not be empty',
    ]


async def test_without_the_token_it_is_unauthenticated(go_client: Path, address: str) -> None:
    result = await run_client(go_client, address)
    assert result.returncode == 1
    out = sections(result.stdout)
    assert out["grpc.health.v1.Health/Check"].endswith("SERVING"), "health needs no credentials"
    assert out["RagService/AskStream"].splitlines() == [
        "status: UNAUTHENTICATED: missing bearer token: send the metadata 'authorization: Bearer <token>'",
        "  ErrorInfo: reason=UNAUTHENTICATED domain=ragsvc.v1",
    ]
    assert result.stderr == "error: AskStream failed: UNAUTHENTICATED\n"


async def test_a_rate_limited_call_shows_retry_info_and_quota_failure(go_client: Path, address: str) -> None:
    first = await run_client(go_client, address, token="tok-limited")
    assert first.returncode == 0, "one run is 3 calls, the limit"
    second = await run_client(go_client, address, token="tok-limited")
    assert second.returncode == 1
    refused = sections(second.stdout)["RagService/AskStream"].splitlines()
    assert refused[0].startswith("status: RESOURCE_EXHAUSTED: rate limit of 3 requests per minute reached; retry in ")
    assert refused[1] == '  ErrorInfo: reason=RATE_LIMITED domain=ragsvc.v1 client="key:go-limited" quota="3 requests per minute"'
    assert re.fullmatch(r"  RetryInfo: retry after \d+(\.\d+)?s", refused[2]), refused
    assert refused[3] == "  QuotaFailure: key:go-limited: 3 requests per minute"
    assert second.stderr == "error: AskStream failed: RESOURCE_EXHAUSTED\n"


def test_the_example_is_gofmt_clean(go_client: Path) -> None:
    """(`go vet` passes too, but it analyses every dependency: ~15 s more on a cold cache, so not here.)"""
    gofmt = gotools.GOROOT / "bin" / "gofmt"
    unformatted = subprocess.run([str(gofmt), "-l", "main.go"], cwd=gotools.EXAMPLE, capture_output=True, text=True, check=True)
    assert unformatted.stdout == "", "run gofmt -w docs/examples/go/main.go"


async def test_no_server_says_where_it_looked(go_client: Path) -> None:
    result = await run_client(go_client, "127.0.0.1:1")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: cannot reach ragsvc at 127.0.0.1:1 (is `make serve` running?): "), result.stderr
