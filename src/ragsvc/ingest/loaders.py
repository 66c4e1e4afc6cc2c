"""Turn source documents into sections of text: plain text is one section, Markdown one per ATX heading, PDF one
per page (with the page number, under the PDF outline's entry for that page)."""

from __future__ import annotations

import hashlib
import io
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pypdf

from ragsvc.domain import SourceDocument
from ragsvc.errors import FieldViolation, InvalidRequest

PLAIN = "text/plain"
MARKDOWN = "text/markdown"
PDF = "application/pdf"
MEDIA_TYPES = {".txt": PLAIN, ".md": MARKDOWN, ".markdown": MARKDOWN, ".pdf": PDF}
_log = logging.getLogger(__name__)

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True, slots=True)
class Section:
    """A run of text under one heading (None before the first heading, and for plain text)."""

    text: str
    heading: str | None = None
    page_number: int | None = None


def load_sections(document: SourceDocument) -> list[Section]:
    """The document's non-empty sections. Raises InvalidRequest for an unsupported media type and
    UnicodeDecodeError for content that is not UTF-8."""
    media_type = document.media_type.split(";")[0].strip().lower()  # "text/markdown; charset=utf-8"
    if media_type == PLAIN:
        text = _decode(document.content)
        return [Section(text)] if text.strip() else []
    if media_type == MARKDOWN:
        return [s for s in _markdown_sections(_decode(document.content)) if s.text.strip()]
    if media_type == PDF:
        return [s for s in pdf_sections(document.content) if s.text.strip()]
    violation = f"unsupported media type {document.media_type!r}; use {PLAIN}, {MARKDOWN} or {PDF}"
    raise InvalidRequest([FieldViolation("documents[].media_type", violation)])


def pdf_sections(content: bytes) -> list[Section]:
    """One section per page, numbered from 1, headed by the title of the PDF outline (bookmark) entry that covers
    the page, if any. Raises InvalidRequest for content that is not a readable PDF (broken, or encrypted with a
    password)."""
    reader = _pdf_reader(content)
    try:
        headings = _outline_headings(reader)
        return [
            Section(_page_text(page), headings.get(number), number)
            for number, page in enumerate(reader.pages, start=1)
        ]
    except InvalidRequest:
        raise
    except Exception as exc:  # pypdf raises many kinds of errors on damaged files
        raise InvalidRequest([FieldViolation("documents[].content", f"cannot read the PDF: {exc}")]) from exc


def pdf_title(content: bytes) -> str | None:
    """The PDF's document-information title, if it has one."""
    try:
        metadata = _pdf_reader(content).metadata
        title = metadata.title if metadata is not None else None
    except Exception:  # noqa: BLE001 - pypdf raises anything on a damaged file; it is reported when ingested
        return None
    return title.strip() if isinstance(title, str) and title.strip() else None


def _pdf_reader(content: bytes) -> pypdf.PdfReader:
    try:
        reader = pypdf.PdfReader(io.BytesIO(content))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidRequest([FieldViolation("documents[].content", "the PDF is encrypted with a password")])
    except InvalidRequest:
        raise
    except Exception as exc:
        raise InvalidRequest([FieldViolation("documents[].content", f"not a readable PDF: {exc}")]) from exc
    return reader


def _page_text(page: pypdf.PageObject) -> str:
    text = page.extract_text() or ""
    return text.replace("\x00", "")


def _outline_headings(reader: pypdf.PdfReader) -> dict[int, str]:
    """Page number -> title of the last outline entry starting on or before that page (best effort: a broken
    outline gives no headings rather than no document)."""
    starts: list[tuple[int, int, str]] = []  # (page number, order in the outline, title)

    def walk(items: Any) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item)
                continue
            page = reader.get_destination_page_number(item)
            title = str(getattr(item, "title", "") or "").strip()
            if page is not None and page >= 0 and title:
                starts.append((page + 1, len(starts), title))

    try:
        walk(reader.outline)
    except Exception as exc:  # noqa: BLE001 - pypdf raises anything on a damaged outline
        _log.warning("ignoring an unreadable PDF outline: %s", exc)
        return {}
    headings: dict[int, str] = {}
    current: str | None = None
    ordered = sorted(starts)
    next_start = 0
    for number in range(1, len(reader.pages) + 1):
        while next_start < len(ordered) and ordered[next_start][0] <= number:
            current = ordered[next_start][2]
            next_start += 1
        if current is not None:
            headings[number] = current
    return headings


def _decode(content: bytes) -> str:
    return content.decode("utf-8-sig")


def _markdown_sections(text: str) -> Iterator[Section]:
    heading: str | None = None
    lines: list[str] = []
    for line, match in _lines_with_headings(text):
        if match is None:
            lines.append(line)
            continue
        yield Section("\n".join(lines).strip(), heading)
        heading, lines = (match.group(2) or "").strip() or None, []
    yield Section("\n".join(lines).strip(), heading)


def markdown_title(text: str) -> str | None:
    """The text of the first level-1 heading, if any."""
    for _, match in _lines_with_headings(text):
        if match is not None and len(match.group(1)) == 1 and match.group(2):
            return match.group(2).strip()
    return None


def _lines_with_headings(text: str) -> Iterator[tuple[str, re.Match[str] | None]]:
    """Each line, with its ATX heading match (never for lines inside fenced code blocks)."""
    fence: str | None = None
    for line in text.splitlines():
        marker = _FENCE.match(line)
        if fence is None and marker:
            fence = marker.group(1)
        elif fence is not None and marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
            fence = None
        elif fence is None:
            yield line, _HEADING.match(line)
            continue
        yield line, None


def source_documents_from_paths(
    paths: Sequence[Path], *, tenant_id: str, tags: Sequence[str] = ()
) -> list[SourceDocument]:
    """SourceDocuments for the .txt, .md and .pdf files among `paths` (directories are searched recursively, in sorted
    order). Raises InvalidRequest for a named file of another type or two files with the same document id, and
    OSError when a file cannot be read."""
    documents: dict[str, SourceDocument] = {}
    for file in _files(paths):
        document_id = slugify(file.stem)
        if document_id in documents:
            clash = f"its document id {document_id!r} is also that of {documents[document_id].name}"
            raise InvalidRequest([FieldViolation(str(file), clash)])
        content = file.read_bytes()
        media_type = MEDIA_TYPES[file.suffix.lower()]
        # Undecodable content is reported when the document is ingested; here it only costs the title.
        title = None
        if media_type == MARKDOWN:
            title = markdown_title(content.decode("utf-8-sig", errors="replace"))
        elif media_type == PDF:
            title = pdf_title(content)
        documents[document_id] = SourceDocument(
            document_id=document_id,
            name=file.name,
            content=content,
            media_type=media_type,
            tenant_id=tenant_id,
            tags=tuple(tags),
            title=title or file.stem,
        )
    return list(documents.values())


def slugify(name: str) -> str:
    """Lowercase letters, digits and single dashes: "Refund Policy (v2)" -> "refund-policy-v2"; a name with none
    of them gets a short hash."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or hashlib.sha1(name.encode()).hexdigest()[:12]


def _files(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in MEDIA_TYPES)
        elif path.suffix.lower() in MEDIA_TYPES:
            yield path
        else:
            raise InvalidRequest([FieldViolation(str(path), f"not a directory or a {'/'.join(MEDIA_TYPES)} file")])
