""".docx (Word) to sections, read with python-docx: one per heading paragraph (the styles "Title" and "Heading
1".."Heading 9", and styles based on them), headed by its text. Paragraphs are the blocks of a section's text, list
paragraphs start with "- ", and a table is one line per row ("| a | b |", a merged cell once), as the HTML loader
writes them. A part of the package (a ZIP file) that would unpack to more than RAG_INGEST_MAX_DECOMPRESSED_BYTES is
refused before it is read."""

from __future__ import annotations

import io
import zipfile

import docx
from docx.document import Document
from docx.styles.style import CharacterStyle
from docx.table import Table
from docx.text.paragraph import Paragraph

from ragsvc.errors import InvalidRequest
from ragsvc.ingest.decoding import looks_like, not_text, unreadable
from ragsvc.ingest.limits import MAX_DECOMPRESSED_BYTES, Deadline, DocumentLimits, exceeded
from ragsvc.ingest.media import DOCX
from ragsvc.ingest.sections import Loaded, Section, joined

_CHECK_EVERY = 256  # paragraphs and tables between two looks at the deadline
_STYLE_DEPTH = 8  # base styles followed to find a heading style


def docx_sections(content: bytes, limits: DocumentLimits, *, deadline: Deadline | None = None) -> Loaded:
    """The document's non-empty sections (see the module's docstring). Raises InvalidRequest for content that is
    not a readable .docx, DocumentLimitExceeded past a limit."""
    document = _open(content, limits)
    try:
        return Loaded(_sections(document, deadline))
    except InvalidRequest:
        raise
    except Exception as exc:  # a damaged part shows only when it is read
        raise unreadable(f"is not a readable .docx file: {exc}") from exc


def _sections(document: Document, deadline: Deadline | None) -> list[Section]:
    sections: list[Section] = []
    heading: str | None = None
    blocks: list[tuple[str, str]] = []  # (kind, text), see `joined`
    for number, item in enumerate(document.iter_inner_content()):
        if deadline is not None and number % _CHECK_EVERY == _CHECK_EVERY - 1:
            deadline.check()
        if isinstance(item, Table):
            blocks += [("row", row) for row in _rows(item)]
            continue
        text = " ".join(item.text.split())
        if not text:
            continue
        if _heading_level(item) is not None:
            sections.append(Section(joined(blocks), heading))
            heading, blocks = text, []
        else:
            blocks.append(("item", f"- {text}") if _is_list(item) else ("paragraph", text))
    sections.append(Section(joined(blocks), heading))
    return [s for s in sections if s.text.strip()]


def docx_title(content: bytes, limits: DocumentLimits = DocumentLimits()) -> str | None:
    """The document's title property, else its first "Title" or level-1 heading; None for a document that cannot
    be read (it is reported when the document is ingested)."""
    try:
        document = _open(content, limits)
        if title := " ".join((document.core_properties.title or "").split()):
            return title
        for paragraph in document.paragraphs:
            if _heading_level(paragraph) in (0, 1) and (text := " ".join(paragraph.text.split())):
                return text
    except Exception:  # noqa: BLE001 - a damaged file is reported when it is ingested; here it only costs the title
        return None
    return None


def _open(content: bytes, limits: DocumentLimits) -> Document:
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as package:
            for member in package.infolist():
                if member.file_size > limits.decompressed_bytes:
                    found = f"has a part ({member.filename}) that unpacks to {member.file_size:,} bytes"
                    raise exceeded(MAX_DECOMPRESSED_BYTES, limits.decompressed_bytes, found)
    except zipfile.BadZipFile as exc:
        what = looks_like(content)
        raise (not_text(what, DOCX) if what else unreadable(f"is not a .docx file (a ZIP package): {exc}")) from exc
    try:
        return docx.Document(io.BytesIO(content))
    except Exception as exc:  # python-docx, lxml and zipfile raise many kinds of errors on damaged files
        raise unreadable(f"is not a readable .docx file: {exc}") from exc


def _heading_level(paragraph: Paragraph) -> int | None:
    """0 for a "Title" paragraph, N for a "Heading N" one (or one whose style is based on them), else None."""
    style: CharacterStyle | None = paragraph.style
    for _ in range(_STYLE_DEPTH):
        if style is None:
            return None
        name = (style.name or "").strip().lower()
        if name == "title":
            return 0
        level = name.removeprefix("heading").strip()
        if name.startswith("heading") and level.isdigit():
            return int(level)
        style = style.base_style
    return None


def _is_list(paragraph: Paragraph) -> bool:
    """A paragraph of a bulleted or numbered list: a "List ..." style, or numbering of its own."""
    style = paragraph.style
    if style is not None and (style.name or "").lower().startswith("list"):
        return True
    properties = paragraph._p.pPr  # python-docx has no public accessor for a paragraph's numbering
    return properties is not None and properties.numPr is not None


def _rows(table: Table) -> list[str]:
    """Each row with text as "| a | b |"; a cell merged over several columns once."""
    lines = []
    for row in table.rows:
        cells = []
        seen: list[object] = []
        for cell in row.cells:
            if any(cell._tc is other for other in seen):  # a merged cell is repeated for each column it spans
                continue
            seen.append(cell._tc)
            cells.append(" ".join(cell.text.split()).replace("|", "\\|"))
        if any(cells):
            lines.append("| " + " | ".join(cells) + " |")
    return lines
