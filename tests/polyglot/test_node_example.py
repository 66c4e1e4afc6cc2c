"""docs/examples/node/ask.js, as the README runs it, against an in-process server: the address from
RAG_GRPC_ADDRESS, the streamed answer and its sources, then the health status its header promises; and the
words a user gets when nothing listens there. Its packages come from `make node-example` (npm ci)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from pathlib import Path

from tests.polyglot.gotools import ROOT
from tests.polyglot.helpers import require_tools
from tests.support.servers import running_server

EXAMPLE = ROOT / "docs" / "examples" / "node"


def require_node() -> None:
    missing = [
        what
        for what, there in (
            ("node", shutil.which("node")),
            ("docs/examples/node/node_modules (make node-example)", (EXAMPLE / "node_modules" / "@grpc" / "grpc-js").exists()),
        )
        if not there
    ]
    require_tools(f"not installed: {', '.join(missing)}" if missing else None)


async def node(*args: str, address: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        "node",
        "ask.js",
        *args,
        cwd=EXAMPLE,
        env={**os.environ, "RAG_GRPC_ADDRESS": address},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_node_example_streams_an_answer_and_prints_the_health_status(tmp_path: Path) -> None:
    require_node()
    async with running_server(tmp_path) as server:
        code, out, err = await node("What happens on SIGTERM?", address=server.address)
    assert code == 0, err
    lines = out.splitlines()
    assert "NOT_SERVING" in lines[0] and lines[0].endswith("[#1]"), "the streamed answer"
    assert {"grounded, ACTION_CITE", "grounded, ACTION_ROUTE"} & set(lines), "grounded, and cited or routed by the reader"
    assert "  [#1] operations.md, section 'Graceful shutdown'" in lines, "no page for a Markdown source"
    assert lines[-1] == "health ragsvc.v1.RagService: SERVING"


async def test_the_node_example_names_an_address_where_nothing_listens() -> None:
    require_node()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    code, out, err = await node("What happens on SIGTERM?", address=address)
    assert (code, out) == (1, "")
    assert err.startswith(f"error: cannot reach ragsvc at {address} (is `make serve` running?)\n"), err
