"""The kinds of value a question asks for ("how long" asks for a duration) and a text states ("after ten
seconds" states one): the extractive answer prefers, and answer validation expects, a passage stating what was
asked."""

from __future__ import annotations

import re

from ragsvc.reading.paraphrase import plain

# The kinds of value a question can ask for, and a text state. A question asking for an amount in general
# ("default", "limit", "what value") accepts any; a sentence states an amount when it holds a number.
DURATION = "duration"
SIZE = "size"
AMOUNT = "amount"
VERSION = "version"  # a release: "which version added", "since 3.35.0"

# "one" and "several" are left out: mostly not amounts ("at any one time", "more than one", "several tables").
_NUMBER = (
    r"(?:\d[\d,.]*|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|"
    r"fifty|sixty|hundred|thousand|million|billion|half)"
)
# The word after "how" that asks for each kind ("how long" asks for a duration).
_HOW_WORDS = {
    DURATION: ("long", "often", "frequently", "soon"),
    SIZE: ("big", "large", "small"),
    AMOUNT: ("many", "much", "far", "fast"),
}
# "how" and the word asking for an amount ("how many clients"): how a question asks, not what it is about.
ASKS_HOW_MUCH = re.compile(rf"\bhow\s+(?:{'|'.join(w for words in _HOW_WORDS.values() for w in words)})\b", re.IGNORECASE)


def _how(kind: str) -> str:
    return rf"\bhow ({'|'.join(_HOW_WORDS[kind])})\b"


_ASKS = {
    DURATION: re.compile(rf"{_how(DURATION)}|\bwhen does\b|\bafter how\b", re.IGNORECASE),
    SIZE: re.compile(rf"{_how(SIZE)}|\bhow much (memory|space|disk|ram|data)\b|\b(what )?size\b", re.IGNORECASE),
    VERSION: re.compile(
        r"\b(which|what) (\S+ )?(release|version)\b|\bsince (when|which)\b|\bin which (release|version)\b", re.IGNORECASE
    ),
    AMOUNT: re.compile(
        rf"{_how(AMOUNT)}|\bdefaults?\b|\b(limit|maximum|minimum|number)\b"
        r"|\bwhat (port|value|percentage|fraction)\b|\bwhat is (it|\S+) set to\b",
        re.IGNORECASE,
    ),
}
_STATES = {
    DURATION: re.compile(
        rf"\b(?:{_NUMBER}|one)[\s-]*(ms|milliseconds?|s|secs?|seconds?|min|minutes?|h|hours?|days?|weeks?|months?|years?)\b"
        r"|\b(once|twice) (a|an|per|every)\b|\bevery (second|minute|hour|day|week)\b",
        re.IGNORECASE,
    ),
    SIZE: re.compile(
        rf"\b(?:{_NUMBER}|one)\s*(bytes?|[kmgt]i?b|[kmgt]ilobytes?|megabytes?|gigabytes?|terabytes?|blocks?|pages?)\b",
        re.IGNORECASE,
    ),
    VERSION: re.compile(r"\b(version|release)s?\s+v?\d+(\.\d+)*\b|(?<![\w.])v?\d+\.\d+\.\d+\b", re.IGNORECASE),
    # A digit inside a name ("sqlite3_soft_heap_limit64()", "utf8", "ipv6") is no amount.
    AMOUNT: re.compile(rf"\b{_NUMBER}\b(?![\w(])|(?<![A-Za-z_])\d(?![A-Za-z_]*\()", re.IGNORECASE),
}
_REFERENCE = re.compile(r"\b(section|chapter|table|figure|example|appendix|part)\s+[\dA-Z][\d.]*", re.IGNORECASE)
_WHY = re.compile(r"^\s*why\b", re.IGNORECASE)


def asked_values(question: str) -> frozenset[str]:
    """The kinds of value `question` asks for: DURATION ("how long", "how often"), SIZE ("how big", "how much
    memory"), VERSION ("which release added"), AMOUNT (any amount: "how many", "default", "what is it set to",
    "limit"); none for a "why" question,
    which asks for a reason. Read with the documentation's words (`paraphrase.plain`: "out of the box" asks for the
    default)."""
    if _WHY.search(question):
        return frozenset()
    question = plain(question)
    return frozenset(kind for kind, pattern in _ASKS.items() if pattern.search(question))


def stated_values(text: str) -> frozenset[str]:
    """The kinds of value `text` states: a number with a time unit (DURATION), with a size unit (SIZE), a release
    number (VERSION), any number outside a name (AMOUNT); a reference such as "Section 25.1.5" or "Table 9.90"
    states none."""
    text = _REFERENCE.sub(" ", text)
    stated = {kind for kind, pattern in _STATES.items() if pattern.search(text)}
    return frozenset(stated | {AMOUNT}) if stated else frozenset()  # "one minute" is an amount too


def answers_value(asked: frozenset[str], stated: frozenset[str]) -> float:
    """How well a text stating `stated` answers a question asking for `asked`: 1 when it states the specific kind
    asked (a duration for "how long") or an amount when any is asked, 0.5 when it states an amount of another
    kind, 0 when it states none (or nothing was asked)."""
    if not asked or AMOUNT not in stated:
        return 0.0
    specific = asked - {AMOUNT}
    if not specific or specific & stated:
        return 1.0
    return 0.5
