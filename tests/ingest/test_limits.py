"""Each limit of reading a document (ingest/limits.py) stops a document past it with DocumentLimitExceeded naming
its setting; documents within the limits are read as before. The hostile inputs the issue met are refused or read
at once rather than in 90 s of CPU (the loose time bounds here are properties, not speed measurements: see
bench/hostile_inputs.py for those)."""

from __future__ import annotations

import io
import time

import docx
import pytest

from ragsvc.domain import SourceDocument
from ragsvc.errors import DocumentLimitExceeded
from ragsvc.ingest.indexer import Indexer
from ragsvc.ingest.limits import ChunkLimit, DocumentLimits
from ragsvc.ingest.sections import Section
from ragsvc.source_trust import SourceTrust
from tests.ingest.pdfs import build_inflating_pdf, build_pdf
from tests.ingest.reading import loaded, sections_of

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
BOUND_S = 10.0  # what "at once" means here, with room for a loaded machine: the inputs took 8-90 s before


def read(content: bytes | str, media_type: str, **limits: float) -> list[Section]:
    data = content.encode() if isinstance(content, str) else content
    document = SourceDocument("d", "d", data, media_type=media_type)
    return loaded(document, DocumentLimits(**limits)).sections  # type: ignore[arg-type]


def refused(content: bytes | str, media_type: str, **limits: float) -> DocumentLimitExceeded:
    started = time.monotonic()
    with pytest.raises(DocumentLimitExceeded) as caught:
        read(content, media_type, **limits)
    assert time.monotonic() - started < BOUND_S
    assert [v.field for v in caught.value.violations] == ["content"]
    assert caught.value.reason == "DOCUMENT_LIMIT_EXCEEDED"
    return caught.value


def test_the_issues_200000_nested_divs_are_refused_before_parsing() -> None:
    page = "<html><body>" + "<div>" * 200_000 + "deep" + "</div>" * 200_000 + "</body></html>"
    assert len(page) > 2_200_000
    error = refused(page, "text/html")
    assert error.message == ("content nests HTML elements more than 1,000 deep; the limit is RAG_INGEST_MAX_HTML_DEPTH=1000")
    assert error.metadata == {"limit": "RAG_INGEST_MAX_HTML_DEPTH", "maximum": "1000"}


def test_html_depth_counts_what_the_parser_nests() -> None:
    """Unclosed elements whose end tag is optional (p, li, td ...) add no depth; script text is not markup; inside
    SVG "<x/>" closes itself; elsewhere "<div/>" opens a div, as HTML5 parsers do."""
    many = 5000
    assert len(read("<ul>" + "<li><p>item" * many + "</ul>", "text/html")) == 1
    assert read("<script>" + "<div>" * many + "</script><p>after</p>", "text/html") == [Section("after")]
    assert read("<p>icon</p><svg>" + "<path/>" * many + "</svg>", "text/html") == [Section("icon")]
    assert refused("<div/>" * many, "text/html").metadata["limit"] == "RAG_INGEST_MAX_HTML_DEPTH"
    assert read("<div>" * 50 + "<p>nested</p>" + "</div>" * 50, "text/html", html_depth=60) == [Section("nested")]
    assert refused("<div>" * 50 + "x", "text/html", html_depth=40).metadata["maximum"] == "40"


def test_an_html_element_with_100000_attributes_is_refused_before_parsing() -> None:
    """lexbor checks each attribute against the element's others: 100,000 of them took 111 s."""
    page = "<div " + " ".join(f"a{i}=1" for i in range(100_000)) + ">text</div>"
    error = refused(page, "text/html")
    assert error.message.startswith("content has a <div> element with 100,000 attributes; the limit is")
    assert error.metadata["limit"] == "RAG_INGEST_MAX_HTML_ATTRIBUTES"
    long_values = '<img alt="' + "x" * 10_000 + '" src="data:image/png;base64,' + "A" * 100_000 + '"><p>kept</p>'
    assert read(long_values, "text/html") == [Section("kept")]


@pytest.mark.parametrize("media_type", ["text/plain", "text/markdown", "text/x-rst", "text/csv"])
def test_a_line_longer_than_the_limit_is_refused(media_type: str) -> None:
    text = "Title\n=====\n\n" + "word " * 30_000 + "\n"
    error = refused(text, media_type)
    assert error.message == ("content has a line of 150,000 characters (line 4); the limit is RAG_INGEST_MAX_LINE_CHARS=100000")
    assert read(text, media_type, line_chars=200_000)


def test_a_markdown_heading_line_of_spaces_is_read_in_linear_time() -> None:
    """The old heading pattern backtracked: 20,000 spaces in one heading line took 8 s, twice that four times as
    long."""
    started = time.monotonic()
    sections = read("# a" + " \t" * 40_000 + "b\n\nbody", "text/markdown")
    assert time.monotonic() - started < BOUND_S
    assert sections[0].text == "body" and sections[0].heading is not None and sections[0].heading.endswith("b")


def test_a_pdf_stream_inflating_past_the_limit_is_refused() -> None:
    bomb = build_inflating_pdf(40 * 1024 * 1024)  # ~40 KB on the wire
    error = refused(bomb, "application/pdf")
    assert error.message == (
        "content has a PDF stream that decompresses to more than 33,554,432 bytes; "
        "the limit is RAG_INGEST_MAX_DECOMPRESSED_BYTES=33554432"
    )
    assert refused(build_inflating_pdf(2_000_000), "application/pdf", decompressed_bytes=1_000_000)
    assert read(build_inflating_pdf(2_000_000), "application/pdf") == []  # within the limit: read (no font: no text)


def test_a_docx_part_unpacking_past_the_limit_is_refused() -> None:
    document = docx.Document()
    document.add_paragraph("Hotels are reimbursed up to 180 euros a night.")
    buffer = io.BytesIO()
    document.save(buffer)
    assert read(buffer.getvalue(), DOCX) == [Section("Hotels are reimbursed up to 180 euros a night.")]
    error = refused(buffer.getvalue(), DOCX, decompressed_bytes=100_000)
    assert error.message.startswith("content has a part (word/")
    assert error.metadata["limit"] == "RAG_INGEST_MAX_DECOMPRESSED_BYTES"


def test_reading_past_the_parse_time_stops_at_the_next_step() -> None:
    pdf = build_pdf([[f"Page {n} says something."] for n in range(20)])
    assert len(read(pdf, "application/pdf")) == 20
    error = refused(pdf, "application/pdf", parse_seconds=1e-9)
    assert error.message == "content takes more than 1e-09 s to read; the limit is RAG_INGEST_PARSE_SECONDS=1e-09"


def test_a_document_of_more_chunks_than_its_limit_is_refused_before_the_rest_is_cut() -> None:
    indexer = Indexer(None, None, None, sources=SourceTrust.default(), chunk_tokens=40, overlap_tokens=0)  # type: ignore[arg-type]  # chunks() only
    words = " ".join(f"word{i}" for i in range(3000))
    document = SourceDocument("d", "d.txt", words.encode())
    chunks, encoding = indexer.chunks(document)
    assert len(chunks) > 100 and encoding == "UTF-8"
    limit = ChunkLimit(100, "RAG_INGEST_MAX_CALL_CHUNKS", "ingest it another way")
    with pytest.raises(DocumentLimitExceeded) as caught:
        indexer.chunks(document, limit)
    assert caught.value.message == (
        "content makes more than 100 chunks; the limit is RAG_INGEST_MAX_CALL_CHUNKS=100; ingest it another way"
    )
    small = Indexer(
        None,
        None,
        None,
        sources=SourceTrust.default(),
        chunk_tokens=40,
        overlap_tokens=0,  # type: ignore[arg-type]
        limits=DocumentLimits(chunks=50),
    )
    with pytest.raises(DocumentLimitExceeded, match="RAG_INGEST_MAX_CHUNKS=50"):
        small.chunks(document)


def test_documents_within_the_limits_read_as_before() -> None:
    assert sections_of(SourceDocument("d", "d.md", b"# One\n\nFirst.\n\n# Two\n\nSecond.", "text/markdown")) == [
        Section("First.", "One"),
        Section("Second.", "Two"),
    ]
