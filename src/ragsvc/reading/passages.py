"""The quotable passages of a chunk: its labels, sentences, code blocks and table rows, in order, each with the
paragraph (block) and the labelled entry it belongs to.

A chunk's text is Markdown-like (what the loaders write): paragraphs and list items, `#` headings, fenced code
and `|` table rows. A **label** is a heading or a short line without closing punctuation that names what follows
(a definition term such as "max_connections (integer)"); the passages after it, up to the next label, are its
**entry**. A sentence that introduces a short code block (it ends the paragraph with ":" or without closing
punctuation, and the code follows at once) is one passage with that code: "The general command form to restore a
text dump is `psql -X dbname < dumpfile`".

The extractive generator quotes passages, answer validation reads them, and ingest embeds them (sentence
vectors): all three split a chunk the same way, with `passages`.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ragsvc.reading.sentences import sentences


class Kind(enum.Enum):
    LABEL = "label"
    SENTENCE = "sentence"
    CODE = "code"  # a sentence with the code block it introduces
    ROW = "row"


@dataclass(frozen=True, slots=True)
class Passage:
    text: str  # on one line, Markdown markers and link targets removed (code keeps its own text)
    kind: Kind
    block: int  # the paragraph, list item, code block or row it is part of (counted from 1 in the chunk)
    entry: int  # the label it sits under (counted from 1), 0 before the chunk's first label
    heading: bool = False  # a label that is a section heading (a "#" line), not a term a definition list defines
    starts_cut: bool = False  # the chunk's border cuts its start: the chunk's first passage, starting mid-sentence
    ends_cut: bool = False  # the chunk's border cuts its end: the chunk's last passage, an unfinished sentence

    @property
    def cut(self) -> bool:
        """The chunk's border cuts it, at either end (the whole of it is in the neighbouring chunk)."""
        return self.starts_cut or self.ends_cut


MAX_CODE_LINES = 3  # a longer code block is an example, not an answer
MAX_CODE_CHARS = 200
_LABEL_MAX_WORDS = 8

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_TABLE_ROW = re.compile(r"^\s*\|")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")  # a markdown bullet or numbered item
_QUOTE = re.compile(r"^\s*>\s?")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_CLOSED = (".", "!", "?")
_RULE = re.compile(r":?-{3,}:?|")  # a cell of a table's header rule


@functools.lru_cache(maxsize=4096)  # the same chunks come back as evidence query after query
def passages(text: str) -> tuple[Passage, ...]:
    """The passages of a chunk's text, in order (see the module's docstring)."""
    found: list[Passage] = []
    entry = 0
    for block, (kind, content, heading) in enumerate(_blocks(text), start=1):
        if kind is Kind.LABEL:
            entry += 1
            found.append(Passage(content, Kind.LABEL, block, entry, heading))
        elif kind is Kind.CODE:
            lead = found[-1] if found else None
            introduced = lead is not None and lead.kind is Kind.SENTENCE and lead.block == block - 1
            if lead is not None and introduced and _introduces(lead.text) and _quotable_code(content):
                found[-1] = Passage(f"{lead.text} `{_one_line(content)}`", Kind.CODE, lead.block, entry)
        elif kind is Kind.ROW:
            cells = [c.strip() for c in content.strip().strip("|").split(" | ")]
            if not all(_RULE.fullmatch(c) for c in cells):  # not the header's rule line
                found.append(Passage(" | ".join(c for c in cells if c), Kind.ROW, block, entry))
        else:
            found += [Passage(s, Kind.SENTENCE, block, entry) for s in sentences(content)]
    return tuple(_mark_cuts(found, text))


def _mark_cuts(found: list[Passage], text: str) -> Iterator[Passage]:
    """The passages, the chunk's first one after its labels (a chunk carries the label of the entry it starts in)
    marked cut when it starts mid-sentence (a chunk border cut it: the whole sentence is in the neighbouring
    chunk), and its last one when it is an unfinished sentence."""
    first = next((i for i, passage in enumerate(found) if passage.kind is not Kind.LABEL), -1)
    last = len(found) - 1
    ends_in_prose = not text.rstrip().endswith(("```", "~~~", "|"))
    for index, passage in enumerate(found):
        starts_cut = index == first and _starts_mid_sentence(passage.text)
        ends_cut = index == last and ends_in_prose and passage.kind is Kind.SENTENCE and not _finished(passage.text)
        if starts_cut or ends_cut:
            passage = Passage(passage.text, passage.kind, passage.block, passage.entry, passage.heading, starts_cut, ends_cut)
        yield passage


CUT_BEFORE = "… "  # marks where the chunk's border cuts a passage's start
CUT_AFTER = " …"  # ... its end


def held_text(passage: Passage) -> str:
    """A passage's text as its chunk holds it: a sentence the chunk's border cuts is marked "…" where it is cut
    (before it when its start is cut, after it when its end is)."""
    return f"{CUT_BEFORE if passage.starts_cut else ''}{passage.text}{CUT_AFTER if passage.ends_cut else ''}"


def _starts_mid_sentence(text: str) -> bool:
    """A chunk's first passage that starts in lower case, or closes a bracket it never opened ("9.90) allow users
    to ...", the rest of "(Table 9.90) allow users to ..."), begins inside a sentence."""
    closing = text.find(")")
    return text[:1].islower() or (closing >= 0 and not 0 <= text.find("(") < closing)


def _finished(sentence: str) -> bool:
    return sentence.rstrip("\"')]*_ ").endswith((*_CLOSED, ":"))


def _introduces(sentence: str) -> bool:
    """A sentence that leads into what follows: it ends with a colon, or without closing punctuation."""
    return not sentence.rstrip("\"')]*_ ").endswith(_CLOSED)


def _quotable_code(code: str) -> bool:
    lines = [line for line in code.splitlines() if line.strip()]
    return 0 < len(lines) <= MAX_CODE_LINES and len(code) <= MAX_CODE_CHARS


def _one_line(code: str) -> str:
    return " ; ".join(line.strip() for line in code.splitlines() if line.strip())


def _blocks(text: str) -> Iterator[tuple[Kind, str, bool]]:
    """The blocks of `text` in order: labels (True when a heading), paragraphs and list items (as SENTENCE, on one
    line, Markdown markers and link targets removed), fenced code (as CODE, its lines) and table rows (as ROW)."""
    lines: list[str] = []
    code: list[str] | None = None

    def flush() -> Iterator[tuple[Kind, str, bool]]:
        if lines:
            block = " ".join(lines)
            yield (Kind.LABEL if len(lines) == 1 and is_label(block) else Kind.SENTENCE), block, False
            lines.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            if code is None:
                yield from flush()
                code = []
            else:
                yield Kind.CODE, "\n".join(code), False
                code = None
            continue
        if code is not None:
            code.append(line)
            continue
        if not line.strip() or _HEADING.match(line) or _TABLE_ROW.match(line) or _ITEM.match(line):
            yield from flush()
        if _HEADING.match(line):
            yield Kind.LABEL, _HEADING.sub("", line).strip(), True
        elif _TABLE_ROW.match(line):
            yield Kind.ROW, line, False
        elif line.strip():
            content = _LINK.sub(r"\1", _ITEM.sub("", _QUOTE.sub("", line), count=1))
            lines.append(" ".join(content.split()))
    if code:  # a chunk border inside a code block
        yield Kind.CODE, "\n".join(code), False
    yield from flush()


def is_label(block: str) -> bool:
    """A short line that names what follows: few words, no closing punctuation."""
    few = len(block.split(maxsplit=_LABEL_MAX_WORDS)) <= _LABEL_MAX_WORDS  # stops splitting past the limit
    return few and not block.rstrip("\"')]*_ ").endswith((*_CLOSED, ":", ";", ","))
