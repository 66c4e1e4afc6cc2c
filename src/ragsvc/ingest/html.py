"""HTML to sections: one per heading element (h1-h6), headed by its text; text before the first heading has no
heading. Page chrome is dropped: scripts, styles, navigation (<nav>, role=navigation, navigation classes such as
"navheader", "breadcrumb" or "toc"), the page's own <header>/<footer> (those of an <article>, <main> or <section>
stay), forms and hidden elements. Paragraphs, list items ("- "), definition terms and descriptions, table rows
("| a | b |") and preformatted text (fenced with ```) become the blocks of a section's text, the way Markdown would
write them.

The page is decoded as `decoding` says, its <meta charset> first. Before lexbor parses it, a scan of its tags
estimates how deep its elements nest and counts each element's attributes: lexbor's time grows with the square of
both (see `limits`), so a page past RAG_INGEST_MAX_HTML_DEPTH or RAG_INGEST_MAX_HTML_ATTRIBUTES is refused unparsed.
"""

from __future__ import annotations

import codecs
import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ragsvc.errors import InvalidRequest
from ragsvc.ingest.decoding import DecodedText, decode_text
from ragsvc.ingest.limits import MAX_HTML_ATTRIBUTES, MAX_HTML_DEPTH, Deadline, DocumentLimits, exceeded
from ragsvc.ingest.media import HTML
from ragsvc.ingest.sections import Loaded, Section, joined

_CHECK_EVERY = 4096  # nodes walked between two looks at the deadline


def html_sections(
    content: bytes, limits: DocumentLimits, *, charset: str | None = None, deadline: Deadline | None = None
) -> Loaded:
    """The page's non-empty sections (see the module's docstring) and its encoding; `charset` is the one its media
    type names. Raises InvalidRequest for content that is not text, and DocumentLimitExceeded past a limit."""
    page = _decoded(content, charset)
    check_structure(page.text, limits)
    tree = LexborHTMLParser(page.text)
    writer = _HtmlWriter(deadline)
    top = tree.body or tree.root
    if top is not None:
        writer.walk(top)
    return Loaded([s for s in writer.finish() if s.text.strip()], page.encoding)


def html_title(content: bytes, limits: DocumentLimits = DocumentLimits()) -> str | None:
    """The page's <title>, else the text of its first <h1> outside the page chrome; None for a page that cannot be
    read (it is reported when the document is ingested)."""
    try:
        page = _decoded(content, None)
        check_structure(page.text, limits)
    except InvalidRequest:
        return None
    tree = LexborHTMLParser(page.text)
    title = tree.css_first("title")
    if title is not None and (text := _collapse(title.text(deep=True))):
        return text
    for h1 in tree.css("h1"):
        if not _in_chrome(h1) and (text := _collapse(h1.text(deep=True))):
            return text
    return None


_HTML_SKIPPED = frozenset(
    "head script style noscript template nav iframe object embed svg math canvas form button select textarea input dialog".split()
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

    def __init__(self, deadline: Deadline | None = None) -> None:
        self._deadline = deadline
        self._sections: list[Section] = []
        self._heading: str | None = None
        self._blocks: list[tuple[str, str]] = []  # (kind, text); kind decides the separator before the next block
        self._inline: list[str] = []
        self._item_prefix = ""

    def walk(self, root: LexborNode) -> None:
        # An explicit stack: malformed pages can nest deeper than Python's recursion limit.
        stack: list[tuple[LexborNode, bool]] = [(root, True)]
        visited = 0
        while stack:
            node, entering = stack.pop()
            visited += 1
            if self._deadline is not None and visited % _CHECK_EVERY == 0:
                self._deadline.check()
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
        self._sections.append(Section(joined(self._blocks), self._heading))
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


def _decoded(content: bytes, charset: str | None) -> DecodedText:
    return decode_text(content, HTML, charset=charset, declared=_declared_charset(content))


def _declared_charset(content: bytes) -> str | None:
    """The charset a <meta> element in the first 4 KB declares, as a Python codec name."""
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


# -- the scan before parsing ------------------------------------------------------------------------------------

_NAME = re.compile(r"<(/?)([A-Za-z][^\s/>]*)")  # a start or end tag's name
_VALUE = re.compile(r"\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>]*)")  # an attribute's value, with its "="
_VOID = frozenset("area base br col embed hr img input link meta param source track wbr keygen basefont bgsound frame".split())
# Elements whose end tag may be left out: the parser closes them itself, so an unclosed one adds no depth.
_OPTIONAL_END = frozenset(
    "p li dt dd option optgroup tr td th thead tbody tfoot colgroup caption rb rt rtc rp html head body".split()
)
# Elements whose content is text up to their end tag.
_RAW_TEXT = frozenset("script style textarea title xmp iframe noembed noframes noscript".split())
_RAW_TEXT_END = {name: re.compile(rf"</{name}\b", re.IGNORECASE) for name in _RAW_TEXT}
_FOREIGN = frozenset({"svg", "math"})  # inside them "<x/>" closes itself
_LONG_TAG = 2000  # characters of a tag past which its attributes are counted


def check_structure(html: str, limits: DocumentLimits) -> None:
    """Raises DocumentLimitExceeded when the page's elements nest deeper than `limits.html_depth` or one has more
    attributes than `limits.html_attributes`, as a scan of its tags (in time linear in the page's length)
    estimates: an unclosed element whose end tag is optional adds no depth; any other unclosed element does, as it
    does in the parser."""
    depth = foreign = 0
    position = 0
    close = -1  # the next ">" at or after `position`, once looked for
    while (start := html.find("<", position)) >= 0:
        if html.startswith("<!--", start):
            end = html.find("-->", start + 4)
            position = len(html) if end < 0 else end + 3
            continue
        if close < start:
            close = html.find(">", start)
            if close < 0:
                return  # no tag ends after here
        tag = _NAME.match(html, start, close)
        if tag is None:
            position = start + 1
            continue
        position = close + 1
        closing, name, rest = tag.group(1), tag.group(2).lower(), html[tag.end() : close]
        if len(rest) > _LONG_TAG and (attributes := len(_VALUE.sub(" ", rest).split())) > limits.html_attributes:
            found = f"has a <{name}> element with {attributes:,} attributes"
            raise exceeded(MAX_HTML_ATTRIBUTES, limits.html_attributes, found)
        if name in _VOID or name in _OPTIONAL_END:
            continue
        if closing:
            depth = max(depth - 1, 0)
            foreign = max(foreign - 1, 0) if name in _FOREIGN else foreign
            continue
        if foreign and rest.endswith("/"):
            continue
        foreign += name in _FOREIGN
        depth += 1
        if depth > limits.html_depth:
            found = f"nests HTML elements more than {limits.html_depth:,} deep"
            raise exceeded(MAX_HTML_DEPTH, limits.html_depth, found)
        if name in _RAW_TEXT:  # its text is no markup: on after its end tag
            raw_end = _RAW_TEXT_END[name].search(html, position)
            position = len(html) if raw_end is None else raw_end.start()
            depth -= 1
