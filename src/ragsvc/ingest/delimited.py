"""CSV and TSV to sections, read with the csv module: the first row is the header, and every other row becomes
one line that names each value by its column ("name: Ada; team: Payments"), so that a row read alone still says
what its values are. Consecutive rows are grouped into sections of at most a chunk's tokens, each headed by the
rows it holds ("rows 2-14": the header is row 1, blank rows count): a chunk is a group of whole rows.

A .csv file's delimiter is the most frequent of , ; | and tab in its header line (comma when none is); a .tsv
file's is tab."""

from __future__ import annotations

import csv
import io

from ragsvc.ingest.chunker import token_count
from ragsvc.ingest.limits import Deadline
from ragsvc.ingest.media import TSV
from ragsvc.ingest.sections import Section

_DELIMITERS = ",;|\t"
_CHECK_EVERY = 1024  # rows between two looks at the deadline
# The csv module refuses fields over 128 KiB by default, a process-wide setting: RAG_INGEST_MAX_LINE_CHARS bounds
# what a line holds instead (and the document's size what a quoted field spanning lines does).
csv.field_size_limit(2**31 - 1)


def delimited_sections(text: str, media_type: str, *, chunk_tokens: int, deadline: Deadline | None = None) -> list[Section]:
    """The rows of CSV or TSV `text` (as `media_type` says) in sections of at most `chunk_tokens` tokens (a row
    longer than that alone). The csv module reads any text (an unclosed quote runs to the end)."""
    delimiter = "\t" if media_type == TSV else _delimiter(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    sections: list[Section] = []
    lines: list[str] = []
    first = last = 0  # the rows of `lines`
    tokens = 0
    header: list[str] | None = None
    for number, row in enumerate(reader, start=1):
        if deadline is not None and number % _CHECK_EVERY == 0:
            deadline.check()
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [" ".join(cell.split()) for cell in row]
            continue
        line = _line(header, row)
        if not line:
            continue
        cost = token_count("\n" + line)
        if lines and tokens + cost > chunk_tokens:
            sections.append(_section(lines, first, last))
            lines, tokens = [], 0
        if not lines:
            first = number
        lines.append(line)
        last = number
        tokens += cost
    if lines:
        sections.append(_section(lines, first, last))
    return sections


def _delimiter(text: str) -> str:
    header = text[: text.find("\n")] if "\n" in text else text
    counts = {delimiter: header.count(delimiter) for delimiter in _DELIMITERS}
    best = max(counts, key=lambda delimiter: counts[delimiter])
    return best if counts[best] else ","


def _line(header: list[str], row: list[str]) -> str:
    """ "column: value" for each non-empty value, joined by "; " (columns past the header are "column N")."""
    named = []
    for i, cell in enumerate(row):
        value = " ".join(cell.split())
        if value:
            name = header[i] if i < len(header) and header[i] else f"column {i + 1}"
            named.append(f"{name}: {value}")
    return "; ".join(named)


def _section(lines: list[str], first: int, last: int) -> Section:
    where = f"row {first}" if first == last else f"rows {first}-{last}"
    return Section("\n".join(lines), where)
