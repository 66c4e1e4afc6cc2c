"""What is read of a chunk whatever the question: its quotable passages (`Candidate`s: their terms, the label and
headings they sit under, the values they state), read once at ingest and stored with the chunk, so that a question
pays only for what depends on it (the reader's features and models, the passages' ranking).

`read_chunk` is the one reading of a chunk: at ingest (`retrieval.layout.analysed`), by `ragsvc reindex`, and for a
chunk that was never stored (a caller's selection, a sentence of an answer, the reader's training data). `pack`
writes a reading as one string for the chunk's payload, `unpack` reads it back exactly, and `candidates` reads a
question's evidence, each chunk from the reading it carries (`ScoredChunk.reading`) when it comes from the index.

The packed form is compact JSON, `[version, heading, labels, passages]`:

- `version`: the ANALYSER_VERSION that wrote it (an index records it too: `retrieval.stored_terms`);
- `heading`: the terms of the chunk's page title and section heading, sorted and space-separated (every passage's);
- `labels`: `[terms, term]` of each label a passage sits under (its terms as `heading`; the term a definition list
  defines, or "");
- `passages`: `[text, position, depth, entry, paragraph, kind, cut, values, terms, label, words, flags]` each: `text` is
  `[start, end]` into the chunk's text when the chunk holds it verbatim, `[start, end, before, after]` when it does
  once the marks of a cut (`passages.CUT_BEFORE`, `CUT_AFTER`) are off, else the text itself; `kind` and `values`
  are initials (of `Kind` and of the kinds of value stated), `label` an index into `labels` (-1: none), `words`
  and `flags` its `traits.Traits` (`Traits.flags`), the rest as `Candidate` has them.

Terms are sorted, so a chunk's reading packs to the same string in every process (a rewrite compares them).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from ragsvc.domain import ScoredChunk
from ragsvc.reading.passages import CUT_AFTER, CUT_BEFORE, Kind, Passage, held_text, passages
from ragsvc.reading.relevance import Candidate, passage_terms
from ragsvc.reading.text import ANALYSER_VERSION
from ragsvc.reading.traits import Traits, traits
from ragsvc.reading.values import AMOUNT, DURATION, SIZE, VERSION, stated_values
from ragsvc.sanitize import injection_patterns

__all__ = ["candidates", "is_current", "pack", "read_chunk", "stored_reading", "unpack"]

_MIN_CUT_WORDS = 8  # a cut sentence showing fewer words is not quoted
_MIN_WORDS = 3  # shorter fragments (stray headings, "See below.") are never an answer

# Words addressing a model or the reader with instructions about the answer (besides sanitize's patterns).
_ADDRESSES_A_MODEL = re.compile(
    r"\b(note|instructions?|message)\s+(for|to)\s+(the\s+|any\s+)?(ai|assistant|model|llm|chatbot|bot)\b"
    r"|\b(ai|language model|llm|chatbot)\s+(assistant\s+)?(must|should|answering)\b|\bsystem prompt\b"
    r"|\btell the user\b|\bevery answer\b",
    re.IGNORECASE,
)
_KINDS = {kind.value[0]: kind for kind in Kind}  # "label", "sentence", "code", "row": initials l, s, c, r
_VALUES = {kind[0]: kind for kind in (DURATION, SIZE, AMOUNT, VERSION)}  # d, s, a, v
_PREFIX = f"[{ANALYSER_VERSION},"  # how a reading this analyser packed starts
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def candidates(context: Sequence[ScoredChunk]) -> Iterator[Candidate]:
    """Every passage of the context that may be quoted (see `read_chunk`), marked with its chunk's place (from 1)
    and weighed by its chunk's retrieval score: read from the chunk's stored reading when it carries one, else
    from its text."""
    for marker, scored in enumerate(context, start=1):
        chunk = scored.chunk
        relevance = max(scored.score, 0.0)
        if scored.reading is not None:
            found = unpack(scored.reading, chunk.text)
        else:
            found = read_chunk(chunk.text, chunk.page_title, chunk.section or "")
        for candidate in found:
            yield candidate.placed(marker, relevance)


@functools.lru_cache(maxsize=4096)  # a chunk never stored (a selection, training data) may be read again and again
def read_chunk(text: str, page_title: str, section: str) -> tuple[Candidate, ...]:
    """The passages of a chunk that may be quoted, whatever the question (marker 0, relevance 0: `candidates` sets
    both): long enough to be an answer (a sentence its chunk's border cuts, longer still), holding a content term,
    not in a paragraph that instructs a model."""
    heading = frozenset(passage_terms(f"{page_title}\n{section}"))
    found = passages(text)
    instructing = {p.block for p in found if _instructs_a_model(p.text)}
    label: frozenset[str] = frozenset()
    depth, term, terms_in_row = 0, "", False
    read: list[Candidate] = []
    for position, passage in enumerate(found):
        if passage.kind is Kind.LABEL:
            # Consecutive terms name one entry ("-f", "--force"): they are read, and quoted, together.
            together = terms_in_row and not passage.heading
            label = (label if together else frozenset()) | frozenset(passage_terms(passage.text))
            term = "" if passage.heading else (f"{term}, {passage.text}" if together else passage.text)
            depth, terms_in_row = 0, not passage.heading
            continue
        depth += 1
        terms_in_row = False
        terms = frozenset(passage_terms(passage.text))
        if passage.block in instructing or not terms or len(passage.text.split()) < _MIN_WORDS:
            continue
        if passage.cut and len(passage.text.split()) < _MIN_CUT_WORDS:
            continue
        held = held_text(passage)
        read.append(
            Candidate(
                held,
                0,
                position,
                0.0,
                terms,
                label,
                depth - 1,
                heading,
                _scope(passage),
                stated_values(passage.text),
                traits(held, terms),
                passage.cut,
                passage.kind,
                term,
            )
        )
    return tuple(read)


def _scope(passage: Passage) -> tuple[int, int, int]:
    """What a passage is read with: the entry of its label, or its paragraph when it sits under none (marker 0)."""
    return (0, passage.entry, 0 if passage.entry else passage.block)


def _instructs_a_model(block: str) -> bool:
    """True for a paragraph that gives instructions to a model or to whoever answers (a planted injection)."""
    return bool(injection_patterns(block)) or bool(_ADDRESSES_A_MODEL.search(block))


def stored_reading(text: str, page_title: str, section: str) -> str:
    """The reading of a chunk as its payload stores it: `read_chunk`, packed."""
    return pack(read_chunk(text, page_title, section), text)


def pack(found: Sequence[Candidate], text: str) -> str:
    """`found`, the reading of the chunk holding `text`, as one string (see the module's docstring)."""
    labels: dict[tuple[frozenset[str], str], int] = {}
    rows: list[list[Any]] = []
    for candidate in found:
        label = -1
        if candidate.label or candidate.term:
            label = labels.setdefault((candidate.label, candidate.term), len(labels))
        rows.append([
            _span(candidate, text),
            candidate.position, candidate.depth, candidate.scope[1], candidate.scope[2],
            candidate.kind.value[0], int(candidate.cut), "".join(sorted(kind[0] for kind in candidate.values)),
            _joined(candidate.terms), label, candidate.traits.words, candidate.traits.flags,
        ])  # fmt: skip
    heading = _joined(found[0].heading) if found else ""  # every passage's: its chunk's
    return _ENCODER.encode([ANALYSER_VERSION, heading, [[_joined(t), term] for t, term in labels], rows])


def _span(candidate: Candidate, text: str) -> list[int | str] | str:
    """Where `text` holds the candidate's text (see the module's docstring), or that text when it does not."""
    before = CUT_BEFORE if candidate.cut and candidate.text.startswith(CUT_BEFORE) else ""
    after = CUT_AFTER if candidate.cut and candidate.text.endswith(CUT_AFTER) else ""
    own = candidate.text[len(before) : len(candidate.text) - len(after)]
    start = text.find(own)
    if start < 0:
        return candidate.text
    return [start, start + len(own), before, after] if before or after else [start, start + len(own)]


def is_current(packed: object) -> bool:
    """Whether `packed` is a reading this analyser packed (what an index of its version stores with each chunk)."""
    return isinstance(packed, str) and packed.startswith(_PREFIX)


@functools.lru_cache(maxsize=4096)  # the same chunks come back as evidence question after question
def unpack(packed: str, text: str) -> tuple[Candidate, ...]:
    """The reading `pack` wrote of the chunk holding `text` (ValueError when `packed` is no reading this analyser
    packed)."""
    if not is_current(packed):
        raise ValueError(f"not a reading of analyser version {ANALYSER_VERSION}: {packed[:20]!r}")
    _, heading_terms, label_rows, rows = json.loads(packed)
    heading = _terms(heading_terms)
    labels = [(_terms(terms), term) for terms, term in label_rows]
    none: tuple[frozenset[str], str] = (frozenset(), "")
    found = []
    for span, position, depth, entry, paragraph, kind, cut, values, terms, label, words, flags in rows:
        label_terms, term = labels[label] if label >= 0 else none
        found.append(
            Candidate(
                _text(span, text),
                0,
                position,
                0.0,
                _terms(terms),
                label_terms,
                depth,
                heading,
                (0, entry, paragraph),
                _stated(values),
                Traits.of_flags(words, flags),
                bool(cut),
                _KINDS[kind],
                term,
            )
        )
    return tuple(found)


def _text(span: list[Any] | str, text: str) -> str:
    """A passage's text from its `_span`."""
    if isinstance(span, str):
        return span
    if len(span) == 2:
        return text[span[0] : span[1]]
    return f"{span[2]}{text[span[0] : span[1]]}{span[3]}"


def _joined(terms: frozenset[str]) -> str:
    return " ".join(sorted(terms))


def _terms(joined: str) -> frozenset[str]:
    return frozenset(joined.split(" ")) if joined else frozenset()


@functools.cache  # a few combinations of four kinds
def _stated(initials: str) -> frozenset[str]:
    return frozenset(_VALUES[initial] for initial in initials)
