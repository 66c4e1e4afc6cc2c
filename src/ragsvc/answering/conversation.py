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
Without one, or when that call fails, the reader's rule (Reader.follow_up_search) rewrites it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ragsvc.access import AccessPolicy, Evidence
from ragsvc.answering.deadlines import RequestBudget
from ragsvc.answering.usage import UsageLedger
from ragsvc.domain import Answer, CallPurpose, ChatMessage, QueryRewrite, Question, Retrieval, Role, SearchQuery
from ragsvc.errors import NotFound, RagError
from ragsvc.generation.base import Generator
from ragsvc.judge import LLMJudge
from ragsvc.reading import Reader
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

    def __init__(self, generator: Generator, reader: Reader, *, default_model: str, by_model: bool, timeout_s: float) -> None:
        self._generator = generator
        self._reader = reader
        self._default_model = default_model
        self._by_model = by_model and generator.capabilities.follows_instructions
        self.timeout_s = timeout_s

    async def search_for(self, question: Question, budget: RequestBudget, ledger: UsageLedger) -> SearchQuery:
        if not any(message.role is Role.USER for message in question.chat_history):
            return SearchQuery(question.query)
        if not self._by_model:
            return SearchQuery(self._reader.follow_up_search(question.query, question.chat_history), QueryRewrite.RULE)
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
            rewritten = self._reader.follow_up_search(question.query, question.chat_history)
            return SearchQuery(rewritten, QueryRewrite.RULE_FALLBACK)
        return SearchQuery(condensed, QueryRewrite.LLM)
