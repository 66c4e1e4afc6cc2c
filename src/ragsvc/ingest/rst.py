"""reStructuredText to sections, parsed by docutils: one per section, headed by its title. Paragraphs, list items
("- "), definition terms and descriptions, field lists ("name: text"), table rows ("| a | b |") and literal blocks
(fenced with ```) become the blocks of a section's text. Directives that read files or pass raw markup through
(include, raw) are off; roles and directives docutils does not know (Sphinx's :ref:, toctree) keep their text or are
dropped, and never fail the document. docutils refuses lines longer than RAG_INGEST_MAX_LINE_CHARS itself."""

from __future__ import annotations

import io
import re

from docutils import nodes
from docutils.core import publish_doctree

from ragsvc.errors import InvalidRequest
from ragsvc.ingest.decoding import unreadable
from ragsvc.ingest.limits import Deadline, DocumentLimits
from ragsvc.ingest.sections import Section, joined

_CHECK_EVERY = 4096  # nodes walked between two looks at the deadline
_ROLE = re.compile(r":[\w.+-]+:`([^`<]*?)\s*(?:<[^`>]*>)?`")  # :ref:`Label <target>` -> Label
_SKIPPED = (nodes.system_message, nodes.comment, nodes.substitution_definition, nodes.target, nodes.raw)


def rst_sections(text: str, limits: DocumentLimits, *, deadline: Deadline | None = None) -> list[Section]:
    """The non-empty sections of reStructuredText `text`. Raises InvalidRequest for text docutils cannot parse."""
    settings = {
        "file_insertion_enabled": False,
        "raw_enabled": False,
        "report_level": 5,  # no messages on stderr
        "halt_level": 5,  # no error stops the parse
        "warning_stream": io.StringIO(),
        "doctitle_xform": False,  # the top section stays a section, with its title as heading
        "syntax_highlight": "none",
        "line_length_limit": limits.line_chars,
        "_disable_config": True,  # no docutils.conf of the server's
    }
    try:
        tree = publish_doctree(text, settings_overrides=settings)
    except Exception as exc:  # docutils raises its own errors, and RecursionError on absurd nesting
        raise unreadable(f"is not readable reStructuredText: {exc}") from exc
    writer = _RstWriter(deadline)
    try:
        writer.walk(tree)
    except InvalidRequest:
        raise
    except Exception as exc:  # an unusual tree shape
        raise unreadable(f"is not readable reStructuredText: {exc}") from exc
    return [section for section in writer.finish() if section.text.strip()]


def rst_title(text: str, limits: DocumentLimits = DocumentLimits()) -> str | None:
    """The title of the first section, if any."""
    try:
        sections = rst_sections(text, limits)
    except InvalidRequest:
        return None
    return next((section.heading for section in sections if section.heading), None)


def _collapse(text: str) -> str:
    return " ".join(text.split())


class _RstWriter:
    """Walks the doctree in document order and writes sections of Markdown-like text."""

    def __init__(self, deadline: Deadline | None) -> None:
        self._deadline = deadline
        self._sections: list[Section] = []
        self._heading: str | None = None
        self._blocks: list[tuple[str, str]] = []  # (kind, text): items and rows in a run are one line apart

    def walk(self, root: nodes.Node) -> None:
        # An explicit stack: nested lists and quotes can be deeper than Python's recursion limit.
        stack: list[tuple[nodes.Node, str]] = [(root, "")]
        visited = 0
        while stack:
            node, prefix = stack.pop()
            visited += 1
            if self._deadline is not None and visited % _CHECK_EVERY == 0:
                self._deadline.check()
            if isinstance(node, _SKIPPED):
                continue
            if isinstance(node, nodes.section):
                title = node.next_node(nodes.title)
                self._new_section(_collapse(title.astext()) if title is not None else None)
                stack.extend((child, "") for child in reversed(node.children) if not isinstance(child, nodes.title))
            elif isinstance(node, nodes.literal_block):
                self._blocks.append(("pre", f"```\n{node.astext().strip(chr(10))}\n```"))
            elif isinstance(node, nodes.row):
                cells = [_collapse(_text(entry)).replace("|", "\\|") for entry in node.children]
                self._blocks.append(("row", "| " + " | ".join(cells) + " |"))
            elif isinstance(node, nodes.field):
                name, body = (_collapse(_text(part)) for part in node.children[:2])
                self._blocks.append(("item", f"{name}: {body}"))
            elif isinstance(node, nodes.list_item):
                stack.extend((child, "" if i else "- ") for i, child in reversed(list(enumerate(node.children))))
            elif isinstance(node, nodes.TextElement):  # paragraph, title of a table or admonition, term, line ...
                if text := _collapse(_text(node)):
                    self._blocks.append(("item" if prefix else "paragraph", prefix + text))
            elif isinstance(node, nodes.Element):  # a container: its first block takes its prefix
                stack.extend((child, "" if i else prefix) for i, child in reversed(list(enumerate(node.children))))

    def finish(self) -> list[Section]:
        self._new_section(None)
        return self._sections

    def _new_section(self, heading: str | None) -> None:
        self._sections.append(Section(joined(self._blocks), self._heading))
        self._heading, self._blocks = heading, []


def _text(node: nodes.Node) -> str:
    """A node's text, with the roles docutils does not know reduced to their text."""
    return _ROLE.sub(r"\1", node.astext())
