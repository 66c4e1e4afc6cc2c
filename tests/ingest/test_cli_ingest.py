"""`ragsvc ingest PATH...` and `ragsvc docs` as a user runs them: a separate process talking to a real server over
IndexService (IngestDocuments, UploadDocument for what one message cannot carry, ListDocuments, DeleteDocument)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.ingest.pdfs import build_pdf
from tests.support.cli import run_cli
from tests.support.servers import connected, running_server


async def test_ingest_indexes_pdfs_and_markdown_and_reports_each_document(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    pages = [["Onboarding"], ["The badge office is on the third floor, room 301."], ["Lunch is served at noon."]]
    (docs / "guide.pdf").write_bytes(build_pdf(pages, title="Visitor guide"))
    (docs / "faq.md").write_text("# FAQ\n\nThe wifi password rotates every Monday.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 nothing else")

    async with running_server(tmp_path / "data", demo_corpus=False) as server:
        code, out, err = await run_cli(
            "ingest", str(docs), "--address", server.address, "--tenant", "acme", "--tag", "staff", "--published", "2026-01-15"
        )

        assert code == 1, err  # one document failed
        lines = out.splitlines()
        broken = f"broken ({docs / 'broken.pdf'})"
        assert any(line.startswith(f"[1/3] {broken}: error:") and "not a readable PDF" in line for line in lines)
        assert any(line.startswith("[2/3] faq: 1 chunks") for line in lines)
        assert any(
            line.startswith("[3/3] guide: ") and line.split(": ")[1].startswith(("2 chunks", "3 chunks")) for line in lines
        )
        assert lines[-3:-1] == ["failed (1):", lines[-2]] and lines[-2].startswith(f"  {broken}: ")
        assert lines[-1].startswith("2 of 3 documents indexed (0 unchanged)") and lines[-1].endswith("; 1 failed")
        assert await server.components.engine.count("acme") >= 3

        async with connected(server) as stubs:
            reply = await stubs.rag.Ask(
                pb.AskRequest(query="Which room is the badge office in?", tenant_id="acme", user_tags=["staff"]),
                timeout=30,
            )
        cited = reply.answer.citations[0]
        assert (cited.document_name, cited.page_number) == ("guide.pdf", 2)

        other_type, _, err = await run_cli(
            "ingest", str(docs / "guide.pdf"), str(tmp_path / "nothing.odt"), "--address", server.address
        )
        assert other_type == 2 and err == f"error: {tmp_path / 'nothing.odt'}: no such file or directory\n"
        (tmp_path / "scan.odt").write_bytes(b"PK")
        other_type, _, err = await run_cli("ingest", str(tmp_path / "scan.odt"), "--address", server.address)
        assert other_type == 2 and f"error: {tmp_path / 'scan.odt'}: not a directory or a" in err


async def test_a_real_folder_goes_in_whole_and_again_only_what_changed(tmp_path: Path) -> None:
    """The README's order: a folder holding a Node example with its node_modules, and two notes.md."""
    docs = tmp_path / "docs"
    for name, text in {
        "team-a/notes.md": "# Team A\n\nTeam A deploys on Tuesdays after the review.",
        "team-b/notes.md": "# Team B\n\nTeam B deploys on Fridays before noon.",
        "examples/node/README.md": "# Node example\n\nRun npm install first.",
        "examples/node/node_modules/@grpc/grpc-js/README.md": "# grpc-js\n\nA vendored dependency.",
        "examples/go/vendor/modules.txt": "# google.golang.org/grpc v1.79.3\n## explicit; go 1.24",
        ".github/CONTRIBUTING.md": "# Contributing\n\nHidden folder.",
        "drafts/wip.md": "# Work in progress\n\nNot ready.",
    }.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text)

    async with running_server(tmp_path / "data", demo_corpus=False) as server:
        code, out, err = await run_cli("ingest", str(docs), "--exclude", "drafts", "--address", server.address)
        assert code == 0, out + err
        lines = out.splitlines()
        assert lines[0].startswith("skipped 3 folders (hidden, dependencies, build output, virtualenvs): ")
        assert "node_modules" in lines[0] and ".github" in lines[0] and "vendor" in lines[0]
        assert [line.split(":")[0] for line in lines[1:4]] == [
            "[1/3] examples.node.readme",
            "[2/3] team-a.notes",
            "[3/3] team-b.notes",
        ]
        assert lines[-1].startswith("3 of 3 documents indexed (0 unchanged), 3 chunks written")

        (docs / "team-b" / "notes.md").write_text("# Team B\n\nTeam B deploys on Thursdays now.")
        code, out, err = await run_cli("ingest", str(docs), "--exclude", "drafts", "--address", server.address)
        assert code == 0, out + err
        lines = out.splitlines()
        assert lines[1:3] == ["[1/3] examples.node.readme: unchanged", "[2/3] team-a.notes: unchanged"]
        assert lines[3].startswith("[3/3] team-b.notes: 1 chunks")
        assert lines[-1].startswith("3 of 3 documents indexed (2 unchanged), 1 chunks written")

        async with connected(server) as stubs:
            answer = (await stubs.rag.Ask(pb.AskRequest(query="When does team B deploy?"), timeout=30)).answer
        assert "Thursdays" in answer.text and "Fridays" not in answer.text, "the changed file replaced its chunks"
        assert {c.document_name for c in answer.citations} >= {"team-b/notes.md"}

        code, out, _ = await run_cli("docs", "list", "--address", server.address)
        assert code == 0
        rows = [line.split()[:2] for line in out.splitlines()[1:-1]]
        assert rows == [["examples.node.readme", "1"], ["team-a.notes", "1"], ["team-b.notes", "1"]]
        assert out.splitlines()[-1].startswith("3 documents, 3 chunks, ")

        code, out, err = await run_cli("docs", "rm", "team-a.notes", "never-there", "--address", server.address)
        assert (code, out, err) == (1, "team-a.notes: removed (1 chunks)\n", "never-there: not in the index\n")
        code, out, err = await run_cli("ingest", str(docs / "drafts" / "wip.md"), "--id", "wip-2026", "--address", server.address)
        assert code == 0 and "[1/1] wip-2026: 1 chunks" in out
        assert await server.components.engine.count() == 3


async def test_a_file_larger_than_the_server_takes_in_one_message_is_uploaded_in_pieces(tmp_path: Path) -> None:
    limit = 8 * 1024
    big = tmp_path / "handbook.md"
    big.write_text("".join(f"Rule {i} says that badge {i} opens door {i + 1} of the east wing. " for i in range(500)))
    assert big.stat().st_size > 3 * limit
    async with running_server(tmp_path / "data", demo_corpus=False, max_receive_message_bytes=limit) as server:
        code, out, err = await run_cli("ingest", str(big), "--max-message-bytes", str(limit // 2), "--address", server.address)
        assert code == 0, out + err
        document = await server.components.engine.get_document("default", "handbook")
    assert document is not None and document.chunks >= 20
    assert document.source is not None and document.source.content_bytes == big.stat().st_size


async def test_ingest_resumes_an_upload_the_server_holds_part_of(tmp_path: Path) -> None:
    """An earlier `ragsvc ingest` was interrupted mid-upload: the next run continues it (the server checks the
    content's SHA-256 at the end); a part held of other content is started over."""
    big = tmp_path / "manual.md"
    big.write_text("".join(f"Step {i} of the manual turns valve {i} a quarter to the left. " for i in range(160)))
    content = big.read_bytes()
    piece = 4096
    header = index_pb.Document(document_id="manual", name="manual.md", media_type="text/markdown")

    async def hold(data: bytes) -> int:
        async def messages() -> AsyncIterator[index_pb.UploadDocumentRequest]:
            yield index_pb.UploadDocumentRequest(document=header, write_offset=0, data=data)

        return (await stubs.index.UploadDocument(messages(), timeout=30)).committed_size

    async with running_server(tmp_path / "data", demo_corpus=False, max_receive_message_bytes=2 * piece) as server:
        async with connected(server) as stubs:
            for held in (content[:piece], b"x" * piece):  # the same file's start; another file's
                assert await hold(held) == piece
                code, out, err = await run_cli(
                    "ingest", str(big), "--max-message-bytes", str(piece), "--id", "manual", "--address", server.address
                )
                assert code == 0, out + err
                document = await server.components.engine.get_document("default", "manual")
                assert document is not None and document.source is not None
                assert document.source.content_sha256 == hashlib.sha256(content).hexdigest()
                await server.components.engine.delete_document("default", "manual")
