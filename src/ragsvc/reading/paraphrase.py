"""The words users ask with and the words the documentation answers with, made to meet: a phrase a user writes is
read as the documentation's word ("switch it off" as "disable", "by hand" as "manually"), and words for the same
action or quality count as one ("lower", "decrease", "reduce"; "safe", "secure"). Used where questions are matched
against passages word by word: the answerability gate and the extractive selection."""

from __future__ import annotations

import re

_VERB = r"(?<!\bthe )(?<!\ba )\b(?:turn|switch)(?:s|ed|ing)?"  # a verb: not after an article ("the switch on")
_OBJECT = r"(?:it|them|this|that|these|those)"
# Phrases users write, and the documentation's word for each.
# Each after the words it cannot match without one of (lower case): most texts hold none, and are not searched.
_VERBS = ("turn", "switch")
_PHRASES: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = tuple(
    (needs, re.compile(pattern, re.IGNORECASE), word)
    for needs, pattern, word in (
        (_VERBS, rf"{_VERB}\s+(?:{_OBJECT}\s+)?off\b", "disable"),  # "switch it off", not "the switch off the main"
        (_VERBS, rf"{_VERB}\s+(?:{_OBJECT}\s+)?on\b", "enable"),
        (("by hand",), r"\bby hand\b", "manually"),
        (("out of the box",), r"\bout of the box\b", "by default"),
        (("fill",), r"\bfill(?:s|ed|ing)? up\b", "full"),
        (("same time", "simultaneous"), r"\bat the same time\b|\bsimultaneous(?:ly)?\b", "concurrent"),
    )
)
# Stems of words for the same action or quality: each stands for the first of its group.
_SAME_SENSE = {
    stem: group[0]
    for group in (
        ("disabl", "deactivat"),
        ("enabl", "activat"),
        ("lower", "decreas", "reduc"),
        ("rais", "increas"),
        ("saf", "secur"),
    )
    for stem in group
}


def plain(text: str) -> str:
    """`text` with the phrases users write read as the documentation's words."""
    lower = text.lower()
    for needs, pattern, word in _PHRASES:
        if any(needed in lower for needed in needs):
            text = pattern.sub(word, text)
    return text


def same_sense(terms: list[str]) -> list[str]:
    """Stemmed `terms` with words for the same action or quality as one."""
    return [_SAME_SENSE.get(term, term) for term in terms]
