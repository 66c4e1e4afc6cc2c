"""Split sections into overlapping chunks of at most N tokens (cl100k_base), cut between words.

A chunk carries what it needs to be read alone: when it starts inside a labelled entry (a definition term such as
"max_connections (integer)" before the paragraphs that describe it, see ragsvc.reading.passages) whose label is not in
it, it starts with that label; when it starts or ends inside a fenced code block, the fence is opened or closed at
its border, so that code never reads as prose. What it carries counts towards its tokens."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import tiktoken

from ragsvc.budget import COUNTED_ENCODING
from ragsvc.encodings import get_encoding
from ragsvc.ingest.limits import Deadline
from ragsvc.ingest.sections import Section
from ragsvc.prompts import fenced
from ragsvc.reading.passages import is_label

_WORD = re.compile(r"\S+")
_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)
_PARAGRAPH = re.compile(r"(?:^|\n\n)([^\n]+)(?=\n\n|$)")  # a paragraph of one line
_NOT_PROSE = re.compile(r"^\s*(?:[-*+]\s|\d{1,3}[.)]\s|\||#|```|~~~)")
FENCE = "```"
MAX_LABEL_SHARE = 4  # a label is carried when it takes at most 1/4 of a chunk's tokens
_CHECK_EVERY = 65_536  # words counted between two looks at the deadline
_CACHED_PIECES = 200_000  # distinct pieces whose counts are kept (random text has few repeats)
_WINDOW_CHUNKS = 64  # a word longer than this many chunks' worth of characters is halved in windows that long


@dataclass(frozen=True, slots=True)
class _Unit:
    """A word at text[start:end] and the tokens it adds to a chunk (its leading whitespace included)."""

    start: int
    end: int
    tokens: int


def chunk_sections(
    sections: Sequence[Section], *, chunk_tokens: int, overlap_tokens: int, deadline: Deadline | None = None
) -> Iterator[Section]:
    """Chunks of at most `chunk_tokens` tokens, each a smaller Section keeping its section's heading and page;
    neighbours within a section share about `overlap_tokens` tokens. They are cut as they are taken, so that a
    caller counting them can stop early; the deadline is checked for each.

    A chunk starts and ends on word boundaries, except that a word longer than a chunk is cut; chunks never span
    two sections. Each carries its entry's label and closes its code fences (see the module's docstring)."""
    if not chunk_tokens > overlap_tokens >= 0:
        raise ValueError(f"need chunk_tokens > overlap_tokens >= 0, got {chunk_tokens} and {overlap_tokens}")
    encoding = get_encoding(COUNTED_ENCODING)
    for section in sections:
        for text in _chunk_text(encoding, section.text, chunk_tokens, overlap_tokens, deadline):
            if deadline is not None:
                deadline.check()
            yield Section(text, section.heading, section.page_number)


def least_chunks(sections: Sequence[Section], chunk_tokens: int) -> int:
    """A lower bound of the chunks `chunk_sections` cuts from `sections`, at the cost of counting their words:
    every word is a token at least, a chunk holds `chunk_tokens` at most, and never spans two sections."""
    return sum(-(-len(section.text.split()) // chunk_tokens) for section in sections)


def token_count(text: str) -> int:
    """The tokens `text` adds to a chunk, counted as the chunker counts them (word by word, each with the
    whitespace before it)."""
    return sum(unit.tokens for unit in _units(get_encoding(COUNTED_ENCODING), text, len(text) + 1))


class _Carried:
    """What a chunk of `text` starting or ending at an offset carries: its entry's label, open code fences."""

    def __init__(self, encoding: tiktoken.Encoding, text: str, limit: int) -> None:
        self._fences = [match.start() for match in _FENCE.finditer(text)]
        self._labels: list[tuple[int, int, str]] = []  # (start, end, text) of each label line outside code
        for match in _PARAGRAPH.finditer(text):
            line = match.group(1)
            if is_label(line) and not _NOT_PROSE.match(line) and not self._in_code(match.start(1)):
                self._labels.append((match.start(1), match.end(1), line.strip()))
        self._encoding = encoding
        self._limit = limit
        self.end_tokens = _count(encoding, f"\n{FENCE}") if self._fences else 0

    def before(self, start: int) -> str:
        """The label of the entry `start` is in (unless the label starts there) and an opening fence when `start`
        is inside code."""
        prefix = ""
        at = bisect.bisect_right(self._labels, start, key=lambda label: label[0]) - 1
        if at >= 0 and self._labels[at][1] <= start:  # not when the chunk starts at (or in) the label itself
            label = self._labels[at][2]
            if _count(self._encoding, label) * MAX_LABEL_SHARE <= self._limit:
                prefix = f"{label}\n\n"
        return prefix + (f"{FENCE}\n" if self._in_code(start) else "")

    def after(self, end: int) -> str:
        """A closing fence when a chunk ending at `end` ends inside code."""
        return f"\n{FENCE}" if self._in_code(end) else ""

    def _in_code(self, offset: int) -> bool:
        return bisect.bisect_left(self._fences, offset) % 2 == 1


def _chunk_text(encoding: tiktoken.Encoding, text: str, limit: int, overlap: int, deadline: Deadline | None) -> Iterator[str]:
    units = _units(encoding, text, limit, deadline)
    carried = _Carried(encoding, text, limit)
    first = 0
    while first < len(units):
        prefix = carried.before(units[first].start)
        budget = limit - carried.end_tokens - _count(encoding, prefix)
        if budget <= overlap:  # too little room left to carry anything
            prefix, budget = "", limit
        end = first
        total = 0
        while end < len(units) and total + units[end].tokens <= budget:
            total += units[end].tokens
            end += 1
        end = max(end, first + 1)  # only a single character of more than `limit` tokens fits nowhere
        # Unit counts add up to the chunk's count almost always; trim in the rare case they undercount.
        while end > first + 1 and _count(encoding, text[units[first].start : units[end - 1].end]) > budget:
            end -= 1
        body = text[units[first].start : units[end - 1].end]
        yield prefix + body + carried.after(units[end - 1].end)
        if end == len(units):
            break
        following = end
        shared = 0
        while following - 1 > first and shared + units[following - 1].tokens <= overlap:
            following -= 1
            shared += units[following].tokens
        first = following


def fenced_token_counts(texts: Sequence[str]) -> list[int]:
    """Each chunk text's tokens between its data fences, as a prompt carries it (`prompts.fenced`), in
    COUNTED_ENCODING: what a Chunk stores as its `token_count`, so that packing a prompt does not count it again."""
    encoding = get_encoding(COUNTED_ENCODING)
    return [len(encoding.encode_ordinary(fenced(text))) for text in texts]


def _units(encoding: tiktoken.Encoding, text: str, limit: int, deadline: Deadline | None = None) -> list[_Unit]:
    """The words of `text`, words of more than `limit` tokens cut into pieces that fit.

    Each distinct piece (a word with the whitespace before it) is encoded once: a text repeats most of its words,
    and one encode call per piece costs far less than tiktoken's batch call, which makes a thread-pool task of
    every piece (8 s per megabyte of text, measured)."""
    counts: dict[str, int] = {}
    units: list[_Unit] = []
    lead = 0  # each word is counted with the whitespace before it
    for number, match in enumerate(_WORD.finditer(text)):
        if deadline is not None and number % _CHECK_EVERY == _CHECK_EVERY - 1:
            deadline.check()
        start, end = match.span()
        piece = text[lead:end]
        lead = end
        tokens = counts.get(piece)
        if tokens is None:
            tokens = counts[piece] = len(encoding.encode_ordinary(piece))
        if len(counts) > _CACHED_PIECES:
            counts.clear()
        if tokens <= limit:
            units.append(_Unit(start, end, tokens))
            continue
        # A word of many chunks (a base64 blob, a line of one character) is halved in windows, not whole.
        step = min(end - start, _WINDOW_CHUNKS * limit)
        for cut in range(start, end, step):
            units.extend(_split_word(encoding, text, cut, min(cut + step, end), limit))
    return units


def _split_word(encoding: tiktoken.Encoding, text: str, start: int, end: int, limit: int) -> list[_Unit]:
    """Halves text[start:end] until each piece has at most `limit` tokens."""
    tokens = _count(encoding, text[start:end])
    if tokens <= limit or end - start == 1:
        return [_Unit(start, end, tokens)]
    middle = (start + end) // 2
    return _split_word(encoding, text, start, middle, limit) + _split_word(encoding, text, middle, end, limit)


def _count(encoding: tiktoken.Encoding, text: str) -> int:
    return len(encoding.encode_ordinary(text))
