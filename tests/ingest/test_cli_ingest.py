"""`ragsvc ingest PATH...` as a user runs it: a separate process talking to a real server over IngestDocuments."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from ragsvc.v1 import rag_service_pb2 as pb
from tests.ingest.pdfs import build_pdf
from tests.support.servers import connected, running_server


async def run_cli(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ragsvc.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def test_ingest_indexes_pdfs_and_markdown_and_reports_each_document(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    pages = [["Onboarding"], ["The badge office is on the third floor, room 301."], ["Lunch is served at noon."]]
    (docs / "guide.pdf").write_bytes(build_pdf(pages, title="Visitor guide"))
    (docs / "faq.md").write_text("# FAQ\n\nThe wifi password rotates every Monday.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 nothing else")

    async with running_server(tmp_path / "data", demo_corpus=False) as server:
        code, out, err = await run_cli("ingest", str(docs), "--address", server.address, "--tenant", "acme",
                                       "--tag", "staff", "--published", "2026-01-15")

        assert code == 1, err  # one document failed
        lines = out.splitlines()
        assert any(line.startswith("[1/3] broken: error:") and "not a readable PDF" in line for line in lines)
        assert any(line.startswith("[2/3] faq: 1 chunks") for line in lines)
        assert any(line.startswith("[3/3] guide: ") and line.split(": ")[1].startswith(("2 chunks", "3 chunks"))
                   for line in lines)
        assert lines[-1].startswith("2 of 3 documents indexed")
        assert await server.components.engine.count("acme") >= 3

        async with connected(server) as stubs:
            reply = await stubs.rag.Ask(
                pb.AskRequest(query="Which room is the badge office in?", tenant_id="acme", user_tags=["staff"]),
                timeout=30,
            )
        cited = reply.answer.citations[0]
        assert (cited.document_name, cited.page_number) == ("guide.pdf", 2)

        missing, _, err = await run_cli("ingest", str(tmp_path / "nothing.docx"), "--address", server.address)
        assert missing == 2 and "nothing.docx" in err
