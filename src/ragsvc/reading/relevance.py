"""How well each passage of the evidence answers a question: what the extractive generator quotes.

A passage (a sentence, a sentence with the short code block it introduces, a table row: see ragsvc.reading.passages) is
judged with what it sits under: its chunk's page title and section heading, its label (a definition term such as
"max_connections (integer)") and the entry or paragraph around it. Its score adds

- **its words**: each query term found counts its rarity among the candidate passages (IDF; a label counts once
  for its entry), fully in the passage, more in its label (a passage under a label is about it; the more so the
  closer it follows the label: an entry's first sentences define it), less in its heading or page title; a
  follow-up's search terms that the user did not write (an earlier turn's subject) count CARRIED_WEIGHT; what users
  write and what the documentation says meet (`ragsvc.reading.paraphrase`: "switch it off" and "disables", "lower" and
  "decreasing");
- **its surroundings**: a share of the best word score in its entry (or paragraph), so that "The default is
  three." under a label that matches the question counts;
- **the value asked for**: when the question asks for an amount ("how many", "how long", "default" ...), a
  passage stating one of that kind (a duration, a size, a number) gains in proportion to its surroundings, and
  one stating it as the default ("The default is five minutes.") gains DEFAULT_WEIGHT of its score, unless the
  question asks for another bound ("maximum", "range", "recommended") without saying "default", or asks yes or no;
- **what to use**: when the question asks how to do something ("How do I ...", "Which command ..."), a passage
  that names something to use (code, a name such as pg_hba.conf, a keyword in capitals such as CREATEDB) gains
  INSTRUMENT_WEIGHT of its score, and the best such passage leads the answer (TOOL_WITHIN);

and a passage that only points elsewhere ("For more information see Section 25.1.5.") keeps POINTER_WEIGHT of it; a
sentence the chunk's border cuts (the whole of it is in the neighbouring chunk, which may not be in the context)
keeps CUT_WEIGHT, and is quoted as far as the chunk holds it, marked "…".

All is weighted by its chunk's retrieval relevance. A passage under the label of another name than the one the
question asks about ("wal_segment_size (integer)" for "max_wal_size default") keeps a small share of its word score
only. Paragraphs that address instructions to the reader or to a model (prompt injection planted in a document)
are never candidates (`chunks.read_chunk`: what is read of a chunk whatever the question)."""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from ragsvc.reading.paraphrase import plain, same_sense
from ragsvc.reading.passages import Kind
from ragsvc.reading.text import compound_terms, content_terms, option_terms
from ragsvc.reading.traits import Traits
from ragsvc.reading.values import ASKS_HOW_MUCH, answers_value, asked_values

# How much a query term counts when found in the passage's label, or only in its section heading or page title.
LABEL_WEIGHT = 1.2  # a passage under a label is about it: more than one naming it in passing
LABEL_DECAY = 0.8  # per passage before it under the label: an entry's first sentences define it
HEADING_WEIGHT = 0.5
CONTEXT_WEIGHT = 0.25  # share of the best word score of its entry or paragraph a passage inherits
VALUE_WEIGHT = 1.0  # share of that best score a passage stating the asked-for kind of value gains
OTHER_ENTRY_WEIGHT = 0.3  # of the word score of a passage under the label of another name than the one asked about
CARRIED_WEIGHT = 0.5  # of a follow-up's search term the user did not write (the earlier turns' subject)
INSTRUMENT_WEIGHT = 1.0  # gained by a passage naming what to use (code, a name, a keyword) when asked how to do
TOOL_WITHIN = 0  # when asked how, the answer leads with the best passage naming what to use (0-based place)
POINTER_WEIGHT = 0.3  # of the score of a passage that points elsewhere ("For more information see Section 25.1.5.")
DEFAULT_WEIGHT = 1.0  # gained by a passage stating the asked-for kind of value as the default ("The default is 5min.")
CUT_WEIGHT = 0.5  # of the score of a sentence the chunk's border cuts, quoted as far as the chunk holds it

# A question asking how to do something, or which command, function or setting does it (also when it continues a
# conversation: "and how do I delete one?").
_PROCEDURAL = re.compile(
    r"^\W*(?:(?:and|also|but|so|then)\W+)?(?:how\s+(?:do|can|should|would|could|to)\b|(?:what|which)\s+(?:command|function|view|tool|utility|program|"
    r"setting|parameter|option|file|signal)s?\b)",
    re.IGNORECASE,
)
# What a passage tells the reader to use, besides a name written as one (`_names`): code, or an SQL/command keyword in
# capitals.
_CODE_OR_KEYWORD = re.compile(r"`|\b[A-Z]{3,}(?:\s+[A-Z]{2,})*\b")
# A passage that sends the reader to another part of the documentation instead of saying something itself.
_POINTER = re.compile(
    r"\b(?:see|found in|described in|discussed in|explained in|covered in|refer to|documented in)\b[^.]{0,60}?"
    r"\b(?:section|chapter|table|appendix|part)\s+[\dIVX]",
    re.IGNORECASE,
)
# A passage stating a default ("The default is three.", "5432 by default"); a question asking yes or no, or for
# another bound than the default (see `_asks_for_the_default`).
_DEFAULT = re.compile(r"\bdefaults?\b", re.IGNORECASE)
_YES_OR_NO = re.compile(r"^\W*(?:is|are|was|were|does|do|did|can|could|will|would|should|has|have)\b", re.IGNORECASE)
_ASKS_ANOTHER_BOUND = re.compile(
    r"\b(?:range|maximum|minimum|max|min|highest|lowest|largest|smallest|at most|at least|up to|limit|recommend\w*|suggest\w*)\b",
    re.IGNORECASE,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """A passage of the context that may be quoted, with what it is judged by."""

    text: str
    marker: int
    position: int  # order within its chunk
    relevance: float  # the chunk's retrieval score
    terms: frozenset[str]  # stemmed content terms and compound names
    label: frozenset[str]  # terms of the label it sits under
    depth: int  # passages before it under that label, in its chunk (0: the entry's first, its definition)
    heading: frozenset[str]  # terms of its chunk's section heading and page title
    scope: tuple[int, int, int]  # (marker, entry, paragraph): the passages it is read with
    values: frozenset[str]  # the kinds of value it states (lexical.stated_values)
    traits: Traits  # what its text shows, as the trained reader reads it
    cut: bool = False  # a sentence the chunk's border cuts: `text` is the part the chunk holds, "…" where it is cut
    kind: Kind = Kind.SENTENCE
    term: str = ""  # the term a definition list defines it under ("-f, --force"; not a section heading), or ""

    def placed(self, marker: int, relevance: float) -> Candidate:
        """The passage as read in a context: at its chunk's `marker` (from 1), weighed by its chunk's retrieval
        `relevance` (what `dataclasses.replace` would make, without its per-call look at the fields: 1.6 of 3.1 us)."""
        return Candidate(
            self.text, marker, self.position, relevance, self.terms, self.label, self.depth, self.heading,
            (marker, *self.scope[1:]), self.values, self.traits, self.cut, self.kind, self.term,
        )  # fmt: skip

    @property
    def quote(self) -> str:
        """The passage as an answer quotes it: after the term it defines when it does not name it ("--force: Allow
        adding otherwise ignored files."), since a definition list says what it is about only in its term."""
        if self.term and self.term.lower() not in self.text.lower():
            return f"{self.term}: {self.text}"
        return self.text


def quoted_answer(quotes: Sequence[Candidate]) -> str:
    """An extractive answer quoting `quotes`, best first, each followed by its chunk's marker; a term a definition
    list defines is named once."""
    named: set[str] = set()
    parts = []
    for quote in quotes:
        parts.append(f"{quote.text if quote.term in named else quote.quote} [#{quote.marker}]")
        named.add(quote.term)
    return " ".join(parts)


def passage_terms(text: str) -> list[str]:
    """Content terms, compound names ("max_connections" is a term besides its parts) and command-line options."""
    return [*same_sense(content_terms(plain(text))), *compound_terms(text), *option_terms(text)]


def query_terms(query: str) -> list[str]:
    """The query's compound names and command-line options, and its other content terms: a compound's or an
    option's words do not count again, nor the word asking for an amount ("how many", "how long": the value asked
    for is judged on its own, see `values`)."""
    whole = [*compound_terms(query), *option_terms(query)]
    rest = ASKS_HOW_MUCH.sub(" ", query.lower())  # "many" of "how many clients" is not what a passage must say
    for term in whole:
        rest = rest.replace(term.lower(), " ")
    return sorted({*whole, *same_sense(content_terms(plain(rest)))})


def ranked(query: str, found: Sequence[Candidate], *, question: str = "") -> list[Candidate]:
    """The candidates worth quoting for `query`, best first (see the module's docstring); a candidate is worth
    quoting when a query term is in it or its label, or when it states the value asked for in an entry or
    paragraph that holds a query term. `question` is the user's own words when `query` is a follow-up's search
    (earlier turns' subject words added): those words then count CARRIED_WEIGHT. Ties: marker, position."""
    terms = query_terms(query)
    if not terms or not found:
        return []
    own_terms = set(query_terms(question)) if question else set(terms)
    count = len(found)
    frequency = _frequencies(found)
    idf = {
        term: math.log(1 + (count - frequency[term] + 0.5) / (frequency[term] + 0.5))
        * (1.0 if term in own_terms else CARRIED_WEIGHT)
        for term in terms
    }
    total = sum(idf.values())
    words = {id(c): sum(idf[term] * _found(term, c) for term in terms) / total for c in found}
    surroundings: dict[tuple[int, int, int], float] = {}
    for candidate in found:
        surroundings[candidate.scope] = max(surroundings.get(candidate.scope, 0.0), words[id(candidate)])
    asked = asked_values(query)
    named = _names(own_terms)  # the setting asked about, not one an earlier turn named
    procedural = asks_how_to(question or query)
    asks_default = _asks_for_the_default(question or query)
    result: list[tuple[float, Candidate]] = []
    for candidate in found:
        own, around = words[id(candidate)], surroundings[candidate.scope]
        value = answers_value(asked, candidate.values)
        anchored = any(term in candidate.terms or term in candidate.label for term in terms)
        if not anchored and not (value and around):
            continue
        labelled = _names(candidate.label)
        if named and labelled and not named & labelled:  # the entry of another setting than the one asked about
            score = OTHER_ENTRY_WEIGHT * own
        else:
            score = own + (CONTEXT_WEIGHT + VALUE_WEIGHT * value) * around
        if asks_default and value == 1.0 and _DEFAULT.search(candidate.text):
            score *= 1 + DEFAULT_WEIGHT
        if procedural and _names_a_tool(candidate):
            score *= 1 + INSTRUMENT_WEIGHT
        if _POINTER.search(candidate.text):
            score *= POINTER_WEIGHT
        if candidate.cut:
            score *= CUT_WEIGHT
        result.append((score * (0.5 + candidate.relevance), candidate))
    result.sort(key=lambda pair: (-pair[0], pair[1].marker, pair[1].position))
    order = [candidate for _, candidate in result]
    return _naming_a_tool_within(TOOL_WITHIN, order) if procedural else order


def _asks_for_the_default(question: str) -> bool:
    """Whether the value `question` asks for is a setting's default: it says "default", or asks for a value ("how
    often", "how many") without naming another bound ("maximum", "range", "recommended"); not a yes-or-no question
    ("Are data pages checksummed by default?" is answered by a statement, not a value)."""
    if _YES_OR_NO.search(question):
        return False
    return bool(_DEFAULT.search(question)) or not _ASKS_ANOTHER_BOUND.search(question)


def _naming_a_tool_within(place: int, order: list[Candidate]) -> list[Candidate]:
    """`order` with its best passage that names something to use moved up to `place` (0-based) when it ranks lower:
    an answer to "How do I back up a single database?" names pg_dump."""
    tools = [i for i, candidate in enumerate(order) if _names_a_tool(candidate)]
    if tools and tools[0] > place:
        order.insert(place, order.pop(tools[0]))
    return order


def _names_a_tool(candidate: Candidate) -> bool:
    return bool(_names(candidate.terms) or _CODE_OR_KEYWORD.search(candidate.text))


def asks_how_to(question: str) -> bool:
    """Whether `question` asks how to do something, or which command, function or setting does it."""
    return bool(_PROCEDURAL.search(question))


def _frequencies(found: Sequence[Candidate]) -> Counter[str]:
    """In how many passages each term occurs, a label counting once for its entry (every passage under a label
    carries it: counted per passage, the name of the entry asked about would look common)."""
    frequency = Counter(term for candidate in found for term in candidate.terms)
    labels = {candidate.scope: candidate.label for candidate in found if candidate.label}
    frequency.update(term for label in labels.values() for term in label)
    return frequency


def _names(terms: Iterable[str]) -> set[str]:
    """The compound names among `terms` ("max_connections", "pg_hba.conf"; not section numbers such as "20.1")."""
    return {term for term in terms if ("_" in term or "." in term) and any(c.isalpha() for c in term)}


def _found(term: str, candidate: Candidate) -> float:
    """How much a query term counts for a passage: found in it, in its label, in its headings, or not at all."""
    if term in candidate.terms:
        return 1.0
    if term in candidate.label:
        return LABEL_WEIGHT * LABEL_DECAY**candidate.depth
    return HEADING_WEIGHT if term in candidate.heading else 0.0
