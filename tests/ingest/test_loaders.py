from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragsvc.domain import SourceDocument
from ragsvc.errors import InvalidRequest
from ragsvc.ingest.loaders import find_files, slugify, source_documents_from_paths
from ragsvc.ingest.sections import Section
from tests.ingest.reading import sections_of


def markdown(text: str) -> SourceDocument:
    return SourceDocument("doc", "doc.md", text.encode(), media_type="text/markdown")


def test_plain_text_is_one_section() -> None:
    document = SourceDocument("doc", "doc.txt", b"# not a heading\nJust text.\n", media_type="text/plain")

    assert sections_of(document) == [Section("# not a heading\nJust text.\n")]


def test_markdown_has_a_section_per_atx_heading() -> None:
    text = "Intro line.\n\n# Title\nFirst.\n\n## Setup ##\nSecond.\n###### Deep\nThird.\n#hashtag is text\n"

    assert sections_of(markdown(text)) == [
        Section("Intro line.", None),
        Section("First.", "Title"),
        Section("Second.", "Setup"),
        Section("Third.\n#hashtag is text", "Deep"),
    ]


def test_hash_lines_inside_fenced_code_are_not_headings() -> None:
    text = "# Install\n```bash\n# comment in code\necho hi\n```\n~~~\n# also code\n~~~\nAfter.\n# Use\nRun it."

    assert sections_of(markdown(text)) == [
        Section("```bash\n# comment in code\necho hi\n```\n~~~\n# also code\n~~~\nAfter.", "Install"),
        Section("Run it.", "Use"),
    ]


def test_sections_without_text_are_dropped() -> None:
    assert sections_of(markdown("# Empty\n\n## Also empty\n   \n## Full\nText")) == [Section("Text", "Full")]
    assert sections_of(SourceDocument("doc", "doc.txt", b"  \n")) == []


def test_a_media_type_parameter_is_ignored() -> None:
    document = SourceDocument("doc", "doc.md", b"# A\nB", media_type="text/markdown; charset=utf-8")

    assert sections_of(document) == [Section("B", "A")]


def test_an_unsupported_media_type_is_an_invalid_request() -> None:
    document = SourceDocument("doc", "doc.docx", b"PK\x03\x04", media_type="application/msword")

    with pytest.raises(InvalidRequest) as caught:
        sections_of(document)

    assert [v.field for v in caught.value.violations] == ["media_type"]
    assert "application/msword" in caught.value.violations[0].description


def test_content_marked_utf16_that_is_not_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequest) as caught:
        sections_of(SourceDocument("doc", "doc.txt", b"\xff\xfe\xfa"))
    assert caught.value.message == "content starts with a UTF-16LE byte-order mark but is not valid UTF-16LE"


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
        ("guides.getting-started", "guides/Getting Started.md", "text/markdown", "Getting started with Acme"),
    ]
    assert {(d.tenant_id, d.tags) for d in documents} == {("acme", ("staff",))}
    assert documents[1].content == b"plain notes"
    assert [d.document_id for d in source_documents_from_paths([single], tenant_id="acme")] == ["getting-started"]


def test_a_named_file_of_another_type_is_refused(tmp_path: Path) -> None:
    (tmp_path / "scan.xlsx").write_bytes(b"PK")

    with pytest.raises(InvalidRequest):
        source_documents_from_paths([tmp_path / "scan.xlsx"], tenant_id="acme")


def test_two_files_with_the_same_document_id_are_refused(tmp_path: Path) -> None:
    (tmp_path / "FAQ.md").write_text("a")
    (tmp_path / "faq.txt").write_text("b")

    with pytest.raises(InvalidRequest, match="faq"):
        source_documents_from_paths([tmp_path], tenant_id="acme")


def test_slugs_are_lowercase_letters_digits_and_dashes() -> None:
    assert slugify("Refund Policy (v2)") == "refund-policy-v2"
    assert slugify("__Ops--Runbook__") == "ops-runbook"
    assert len(slugify("日本語")) == 12


def write(root: Path, *relative: str) -> None:
    for name in relative:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"# {name}\n\nText of {name}.\n")


def test_files_of_the_same_name_in_different_folders_get_different_ids(tmp_path: Path) -> None:
    write(tmp_path, "team-a/notes.md", "team-b/notes.md", "notes.md", "team-a/2026/Q1 plan.md")

    selection = find_files([tmp_path])

    assert [(f.document_id, f.name) for f in selection.files] == [
        ("notes", "notes.md"),
        ("team-a.2026.q1-plan", "team-a/2026/Q1 plan.md"),
        ("team-a.notes", "team-a/notes.md"),
        ("team-b.notes", "team-b/notes.md"),
    ]
    assert not selection.problems and not selection.skipped_folders


def test_hidden_dependency_build_and_virtualenv_folders_are_skipped(tmp_path: Path) -> None:
    write(
        tmp_path,
        "README.md",
        "node_modules/pkg/README.md",
        ".git/description.txt",
        ".hidden.md",
        "env/lib/site.md",
        "sub/__pycache__/x.txt",
        "sub/kept.txt",
        "go/vendor/modules.txt",
        "dist/pkg.md",
        "build/html/index.html",
        "rust/target/doc/readme.md",
        "builds/kept.md",
    )
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")

    selection = find_files([tmp_path])

    assert [f.name for f in selection.files] == ["README.md", "builds/kept.md", "sub/kept.txt"]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in selection.skipped_folders) == [
        ".git",
        "build",
        "dist",
        "env",
        "go/vendor",
        "node_modules",
        "rust/target",
        "sub/__pycache__",
    ]
    # A skipped folder named as a path is ingested.
    assert [f.name for f in find_files([tmp_path / "node_modules"]).files] == ["pkg/README.md"]


def test_include_and_exclude_globs_match_the_path_in_the_folder_or_the_name(tmp_path: Path) -> None:
    write(tmp_path, "guide.md", "drafts/idea.md", "archive/2019.pdf", "archive/2024.md", "notes.txt")

    def names(**globs: list[str]) -> list[str]:
        return [f.name for f in find_files([tmp_path], **globs).files]  # type: ignore[arg-type]

    assert names(exclude=["drafts"]) == ["archive/2019.pdf", "archive/2024.md", "guide.md", "notes.txt"]
    assert names(exclude=["archive/*.pdf", "*.txt"]) == ["archive/2024.md", "drafts/idea.md", "guide.md"]
    assert names(include=["*.md"], exclude=["drafts/*"]) == ["archive/2024.md", "guide.md"]
    assert names(include=["**/2024.md"]) == ["archive/2024.md"]


def test_a_single_file_takes_the_id_it_is_given(tmp_path: Path) -> None:
    write(tmp_path, "Refund Policy.md", "other.md")

    [found] = find_files([tmp_path / "Refund Policy.md"], document_id="refunds-2026").files
    assert (found.document_id, found.name) == ("refunds-2026", "Refund Policy.md")
    with pytest.raises(InvalidRequest, match="names one file; the paths hold 2"):
        find_files([tmp_path], document_id="refunds-2026")
    with pytest.raises(InvalidRequest, match="document_id"):
        find_files([tmp_path / "other.md"], document_id="not an id!")


def test_a_path_that_does_not_exist_says_so(tmp_path: Path) -> None:
    write(tmp_path, "there.md")
    with pytest.raises(InvalidRequest) as caught:
        find_files([tmp_path / "there.md", tmp_path / "missing", tmp_path / "gone.md"])
    assert [(v.field, v.description) for v in caught.value.violations] == [
        (str(tmp_path / "missing"), "no such file or directory"),
        (str(tmp_path / "gone.md"), "no such file or directory"),
    ]


def test_a_clash_is_a_problem_of_the_later_file_only(tmp_path: Path) -> None:
    write(tmp_path, "FAQ.md", "faq.txt", "other.md")
    selection = find_files([tmp_path])
    assert [f.name for f in selection.files] == ["FAQ.md", "other.md"]
    [problem] = selection.problems
    assert problem.path == tmp_path / "faq.txt" and "'faq' is also that of" in problem.reason


def test_ids_of_deep_paths_are_shortened_with_a_hash(tmp_path: Path) -> None:
    deep = "/".join(["a-rather-long-folder-name"] * 8) + "/page.md"
    write(tmp_path, deep, deep.replace("page.md", "other.md"))
    ids = [f.document_id for f in find_files([tmp_path]).files]
    assert len(set(ids)) == 2 and all(len(i) <= 128 for i in ids)
    assert all(re.fullmatch(r"[a-z0-9.-]+-[0-9a-f]{12}", i) for i in ids)
