"""PDF ingestion: pages (and outline headings) per chunk, from PDFs the tests build themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsvc.domain import RetrievalQuery, SourceDocument
from ragsvc.errors import InvalidRequest
from ragsvc.ingest.indexer import Indexer
from ragsvc.ingest.limits import DocumentLimits
from ragsvc.ingest.loaders import source_documents_from_paths
from ragsvc.ingest.media import PDF
from ragsvc.ingest.pdf import pdf_sections
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.schema import MetadataSchema
from ragsvc.source_trust import SourceTrust
from ragsvc.storage.backend import Backend
from ragsvc.storage.metadata_keys import MetadataKeyStore
from tests.ingest.pdfs import build_pdf
from tests.ingest.reading import sections_of

PAGES = [
    ["Employee handbook", "Welcome to the company. This handbook explains our policies."],
    ["Vacation", "Employees accrue two vacation days per month of service.", "Unused days expire in March."],
    ["Expenses", "Travel expenses are reimbursed within ten business days.", "Keep every receipt."],
    ["Security", "Connect to the corporate VPN before opening the intranet."],
]
OUTLINE = [("Introduction", 0), ("Time off", 1), ("Money", 2), ("IT", 3)]


def handbook(**changes: object) -> SourceDocument:
    fields = {
        "document_id": "handbook",
        "name": "handbook.pdf",
        "content": build_pdf(PAGES, outline=OUTLINE),
        "media_type": PDF,
        "tenant_id": "acme",
    }
    return SourceDocument(**{**fields, **changes})  # type: ignore[arg-type]


def test_text_is_extracted_page_by_page_under_the_outline_headings() -> None:
    sections = pdf_sections(build_pdf(PAGES, outline=OUTLINE), DocumentLimits()).sections

    assert [s.page_number for s in sections] == [1, 2, 3, 4]
    assert [s.heading for s in sections] == ["Introduction", "Time off", "Money", "IT"]
    for section, lines in zip(sections, PAGES, strict=True):
        assert section.text.split() == " ".join(lines).split()


def test_pages_before_the_first_outline_entry_have_no_heading() -> None:
    sections = pdf_sections(build_pdf(PAGES, outline=[("Money", 2)]), DocumentLimits()).sections

    assert [s.heading for s in sections] == [None, None, "Money", "Money"]


def test_blank_pages_are_skipped_but_keep_the_numbering() -> None:
    sections = sections_of(handbook(content=build_pdf([PAGES[0], [], PAGES[2]])))

    assert [s.page_number for s in sections] == [1, 3]


def test_unreadable_pdfs_are_invalid_requests() -> None:
    with pytest.raises(InvalidRequest, match="not a readable PDF"):
        pdf_sections(b"%PDF-1.7 this is not really a PDF", DocumentLimits())
    truncated = build_pdf(PAGES)[:300]
    with pytest.raises(InvalidRequest):
        pdf_sections(truncated, DocumentLimits())


async def test_ingested_pdf_chunks_carry_their_page_numbers(tmp_path: Path, embedder: MiniLMEmbedder, records: Backend) -> None:
    engine = EdgeEngine.open(tmp_path / "shard")
    try:
        schema = MetadataSchema(MetadataKeyStore(records), engine)
        indexer = Indexer(embedder, engine, schema, sources=SourceTrust.default(), chunk_tokens=40, overlap_tokens=8)
        result = await indexer.ingest(handbook())
        broken = await indexer.ingest(handbook(document_id="broken", content=b"%PDF-1.4 garbage"))

        assert result.error == "" and result.chunks_created == result.chunks_indexed >= 4
        assert "not a readable PDF" in broken.error and broken.chunks_indexed == 0
        for question, page, section in [
            ("How many vacation days do employees get?", 2, "Time off"),
            ("When are travel expenses reimbursed?", 3, "Money"),
            ("What must I do before opening the intranet?", 4, "IT"),
        ]:
            hits = await engine.query(RetrievalQuery(question, tenant_id="acme"), await embedder.embed_query(question), 1)
            assert (hits[0].chunk.page_number, hits[0].chunk.section) == (page, section)
            assert hits[0].chunk.document_name == "handbook.pdf"
    finally:
        await engine.close()


def test_pdf_files_are_found_with_their_title(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "Handbook 2026.pdf").write_bytes(build_pdf(PAGES, title="The 2026 Handbook"))
    (tmp_path / "docs" / "untitled.PDF").write_bytes(build_pdf(PAGES[:1]))
    (tmp_path / "docs" / "notes.md").write_text("# Notes\ntext")

    documents = source_documents_from_paths([tmp_path / "docs"], tenant_id="acme")

    assert [(d.document_id, d.media_type, d.title) for d in documents] == [
        ("handbook-2026", PDF, "The 2026 Handbook"),
        ("notes", "text/markdown", "Notes"),
        ("untitled", PDF, "untitled"),
    ]
