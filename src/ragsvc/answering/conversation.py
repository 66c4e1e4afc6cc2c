"""Conversations: a question in a session that brings no history of its own continues the session's stored turns,
each answered turn is stored before its answer goes out, and a follow-up is searched as a standalone question.

A session is its creator's: another caller naming it gets NOT_FOUND, before anything is read or written. A turn
whose evidence the caller's tags no longer cover is left out of the history, so it never reaches a prompt; a new
turn's evidence includes that of the turns its prompt held (an answer may repeat them).

The same rules hold when a session is read back or deleted over gRPC (`read`, `forget`): only its owner reads it,
without the turns its tags no longer cover; its owner, or an admin of its tenant, deletes it. Anyone else gets
the NOT_FOUND of a session that does not exist. Deleting a session also erases the text of its rows in the audit
log (their metadata stays: `storage.answers`).

A follow-up ("How long is the grace period?" after "What happens on SIGTERM?") finds nothing searched on its own.
With a model that follows instructions it is condensed with the conversation into a standalone question, a short
call bounded by RAG_CONDENSE_TIMEOUT_SECONDS: the one LLM call an answer waits for before its own generation starts.
Without one, or when that call fails, the rule `follow_up_search` rewrites it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ragsvc.access import Evidence
from ragsvc.answering.deadlines import RequestBudget
from ragsvc.answering.usage import UsageLedger
from ragsvc.domain import Answer, CallPurpose, ChatMessage, QueryRewrite, Question, Retrieval, Role, SearchQuery
from ragsvc.errors import NotFound, RagError
from ragsvc.generation.base import Generator
from ragsvc.judge import LLMJudge
from ragsvc.lexical import STOPWORDS, content_terms, key_phrases, question_terms, stem
from ragsvc.paraphrase import plain
from ragsvc.relevance import asks_how_to
from ragsvc.retrieval.layout import AccessPolicy
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.sessions import SessionKey, SessionStore, StoredMessage, StoredTurn


@dataclass(frozen=True, slots=True)
class SessionPage:
    """A page of a session as its owner may read it: the turns its tags cover, and the sequence number the next
    page starts after (None: this is the last page)."""

    key: SessionKey
    created_at: datetime | None
    updated_at: datetime | None
    turns: tuple[StoredTurn, ...]
    next_after: int | None


_log = logging.getLogger(__name__)

# A follow-up that points back at the conversation: a pronoun or a "the other one" ...
_REFERS_BACK = re.compile(
    r"\b(it|its|it's|they|them|their|this|that|these|those|there|one|ones|former|latter)\b", re.IGNORECASE
)
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


@dataclass(frozen=True, slots=True)
class Turn:
    """A question in its conversation: `question` carries the history it is answered with; `held` is the evidence
    of the stored turns in that history (the new turn's evidence includes it: its answer may repeat them)."""

    question: Question
    held: Evidence = field(default_factory=Evidence)


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What deleting a session removed: its turns, and the audit rows whose text was erased."""

    turns: int
    audit_records: int


class Conversation:
    def __init__(
        self, sessions: SessionStore | None, access: AccessPolicy | None = None, *, answers: AnswerLog | None = None
    ) -> None:
        self._sessions = sessions
        self._access = access or AccessPolicy()
        self._answers = answers  # the audit log, whose text of a deleted session is erased with it

    async def begin(self, question: Question) -> Turn:
        """`question` as its session continues it: with the session's readable turns as history when it brings
        none of its own; NotFound when the session is another's."""
        if self._sessions is None or not question.session_id:
            return Turn(question)
        key = SessionKey.of(question)
        if await self._sessions.owner(key) not in (None, question.caller):
            raise _unknown(key)
        if question.chat_history:
            return Turn(question)
        stored = await self._readable(self._sessions, key, question)
        held = Evidence()
        for message in stored:
            held = held.merged(message.evidence or Evidence())
        return Turn(dataclasses.replace(question, chat_history=tuple(m.message for m in stored)), held)

    async def remember(self, turn: Turn, answer: Answer, retrieval: Retrieval) -> None:
        """Store the turn, drawn from `retrieval`'s chunks and the session turns its prompt held."""
        question = turn.question
        if self._sessions is None or not question.session_id or question.dry_run:
            return
        key = SessionKey.of(question)
        if await self._sessions.claim(key, question.caller, question.user_tags) != question.caller:
            raise _unknown(key)
        evidence = Evidence.of(scored.chunk for scored in (*retrieval.hits, *retrieval.rejected)).merged(turn.held)
        messages = (ChatMessage(Role.USER, question.query), ChatMessage(Role.ASSISTANT, answer.text))
        cited = dict.fromkeys(citation.chunk.document_id for citation in answer.citations)
        await self._sessions.append(key, messages, evidence, tuple(cited))

    async def read(self, key: SessionKey, caller: str, user_tags: Sequence[str], *, after_seq: int, limit: int) -> SessionPage:
        """Up to `limit` turns after message `after_seq` of `caller`'s session, less those `user_tags` do not
        cover; NotFound when the session is not `caller`'s (or does not exist)."""
        sessions = self._stored()
        record = await sessions.record(key)
        if record is None or record.owner != caller:
            raise _unknown(key)
        turns = await sessions.turns(key, after_seq=after_seq, limit=limit + 1)  # one more: is there a next page?
        page = turns[:limit]
        readable = tuple(turn for turn in page if self._may_read(turn.evidence, user_tags))
        next_after = page[-1].seq + 1 if len(turns) > limit else None
        return SessionPage(key, record.created_at, record.updated_at, readable, next_after)

    async def forget(self, key: SessionKey, caller: str, *, tenant_admin: bool) -> Forgotten:
        """Delete the session and its turns, and erase the text of its audit rows; NotFound when it does not
        exist, or is another caller's and `tenant_admin` (an admin key of the session's tenant) is false."""
        sessions = self._stored()
        owner = await sessions.owner(key)
        if owner is None or (owner != caller and not tenant_admin):
            raise _unknown(key)
        # The audit text first: should the delete fail after it, a retry still finds the session.
        erased = await self._answers.erase_session(key.tenant_id, key.session_id) if self._answers is not None else 0
        return Forgotten(await sessions.delete(key), erased)

    def _stored(self) -> SessionStore:
        if self._sessions is None:
            raise NotFound("this server stores no sessions")
        return self._sessions

    def _may_read(self, evidence: Evidence | None, user_tags: Sequence[str]) -> bool:
        """Whether a caller holding `user_tags` may see a turn drawn from `evidence` (never one stored without
        its evidence)."""
        return evidence is not None and self._access.covers(evidence, user_tags)

    async def _readable(self, sessions: SessionStore, key: SessionKey, question: Question) -> list[StoredMessage]:
        """The session's stored messages the question's tags may read."""
        return [stored for stored in await sessions.history(key) if self._may_read(stored.evidence, question.user_tags)]


def _unknown(key: SessionKey) -> NotFound:
    """What naming another caller's session gets: NOT_FOUND naming the id only (nothing says whose it is)."""
    return NotFound(f"no session {key.session_id!r}", metadata={"session_id": key.session_id})


class Condenser:
    """What a question is searched as: by the model when it follows instructions and `by_model` is on (within
    `timeout_s`), else (and whenever that call fails) by the rule."""

    def __init__(self, generator: Generator, *, default_model: str, by_model: bool, timeout_s: float) -> None:
        self._generator = generator
        self._default_model = default_model
        self._by_model = by_model and generator.capabilities.follows_instructions
        self.timeout_s = timeout_s

    async def search_for(self, question: Question, budget: RequestBudget, ledger: UsageLedger) -> SearchQuery:
        if not _turns(question.chat_history):
            return SearchQuery(question.query)
        if not self._by_model:
            return SearchQuery(follow_up_search(question.query, question.chat_history), QueryRewrite.RULE)
        model = question.model or self._default_model
        deadline = budget.stage("condense", self.timeout_s, "RAG_CONDENSE_TIMEOUT_SECONDS")
        judge = LLMJudge(
            self._generator,
            model=model,
            on_usage=lambda usage: ledger.record(CallPurpose.CONDENSE, self._generator, model, usage),
            deadline=deadline.at,
        )
        try:
            async with asyncio.timeout_at(deadline.at):
                condensed = await judge.condense(question.chat_history, question.query)
        except (RagError, TimeoutError) as exc:
            _log.warning("condensing the follow-up failed, rewriting it by rule: %s", exc)
            condensed = None
        if condensed is None:
            return SearchQuery(follow_up_search(question.query, question.chat_history), QueryRewrite.RULE_FALLBACK)
        return SearchQuery(condensed, QueryRewrite.LLM)


def follow_up_search(query: str, history: Sequence[ChatMessage]) -> str:
    """`query` as a standalone search: a follow-up that lacks a subject of its own (see `lacks_subject`) gets the
    subject words of the earlier questions it continues, in place of the pronoun that stands for them ("How do I
    migrate away from it?" -> "How do I migrate away from md5 authentication method?"), else before it
    (`with_subject`)."""
    turns = _turns(history)
    if not turns or not lacks_subject(query, turns[-1][1]):
        return query
    subject = _subject(turns, own_action=asks_how_to(query))
    pronoun = _standing_for_the_subject(query)
    if not subject or pronoun is None:
        return with_subject(query, history)
    possessive = pronoun.group().lower() == "its"
    return query[: pronoun.start()] + subject + ("'s" if possessive else "") + query[pronoun.end() :]


def with_subject(query: str, history: Sequence[ChatMessage]) -> str:
    """`query` after the subject words of the earlier questions (the retrieve stage's second try for a follow-up
    that seemed to stand alone but finds nothing searched as asked)."""
    return " ".join(filter(None, [_subject(_turns(history), own_action=asks_how_to(query)), query.strip()]))


def _subject(turns: Sequence[tuple[str, str]], *, own_action: bool) -> str:
    """The subject words of the earlier questions, the latest back to the first that had its own. A follow-up that
    asks how to do something (`own_action`: "and how do I delete one?") brings its own action, so the earlier
    questions' actions are left out; any other follow-up is about what they asked ("What if I don't pass -D?"
    after "How do I start the server by hand?"), so every word of theirs that is not a stopword is carried."""
    subjects: list[str] = []
    for index in range(len(turns) - 1, -1, -1):
        question = turns[index][0]
        subjects.insert(0, _subject_words(question) if own_action else _content_words(question))
        if index == 0 or not lacks_subject(question, turns[index - 1][1]):
            break
    return " ".join(filter(None, subjects))


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
