"""Turn source documents into sections of text: plain text is one section, Markdown one per ATX heading, HTML one
per heading element (h1-h6, page chrome dropped), PDF one per page (with the page number, under the PDF outline's
entry for that page)."""

from __future__ import annotations

import codecs
import fnmatch
import hashlib
import io
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pypdf
from selectolax.lexbor import LexborHTMLParser, LexborNode

from ragsvc.domain import SourceDocument
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.sanitize import validate_document_id

PLAIN = "text/plain"
MARKDOWN = "text/markdown"
PDF = "application/pdf"
HTML = "text/html"
MEDIA_TYPES = {".txt": PLAIN, ".md": MARKDOWN, ".markdown": MARKDOWN, ".pdf": PDF, ".html": HTML, ".htm": HTML}
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
    if media_type == HTML:
        return [s for s in html_sections(document.content) if s.text.strip()]
    violation = f"unsupported media type {document.media_type!r}; use {PLAIN}, {MARKDOWN}, {HTML} or {PDF}"
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


def html_sections(content: bytes) -> list[Section]:
    """One section per heading element (h1-h6), headed by its text; text before the first heading has no heading.

    Page chrome is dropped: scripts, styles, navigation (<nav>, role=navigation, navigation classes such as
    "navheader", "breadcrumb" or "toc"), the page's own <header>/<footer> (those of an <article>, <main> or
    <section> stay), forms and hidden elements. Paragraphs, list items ("- "), definition terms and descriptions,
    table rows ("| a | b |") and preformatted text (fenced with ```) become the blocks of a section's text, the way
    Markdown would write them. Raises UnicodeDecodeError for content neither UTF-8 nor in the charset it declares.
    """
    tree = LexborHTMLParser(_decode_html(content))
    writer = _HtmlWriter()
    top = tree.body or tree.root
    if top is not None:
        writer.walk(top)
    return writer.finish()


def html_title(content: bytes) -> str | None:
    """The page's <title>, else the text of its first <h1> outside the page chrome."""
    try:
        tree = LexborHTMLParser(_decode_html(content))
    except UnicodeDecodeError:  # reported when the document is ingested; here it only costs the title
        return None
    title = tree.css_first("title")
    if title is not None and (text := _collapse(title.text(deep=True))):
        return text
    for h1 in tree.css("h1"):
        if not _in_chrome(h1) and (text := _collapse(h1.text(deep=True))):
            return text
    return None


# Elements whose content is never text of the page.
_HTML_SKIPPED = frozenset(
    "head script style noscript template nav iframe object embed svg math canvas form button select textarea "
    "input dialog".split()
)
_HTML_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "search", "menu", "menubar"})
# Class or id tokens of navigation chrome in common site generators (DocBook's navheader/navfooter/toc, Publican's
# docnav, Sphinx's related/sphinxsidebar/footer, MkDocs and Bootstrap navbars, breadcrumbs, skip links). Not "sidebar":
# DocBook's and Sphinx's sidebars are boxes of the page's own text (tips, warnings, asides).
_HTML_CHROME_NAMES = frozenset(
    "navheader navfooter navbar navigation nav-menu breadcrumb breadcrumbs toc docnav sphinxsidebar related footer "
    "skip-link skiplink skip-to-content site-header site-footer cookie-banner".split()
)
_HTML_CONTAINERS = frozenset({"article", "main", "section"})
_HTML_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_HTML_BLOCKS = frozenset(
    "html body address article aside blockquote center details dialog dd div dl dt fieldset figcaption figure "
    "footer header hgroup hr li main menu ol p section summary ul caption td th tr tbody thead tfoot legend br "
    "frameset".split()
)


def _is_chrome(node: LexborNode) -> bool:
    """True for an element that is page chrome (see html_sections), judged on the element alone."""
    tag = node.tag
    if tag in _HTML_SKIPPED:
        return True
    attributes = node.attributes
    if "hidden" in attributes or attributes.get("aria-hidden") == "true":
        return True
    if (attributes.get("role") or "").strip().lower() in _HTML_CHROME_ROLES:
        return True
    names = f"{attributes.get('class') or ''} {attributes.get('id') or ''}".lower().split()
    if any(name in _HTML_CHROME_NAMES for name in names):
        return True
    if tag in ("header", "footer"):  # the page's own, not an article's
        parent = node.parent
        while parent is not None:
            if parent.tag in _HTML_CONTAINERS:
                return False
            parent = parent.parent
        return True
    return False


def _in_chrome(node: LexborNode) -> bool:
    current: LexborNode | None = node
    while current is not None and current.tag not in ("body", "html"):
        if _is_chrome(current):
            return True
        current = current.parent
    return False


def _collapse(text: str | None) -> str:
    return " ".join((text or "").split())


class _HtmlWriter:
    """Walks the DOM in document order and writes sections of Markdown-like text."""

    def __init__(self) -> None:
        self._sections: list[Section] = []
        self._heading: str | None = None
        self._blocks: list[tuple[str, str]] = []  # (kind, text); kind decides the separator before the next block
        self._inline: list[str] = []
        self._item_prefix = ""

    def walk(self, root: LexborNode) -> None:
        # An explicit stack: malformed pages can nest deeper than Python's recursion limit.
        stack: list[tuple[LexborNode, bool]] = [(root, True)]
        while stack:
            node, entering = stack.pop()
            if not entering:
                self._end_block()
                continue
            tag = node.tag
            if tag == "-text":
                self._inline.append(node.text_content or "")
                continue
            if tag is None or tag.startswith("-") or _is_chrome(node):  # comments, doctype, chrome
                continue
            if tag in _HTML_HEADINGS:
                self._new_section(_collapse(node.text(deep=True)) or None)
            elif tag == "pre":
                self._pre(node)
            elif tag == "table":
                self._table(node)
            elif tag == "br" or tag == "hr":
                self._end_block()
            else:
                if tag in _HTML_BLOCKS:
                    self._end_block()
                    stack.append((node, False))
                if tag == "li":
                    self._item_prefix = "- "
                stack.extend((child, True) for child in reversed(list(node.iter(include_text=True))))

    def finish(self) -> list[Section]:
        self._new_section(None)
        return self._sections

    def _new_section(self, heading: str | None) -> None:
        self._end_block()
        text = ""
        for i, (kind, block) in enumerate(self._blocks):
            if i:
                text += "\n" if kind == self._blocks[i - 1][0] and kind in ("item", "row") else "\n\n"
            text += block
        self._sections.append(Section(text, self._heading))
        self._heading, self._blocks, self._item_prefix = heading, [], ""

    def _end_block(self) -> None:
        line = _collapse("".join(self._inline))
        self._inline = []
        if line:
            kind = "item" if self._item_prefix else "paragraph"
            self._blocks.append((kind, self._item_prefix + line))
            self._item_prefix = ""

    def _pre(self, node: LexborNode) -> None:
        self._end_block()
        code = (node.text(deep=True) or "").strip("\n")
        if code.strip():
            self._blocks.append(("pre", f"```\n{code}\n```"))

    def _table(self, table: LexborNode) -> None:
        self._end_block()
        rows: list[LexborNode] = []
        caption: str = ""
        for child in table.iter():
            if child.tag == "caption":
                caption = _collapse(child.text(deep=True))
            elif child.tag == "tr":
                rows.append(child)
            elif child.tag in ("thead", "tbody", "tfoot"):
                rows.extend(row for row in child.iter() if row.tag == "tr")
        if caption:
            self._blocks.append(("paragraph", caption))
        for row in rows:
            cells = [_cell_text(cell) for cell in row.iter() if cell.tag in ("td", "th") and not _is_chrome(cell)]
            if any(cells):
                self._blocks.append(("row", "| " + " | ".join(cells) + " |"))


def _cell_text(cell: LexborNode) -> str:
    """A table cell's text on one line (its own blocks joined by spaces)."""
    writer = _HtmlWriter()
    for child in cell.iter(include_text=True):
        writer.walk(child)
    sections = writer.finish()
    return _collapse(" ".join(part for s in sections for part in ((s.heading or ""), s.text))).replace("|", "\\|")


def _decode_html(content: bytes) -> str:
    """UTF-8 (with or without a byte-order mark), else the charset the page declares in a <meta> element."""
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError:
        declared = _declared_charset(content)
        if declared is None:
            raise
        return content.decode(declared, errors="replace")


def _declared_charset(content: bytes) -> str | None:
    head = LexborHTMLParser(content[:4096].decode("latin-1"))
    for meta in head.css("meta"):
        charset = meta.attributes.get("charset")
        if not charset and (meta.attributes.get("http-equiv") or "").lower() == "content-type":
            value = (meta.attributes.get("content") or "").lower()
            charset = value.partition("charset=")[2].split(";")[0].strip() or None
        if charset:
            try:
                return codecs.lookup(charset.strip()).name
            except LookupError:
                return None
    return None


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
    # Undecodable content is reported when the document is ingested; here it only costs the title.
    title = None
    if media_type == MARKDOWN:
        title = markdown_title(content.decode("utf-8-sig", errors="replace"))
    elif media_type == PDF:
        title = pdf_title(content)
    elif media_type == HTML:
        title = html_title(content)
    return SourceDocument(
        document_id=found.document_id,
        name=found.name,
        content=content,
        media_type=media_type,
        tenant_id=tenant_id,
        tags=tuple(tags),
        title=title or found.path.stem,
    )


def slugify(name: str) -> str:
    """Lowercase letters, digits and single dashes: "Refund Policy (v2)" -> "refund-policy-v2"; a name with none
    of them gets a short hash."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or hashlib.sha1(name.encode()).hexdigest()[:12]


# -- finding the files of a folder ----------------------------------------------------------------------------

# Folders never entered when a folder is walked, besides hidden ones (".git", ".venv" ...) and virtualenvs (any
# folder holding a pyvenv.cfg): installed dependencies, version control without a dot, caches.
SKIPPED_FOLDERS = frozenset({"node_modules", "bower_components", "site-packages", "__pycache__", "CVS", "_darcs"})
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
    """The .txt, .md, .html/.htm and .pdf files among `paths`; folders are walked in sorted order.

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
                    clash = f"its document id {file_id!r} is also that of {owners[file_id]}: leave one out with " \
                        "--exclude, or ingest it alone with --id"
                    selection.problems.append(FileProblem(file, clash))
                continue
            owners[file_id] = file
            selection.files.append(FoundFile(file, file_id, name, file.stat().st_size))
    if document_id is not None:
        validate_document_id(document_id)
        if (count := len(selection.files) + len(selection.problems)) != 1:
            raise InvalidRequest([FieldViolation("--id", f"names one file; the paths hold {count}")])
    return selection


def _walk(
    root: Path, include: Sequence[str], exclude: Sequence[str], selection: FileSelection
) -> list[tuple[Path, str, str]]:
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
    """"guides/Getting Started.md" -> "guides.getting-started"; shortened with a hash beyond 128 characters."""
    parts = [slugify(part) for part in relative.parts[:-1]] + [slugify(relative.stem)]
    document_id = ".".join(parts)
    if len(document_id) > MAX_DOCUMENT_ID:
        digest = hashlib.sha1(relative.as_posix().encode()).hexdigest()[:12]
        document_id = f"{document_id[: MAX_DOCUMENT_ID - len(digest) - 1]}-{digest}"
    return document_id
