"""Turn source documents into sections of text, each format by its own module: plain text is one section,
Markdown one per ATX heading, reStructuredText one per section, HTML one per heading element, .docx one per heading
paragraph, PDF one per page, CSV/TSV one per group of rows. Text is decoded as `decoding` says, and every document
is read within the limits of `limits`. Also: finding the files of a folder to ingest, and reading one file as a
document."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragsvc.domain import SourceDocument
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.ingest.decoding import decode_text
from ragsvc.ingest.delimited import delimited_sections
from ragsvc.ingest.html import html_sections, html_title
from ragsvc.ingest.limits import Deadline, DocumentLimits, check_lines
from ragsvc.ingest.markdown import markdown_sections, markdown_title
from ragsvc.ingest.media import CSV, DOCX, HTML, MARKDOWN, MEDIA_TYPES, PDF, RST, TSV, parse_media_type
from ragsvc.ingest.pdf import pdf_sections, pdf_title
from ragsvc.ingest.rst import rst_sections, rst_title
from ragsvc.ingest.sections import Loaded, Section
from ragsvc.ingest.word import docx_sections, docx_title
from ragsvc.sanitize import validate_document_id


def load_document(document: SourceDocument, limits: DocumentLimits, *, chunk_tokens: int, deadline: Deadline) -> Loaded:
    """The document's non-empty sections and the encoding of its text, read by `deadline` (RAG_INGEST_PARSE_SECONDS
    from when the document was taken up). `chunk_tokens` bounds a CSV/TSV section.
    Raises InvalidRequest for a document that cannot be read (an unsupported media type, content that is not in
    its format), DocumentLimitExceeded past a limit."""
    try:
        media = parse_media_type(document.media_type)
    except ValueError as exc:
        raise InvalidRequest([FieldViolation("media_type", str(exc))]) from None
    content = document.content
    if media.essence == PDF:
        return pdf_sections(content, limits, deadline=deadline)
    if media.essence == DOCX:
        return docx_sections(content, limits, deadline=deadline)
    if media.essence == HTML:
        return html_sections(content, limits, charset=media.charset, deadline=deadline)
    decoded = decode_text(content, media.essence, charset=media.charset)
    text = decoded.text
    check_lines(text, limits.line_chars)
    sections: list[Section]
    if media.essence == MARKDOWN:
        sections = markdown_sections(text, deadline=deadline)
    elif media.essence == RST:
        sections = rst_sections(text, limits, deadline=deadline)
    elif media.essence in (CSV, TSV):
        sections = delimited_sections(text, media.essence, chunk_tokens=chunk_tokens, deadline=deadline)
    else:
        sections = [Section(text)] if text.strip() else []
    return Loaded(sections, decoded.encoding)


def source_documents_from_paths(paths: Sequence[Path], *, tenant_id: str, tags: Sequence[str] = ()) -> list[SourceDocument]:
    """All or nothing: the documents of every file `find_files` finds under `paths`. Raises InvalidRequest as
    `find_files` does, and for any file it could not give an id; OSError when a file cannot be read."""
    selection = find_files(paths)
    if selection.problems:
        raise InvalidRequest([FieldViolation(str(p.path), p.reason) for p in selection.problems])
    return [read_document(found, tenant_id=tenant_id, tags=tags) for found in selection.files]


def read_document(found: FoundFile, *, tenant_id: str, tags: Sequence[str] = ()) -> SourceDocument:
    """The file as a document to ingest, titled from its content where it has a title. Raises OSError when the
    file cannot be read."""
    content = found.path.read_bytes()
    media_type = MEDIA_TYPES[found.path.suffix.lower()]
    return SourceDocument(
        document_id=found.document_id,
        name=found.name,
        content=content,
        media_type=media_type,
        tenant_id=tenant_id,
        tags=tuple(tags),
        title=document_title(content, media_type) or found.path.stem,
    )


def document_title(content: bytes, media_type: str) -> str | None:
    """The title a document's content gives itself (a PDF's or .docx's title property, an HTML <title>, the first
    heading of Markdown or reStructuredText), if any. Content that cannot be read has none: that is reported when
    the document is ingested."""
    if media_type == PDF:
        return pdf_title(content)
    if media_type == DOCX:
        return docx_title(content)
    if media_type == HTML:
        return html_title(content)
    if media_type in (MARKDOWN, RST):
        try:
            text = decode_text(content, media_type).text
        except InvalidRequest:
            return None
        return markdown_title(text) if media_type == MARKDOWN else rst_title(text)
    return None


def slugify(name: str) -> str:
    """Lowercase letters, digits and single dashes: "Refund Policy (v2)" -> "refund-policy-v2"; a name with none
    of them gets a short hash."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or hashlib.sha1(name.encode()).hexdigest()[:12]


# -- finding the files of a folder ----------------------------------------------------------------------------

# Folders never entered when a folder is walked, besides hidden ones (".git", ".venv" ...) and virtualenvs (any
# folder holding a pyvenv.cfg): installed or vendored dependencies (Go's `vendor` holds copies of other modules'
# READMEs), build output (`dist`, `build`, Rust's and Maven's `target`), version control without a dot, caches.
SKIPPED_FOLDERS = frozenset(
    {
        "node_modules",
        "bower_components",
        "site-packages",
        "vendor",
        "dist",
        "build",
        "target",
        "__pycache__",
        "CVS",
        "_darcs",
    }
)
MAX_DOCUMENT_ID = 128


@dataclass(frozen=True, slots=True)
class FoundFile:
    """A file to ingest, the document id it gets, and its display name (its path in the folder walked, else its
    file name)."""

    path: Path
    document_id: str
    name: str
    size: int


@dataclass(frozen=True, slots=True)
class FileProblem:
    """A file found that cannot be ingested as it is, and why."""

    path: Path
    reason: str


@dataclass(slots=True)
class FileSelection:
    """What `find_files` found: the files to ingest (in order), those it could not give an id, and the folders
    skipped by default."""

    files: list[FoundFile]
    problems: list[FileProblem]
    skipped_folders: list[Path]


def find_files(
    paths: Sequence[Path],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    document_id: str | None = None,
) -> FileSelection:
    """The files among `paths` whose extension MEDIA_TYPES names (.txt, .md, .html, .pdf, .docx, .rst, .csv, .tsv
    ...); folders are walked in sorted order.

    A file named directly keeps its stem as document id ("Refund Policy.md" -> "refund-policy"), or `document_id`.
    A file found in a folder is named by its path relative to that folder, each part slugified and joined by dots
    ("guides/Getting Started.md" -> "guides.getting-started"), so files of the same name in different folders
    differ. Walking a folder skips hidden files and folders, virtualenvs and SKIPPED_FOLDERS; `exclude` globs
    leave out the files and folders whose relative path or name they match, and `include` globs, when given,
    take only the files they match (`*` matches across folders: "drafts/*", "*.pdf"). A later file whose id
    is taken is a problem, the others still go in.

    Raises InvalidRequest for a path that does not exist, a named file of another type, and `document_id` when
    the paths hold more (or less) than one file or it is not a valid id.
    """
    violations = [FieldViolation(str(p), "no such file or directory") for p in paths if not p.exists()]
    violations += [
        FieldViolation(str(p), f"not a directory or a {'/'.join(MEDIA_TYPES)} file")
        for p in paths
        if p.exists() and not p.is_dir() and p.suffix.lower() not in MEDIA_TYPES
    ]
    if violations:
        raise InvalidRequest(violations)
    selection = FileSelection([], [], [])
    owners: dict[str, Path] = {}
    for path in paths:
        found = [(path, path.name, slugify(path.stem))] if not path.is_dir() else _walk(path, include, exclude, selection)
        for file, name, file_id in found:
            if document_id is not None:
                file_id = document_id
            if file_id in owners:
                if owners[file_id] != file:  # the same file named twice is taken once
                    clash = (
                        f"its document id {file_id!r} is also that of {owners[file_id]}: leave one out with "
                        "--exclude, or ingest it alone with --id"
                    )
                    selection.problems.append(FileProblem(file, clash))
                continue
            owners[file_id] = file
            selection.files.append(FoundFile(file, file_id, name, file.stat().st_size))
    if document_id is not None:
        validate_document_id(document_id)
        if (count := len(selection.files) + len(selection.problems)) != 1:
            raise InvalidRequest([FieldViolation("--id", f"names one file; the paths hold {count}")])
    return selection


def _walk(root: Path, include: Sequence[str], exclude: Sequence[str], selection: FileSelection) -> list[tuple[Path, str, str]]:
    """(file, name, document id) of each file to take under `root`, in sorted order."""
    found: list[tuple[Path, str, str]] = []
    for folder, subfolders, names in os.walk(root):
        base = Path(folder)
        kept = []
        for name in sorted(subfolders):
            sub = base / name
            relative = sub.relative_to(root).as_posix()
            if _matches(relative, name, exclude):
                continue
            if name.startswith(".") or name in SKIPPED_FOLDERS or (sub / "pyvenv.cfg").exists():
                selection.skipped_folders.append(sub)
                continue
            kept.append(name)
        subfolders[:] = kept  # os.walk enters only these, in this order
        for name in sorted(names):
            file = base / name
            relative = file.relative_to(root).as_posix()
            if name.startswith(".") or file.suffix.lower() not in MEDIA_TYPES or not file.is_file():
                continue
            if _matches(relative, name, exclude) or (include and not _matches(relative, name, include)):
                continue
            found.append((file, relative, _relative_id(file.relative_to(root))))
    return sorted(found, key=lambda item: item[1].split("/"))


def _matches(relative: str, name: str, patterns: Sequence[str]) -> bool:
    """True when a glob matches the relative path or the name ("**/x" also matches "x" at the top)."""
    for pattern in patterns:
        candidates = [pattern, pattern[3:]] if pattern.startswith("**/") else [pattern]
        if any(fnmatch.fnmatchcase(relative, p) or fnmatch.fnmatchcase(name, p) for p in candidates):
            return True
    return False


def _relative_id(relative: Path) -> str:
    """ "guides/Getting Started.md" -> "guides.getting-started"; shortened with a hash beyond 128 characters."""
    parts = [slugify(part) for part in relative.parts[:-1]] + [slugify(relative.stem)]
    document_id = ".".join(parts)
    if len(document_id) > MAX_DOCUMENT_ID:
        digest = hashlib.sha1(relative.as_posix().encode()).hexdigest()[:12]
        document_id = f"{document_id[: MAX_DOCUMENT_ID - len(digest) - 1]}-{digest}"
    return document_id
