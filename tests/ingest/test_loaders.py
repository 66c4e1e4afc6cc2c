from __future__ import annotations

from pathlib import Path

import pytest

from ragsvc.domain import SourceDocument
from ragsvc.errors import InvalidRequest
from ragsvc.ingest.loaders import (
    Section,
    load_sections,
    slugify,
    source_documents_from_paths,
)


def markdown(text: str) -> SourceDocument:
    return SourceDocument("doc", "doc.md", text.encode(), media_type="text/markdown")


def test_plain_text_is_one_section() -> None:
    document = SourceDocument("doc", "doc.txt", b"# not a heading\nJust text.\n", media_type="text/plain")

    assert load_sections(document) == [Section("# not a heading\nJust text.\n")]


def test_markdown_has_a_section_per_atx_heading() -> None:
    text = "Intro line.\n\n# Title\nFirst.\n\n## Setup ##\nSecond.\n###### Deep\nThird.\n#hashtag is text\n"

    assert load_sections(markdown(text)) == [
        Section("Intro line.", None),
        Section("First.", "Title"),
        Section("Second.", "Setup"),
        Section("Third.\n#hashtag is text", "Deep"),
    ]


def test_hash_lines_inside_fenced_code_are_not_headings() -> None:
    text = "# Install\n```bash\n# comment in code\necho hi\n```\n~~~\n# also code\n~~~\nAfter.\n# Use\nRun it."

    assert load_sections(markdown(text)) == [
        Section("```bash\n# comment in code\necho hi\n```\n~~~\n# also code\n~~~\nAfter.", "Install"),
        Section("Run it.", "Use"),
    ]


def test_sections_without_text_are_dropped() -> None:
    assert load_sections(markdown("# Empty\n\n## Also empty\n   \n## Full\nText")) == [Section("Text", "Full")]
    assert load_sections(SourceDocument("doc", "doc.txt", b"  \n")) == []


def test_a_media_type_parameter_is_ignored() -> None:
    document = SourceDocument("doc", "doc.md", b"# A\nB", media_type="text/markdown; charset=utf-8")

    assert load_sections(document) == [Section("B", "A")]


def test_an_unsupported_media_type_is_an_invalid_request() -> None:
    document = SourceDocument("doc", "doc.docx", b"PK\x03\x04", media_type="application/msword")

    with pytest.raises(InvalidRequest) as caught:
        load_sections(document)

    assert [v.field for v in caught.value.violations] == ["documents[].media_type"]
    assert "application/msword" in caught.value.violations[0].description


def test_undecodable_content_raises_a_decode_error() -> None:
    with pytest.raises(UnicodeDecodeError):
        load_sections(SourceDocument("doc", "doc.txt", b"\xff\xfe\xfa"))


def test_documents_from_paths_walk_directories_in_sorted_order(tmp_path: Path) -> None:
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "Getting Started.md").write_text("Preface\n# Getting started with Acme\nText")
    (tmp_path / "b_notes.txt").write_text("plain notes")
    (tmp_path / "a_faq.md").write_text("## Not a title\nNo H1 here")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    single = tmp_path / "guides" / "Getting Started.md"

    documents = source_documents_from_paths([tmp_path], tenant_id="acme", tags=["staff"])

    assert [(d.document_id, d.name, d.media_type, d.title) for d in documents] == [
        ("a-faq", "a_faq.md", "text/markdown", "a_faq"),
        ("b-notes", "b_notes.txt", "text/plain", "b_notes"),
        ("getting-started", "Getting Started.md", "text/markdown", "Getting started with Acme"),
    ]
    assert {(d.tenant_id, d.tags) for d in documents} == {("acme", ("staff",))}
    assert documents[1].content == b"plain notes"
    assert [d.document_id for d in source_documents_from_paths([single], tenant_id="acme")] == ["getting-started"]


def test_a_named_file_of_another_type_is_refused(tmp_path: Path) -> None:
    (tmp_path / "scan.docx").write_bytes(b"PK")

    with pytest.raises(InvalidRequest):
        source_documents_from_paths([tmp_path / "scan.docx"], tenant_id="acme")


def test_two_files_with_the_same_document_id_are_refused(tmp_path: Path) -> None:
    (tmp_path / "FAQ.md").write_text("a")
    (tmp_path / "faq.txt").write_text("b")

    with pytest.raises(InvalidRequest, match="faq"):
        source_documents_from_paths([tmp_path], tenant_id="acme")


def test_slugs_are_lowercase_letters_digits_and_dashes() -> None:
    assert slugify("Refund Policy (v2)") == "refund-policy-v2"
    assert slugify("__Ops--Runbook__") == "ops-runbook"
    assert len(slugify("日本語")) == 12
