"""Cheap lexical analysis shared by the extractive generator and answer validation: content terms of a text."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# The version of the analyser that writes what is stored with a chunk: its index terms (`index_terms`) and its reading
# (`reading.chunks`: its passages, their terms, values and labels, packed). An index records the version it was
# written with, and a server whose analyser differs refuses to serve it (its terms would silently not match the
# questions' terms, its readings not be what this reader reads). Raise it with any change to what `index_terms`
# returns, to what `chunks.read_chunk` reads (passages, terms, values, the injection check) or to how it is packed:
# tests/reading/test_chunks.py holds a fingerprint of both for sample chunks, which fails until it is raised.
# 2: the chunk's reading stored with it.
ANALYSER_VERSION = 2

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing done down during each either else even ever every for from
    further get gets got had has have having he her here hers herself him himself his how however i if in into
    is it its itself just let like may me might more most much must my myself no nor not now of off often on
    once only or other our ours ourselves out over own per please same shall she should so some such tell than
    that the their theirs them themselves then there these they this those through thus to too under until up
    upon us use used using very via was we were what when where whether which while who whom whose why will
    with within without would yet you your yours yourself yourselves
    """.split()
)
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def content_terms(text: str) -> list[str]:
    """The stemmed words of `text` that carry meaning (stopwords and one-letter words removed), in order."""
    return list(_terms(_tokens(text)))


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower().replace("\u2019", "'"))


def _terms(tokens: Iterable[str]) -> Iterator[str]:
    for token in tokens:
        token = token.removesuffix("'s")
        if token not in STOPWORDS and "'" not in token and (len(token) > 1 or token.isdigit()):
            yield stem(token)


@functools.lru_cache(maxsize=1 << 16)  # words repeat: stem each once
def stem(word: str) -> str:
    """A light suffix stripper: plurals, -ing and -ed, -ion after t or s, a final e, so "configures",
    "configured", "configuring" and "configure" meet, and so do "connect" and "connections", "authenticate" and
    "authentication"."""
    if word.isdigit() or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> run
            break
    if word.endswith(("tion", "sion")) and len(word) > 6:
        word = word[:-3]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


_CLAUSE_BREAK = re.compile(r"[.,;:!?()\[\]{}\"\u201c\u201d]|\s[-\u2013\u2014]\s")
MAX_PHRASE_TERMS = 4


@functools.lru_cache(maxsize=1024)  # an answer's sentences are read as they stream, then again when it is validated
def key_phrases(text: str) -> tuple[tuple[str, ...], ...]:
    """The key phrases of `text` in the RAKE manner: maximal runs of content words between stopwords and
    punctuation (runs longer than MAX_PHRASE_TERMS are cut into pieces of that size), each as its stemmed
    terms; repeated phrases once, in order of appearance."""
    phrases: dict[tuple[str, ...], None] = {}
    for clause in _CLAUSE_BREAK.split(text.lower().replace("\u2019", "'")):
        run: list[str] = []
        for token in [*_TOKEN.findall(clause), ""]:  # "" flushes the last run
            token = token.removesuffix("'s")
            if token and token not in STOPWORDS and "'" not in token and (len(token) > 1 or token.isdigit()):
                run.append(stem(token))
                continue
            for start in range(0, len(run), MAX_PHRASE_TERMS):
                phrases.setdefault(tuple(run[start : start + MAX_PHRASE_TERMS]), None)
            run = []
    return tuple(phrases)


# A compound name: words joined by "_" or "." ("max_connections", "pg_hba.conf", "9.2"), kept whole as a term.
# It starts where a word does and never backtracks (possessive runs): a match cannot start inside a word where it
# failed at the word's start, and trying there made the search quadratic in word length.
_COMPOUND = re.compile(r"(?<![a-z0-9])[a-z0-9]++(?:[._][a-z0-9]++)+")


def compound_terms(text: str) -> list[str]:
    """The compound names of `text` (lower case, a trailing dot dropped), in order."""
    return _COMPOUND.findall(text.lower())


# A command-line option ("-D", "--pgdata"), kept whole as a term: not inside a word ("read-only") or a number ("-1").
# It opens with the dash, checked after it, so that the search runs from dash to dash (1.5 against 20 us on 100 words).
_OPTION = re.compile(r"-(?<![\w-]-)(?:-[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*|[A-Za-z])(?![\w-])")


def option_terms(text: str) -> list[str]:
    """The command-line options of `text`, in order: a long one in lower case, a short one as written ("-D" is not
    "-d")."""
    return [option if len(option) == 2 else option.lower() for option in _OPTION.findall(text)]


def index_terms(text: str) -> list[str]:
    """The distinct terms a chunk is indexed under for corpus statistics: its content terms, its compound names
    and its command-line options, sorted."""
    return sorted({*_terms(set(_tokens(text))), *compound_terms(text), *option_terms(text)})  # a word stemmed once


_POSSESSIVE = re.compile(r"['\u2019]s$")
_JOINED = re.compile(r"[._]")
_JOINED_OR_DIGIT = re.compile(r"[._\d]")
# A word of the question as written: letters and digits, joined by "_", "." or "-" inside a name.
_QUESTION_WORD = re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*(?:['\u2019][A-Za-z]+)?")


@dataclass(frozen=True, slots=True)
class QuestionTerm:
    """One term of the question: as indexed (`term`), as written (`surface`), and whether it is written as a
    name."""

    term: str
    surface: str
    named: bool


def question_terms(query: str) -> list[QuestionTerm]:
    """The question's distinct terms in order: compound names whole, other words stemmed, stopwords dropped; then
    its command-line options ("--pgdata"), names too."""
    found: dict[str, QuestionTerm] = {}
    for position, match in enumerate(_QUESTION_WORD.finditer(query)):
        surface = _POSSESSIVE.sub("", match.group().strip("._-"))
        lower = surface.lower().replace("\u2019", "'")
        if "'" in lower or lower in STOPWORDS:
            continue  # a contraction ("don't") carries no subject
        if _JOINED.search(lower):
            terms = [lower]  # a compound name ("max_connections", "9.2") is indexed whole (compound_terms)
        else:
            terms = [t for t in index_terms(surface) if "." not in t and "_" not in t]
        for term in terms:
            if term not in found:
                found[term] = QuestionTerm(term, surface, _written_as_name(surface, first=position == 0))
    for option in option_terms(query):
        found.setdefault(option, QuestionTerm(option, option, named=True))
    return list(found.values())


def _written_as_name(word: str, *, first: bool) -> bool:
    """A name: a compound, digits, an acronym, mixed case, or a capital inside the sentence."""
    if _JOINED_OR_DIGIT.search(word):
        return True
    if len(word) >= 2 and word.isupper():
        return True
    rest = word[1:]
    if rest != rest.lower():  # a capital after the first letter
        return True
    return word[:1].isupper() and not first


def idf(frequency: int, chunks: int) -> float:
    """BM25's inverse document frequency of a term found in `frequency` of `chunks` chunks."""
    return math.log(1 + (chunks - frequency + 0.5) / (frequency + 0.5))
