"""Follow-ups read as standalone questions, by rule: a follow-up that lacks a subject of its own ("How long do they
get to finish?" after "What happens on SIGTERM?") gets the subject words of the earlier questions it continues
(`follow_up_search`). Every follow-up is also searched after those questions word for word
(`with_earlier_questions`); the answering pipeline keeps whichever evidence the reader judges answers it better."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragsvc.domain import ChatMessage, QueryClass, Role
from ragsvc.reading.classify import classify
from ragsvc.reading.paraphrase import plain
from ragsvc.reading.relevance import asks_how_to
from ragsvc.reading.text import STOPWORDS, content_terms, key_phrases, question_terms, stem

# A follow-up that points back at the conversation: a pronoun or a "the other one" ...
_REFERS_BACK = re.compile(r"\b(it|its|it's|they|them|their|this|that|these|those|there|one|ones|former|latter)\b", re.IGNORECASE)
# ... or one that continues the previous question ("and ...", "what about ...").
_CONTINUES = re.compile(r"^\W*(and|also|but|so|or|then|what about|how about|what if|why not|what else)\b", re.IGNORECASE)
# Words that name an attribute of something rather than the thing: "the default?", "what range is allowed?".
_ATTRIBUTES = frozenset(
    stem(word)
    for word in """default defaults value values range ranges limit limits maximum minimum max min size sizes example
    examples type types option options setting settings unit units allowed valid recommended reason reasons purpose
    difference meaning mean work works happen happens change changed instead""".split()
)
_WORD = re.compile(r"[\w.-]*\w")
_DETERMINERS = frozenset("a an the this that these those my our your its their".split())
# The pronoun a follow-up names the earlier subject with ("they", "them" often stand for something the answer
# brought up: "And how long do they get to finish?") ...
_PERSONAL = re.compile(r"\b(?:it|its)\b", re.IGNORECASE)
# ... and the "it" that stands for nothing: "is it ok to ...", "it is possible to ...", "is it worth ...ing".
_EMPTY_IT = re.compile(
    r"\b(?:is|was|would|will|isn't)\s+(it)\s+\w+\s+(?:to|\w+ing)\b|\b(it)(?:\s+is|'s)\s+\w+\s+to\b", re.IGNORECASE
)


def follow_up_search(query: str, history: Sequence[ChatMessage]) -> str:
    """`query` as a standalone search: a follow-up that lacks a subject of its own (see `lacks_subject`) gets the
    subject words of the earlier questions it continues, in place of the pronoun that stands for them ("How do I
    migrate away from it?" -> "How do I migrate away from md5 authentication method?"), else before it."""
    turns = _turns(history)
    if not turns or not lacks_subject(query, turns[-1][1]):
        return query
    subject = _subject(turns, own_action=asks_how_to(query))
    pronoun = _standing_for_the_subject(query)
    if not subject or pronoun is None:
        return " ".join(filter(None, [subject, query.strip()]))
    possessive = pronoun.group().lower() == "its"
    return query[: pronoun.start()] + subject + ("'s" if possessive else "") + query[pronoun.end() :]


def with_earlier_questions(query: str, history: Sequence[ChatMessage]) -> str:
    """`query` after the earlier questions it continues, word for word (the latest back to the first that had a
    subject of its own): the second search of every follow-up. Where the rule's rewrite (`follow_up_search`) keeps
    a question's subject words only, or judged the follow-up to stand alone ("What Unix permissions does the new
    file get?" after a question about dbm.open), this one keeps all the earlier question said, and none of the
    earlier answers' words."""
    return " ".join(filter(None, [*(q.strip() for q in _continued(_turns(history))), query.strip()]))


def follow_up_searches(query: str, history: Sequence[ChatMessage]) -> tuple[str, ...]:
    """Every search a follow-up condensed by rule gets (what `RetrieveStage` searches): the rule's rewrite, then,
    when it differs, the follow-up after its earlier questions word for word."""
    first = follow_up_search(query, history)
    second = with_earlier_questions(query, history)
    return (first,) if second == first else (first, second)


def _subject(turns: Sequence[tuple[str, str]], *, own_action: bool) -> str:
    """The subject words of the earlier questions a follow-up continues (`_continued`). A follow-up that asks how
    to do something (`own_action`: "and how do I delete one?") brings its own action, so the earlier questions'
    actions are left out; any other follow-up is about what they asked ("What if I don't pass -D?" after "How do I
    start the server by hand?"), so every word of theirs that is not a stopword is carried."""
    words = _subject_words if own_action else _content_words
    return " ".join(filter(None, (words(question) for question in _continued(turns))))


def _continued(turns: Sequence[tuple[str, str]]) -> list[str]:
    """The earlier questions a follow-up continues, in order: the latest back to the first that had a subject of
    its own."""
    continued: list[str] = []
    for index in range(len(turns) - 1, -1, -1):
        continued.insert(0, turns[index][0])
        if index == 0 or not lacks_subject(turns[index][0], turns[index - 1][1]):
            break
    return continued


def _standing_for_the_subject(query: str) -> re.Match[str] | None:
    """The last "it" or "its" of `query` that refers to something, not the empty "it" of "is it ok to ..." or "it is
    possible to ..."."""
    empty = {m.span(group) for m in _EMPTY_IT.finditer(query) for group in (1, 2)}
    referring = [m for m in _PERSONAL.finditer(query) if m.span() not in empty]
    return referring[-1] if referring else None


def lacks_subject(query: str, previous_answer: str = "") -> bool:
    """Whether `query` needs the conversation to be understood: it refers back ("it", "those"), continues ("and
    ...", "what about ..."), names no more than an attribute ("default?"), or asks about something the previous
    answer brought up (a phrase of two words or more from it: "How long is the grace period?")."""
    if _REFERS_BACK.search(query) or _CONTINUES.search(query):
        return True
    if all(term in _ATTRIBUTES for term in content_terms(query)):
        return True
    answered = " " + " ".join(content_terms(previous_answer)) + " "
    return any(len(phrase) > 1 and " " + " ".join(phrase) + " " in answered for phrase in key_phrases(query))


def _subject_words(question: str) -> str:
    """The words of `question` that carry its subject, in order, attribute words left out: its noun phrases (the
    words after "a", "the", ...) and its names ("shared_buffers", "SIGTERM", "md5"), not its verbs ("How do I
    create a database from the shell?" -> "database shell"); every word but stopwords when it has neither."""
    words = _WORD.findall(question)
    names = {term.surface for term in question_terms(question) if term.named}
    picked: list[str] = []
    in_phrase = False
    for word in words:
        lower = word.lower()
        if lower in _DETERMINERS or lower in STOPWORDS:
            in_phrase = lower in _DETERMINERS
        elif in_phrase or word in names:
            picked.append(word)
    if not picked:
        picked = [word for word in words if word.lower() not in STOPWORDS]
    return " ".join(word for word in picked if stem(word.lower()) not in _ATTRIBUTES)


def _content_words(question: str) -> str:
    """The words of `question` but stopwords and attribute words, in order, its phrases read as the documentation's
    words ("by hand" as "manually": `paraphrase.plain`)."""
    words = (word for word in _WORD.findall(plain(question)) if word.lower() not in STOPWORDS)
    return " ".join(word for word in words if stem(word.lower()) not in _ATTRIBUTES)


def _turns(history: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    """The user's questions, each with the answer that followed it ("" when none did)."""
    turns: list[tuple[str, str]] = []
    for message in history:
        if message.role is Role.USER:
            turns.append((message.content, ""))
        elif message.role is Role.ASSISTANT and turns:
            turns[-1] = (turns[-1][0], turns[-1][1] + " " + message.content)
    return turns


class FollowUpRules:
    """The follow-up and classification rules, as a reader offers them (both readers share them)."""

    def follow_up_search(self, query: str, history: Sequence[ChatMessage]) -> str:
        return follow_up_search(query, history)

    def follow_up_searches(self, query: str, history: Sequence[ChatMessage]) -> tuple[str, ...]:
        return follow_up_searches(query, history)

    def classify(self, query: str, history: Sequence[ChatMessage]) -> QueryClass:
        return classify(query, history)
