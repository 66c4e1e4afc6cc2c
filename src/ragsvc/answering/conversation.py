"""Stored conversations: a question in a session that brings no history of its own continues the session's
stored turns, and each answered turn is stored before its answer goes out.

A session is its creator's: another caller naming it gets NOT_FOUND, before anything is read or written. A turn
whose evidence the caller's tags no longer cover is left out of the history, so it never reaches a prompt; a new
turn's evidence includes that of the turns its prompt held (an answer may repeat them).

The same rules hold when a session is read back or deleted over gRPC (`read`, `forget`): only its owner reads it,
without the turns its tags no longer cover; its owner, or an admin of its tenant, deletes it. Anyone else gets
the NOT_FOUND of a session that does not exist.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ragsvc.access import Evidence
from ragsvc.domain import Answer, ChatMessage, Question, Retrieval, Role
from ragsvc.errors import NotFound
from ragsvc.retrieval.layout import AccessPolicy
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


class Conversation:
    def __init__(self, sessions: SessionStore | None, access: AccessPolicy | None = None) -> None:
        self._sessions = sessions
        self._access = access or AccessPolicy()

    async def with_history(self, question: Question) -> Question:
        """`question` with its session's readable turns as history; NotFound when the session is another's."""
        if self._sessions is None or not question.session_id:
            return question
        key = SessionKey.of(question)
        if await self._sessions.owner(key) not in (None, question.caller):
            raise _unknown(key)
        if question.chat_history:
            return question
        history = tuple(stored.message for stored in await self._readable(self._sessions, key, question))
        return dataclasses.replace(question, chat_history=history)

    async def remember(self, question: Question, answer: Answer, retrieval: Retrieval) -> None:
        """Store the turn, drawn from `retrieval`'s chunks and the session turns its prompt could hold."""
        if self._sessions is None or not question.session_id or question.dry_run:
            return
        key = SessionKey.of(question)
        if await self._sessions.claim(key, question.caller, question.user_tags) != question.caller:
            raise _unknown(key)
        evidence = Evidence.of(scored.chunk for scored in (*retrieval.hits, *retrieval.rejected))
        for stored in await self._readable(self._sessions, key, question):
            evidence = evidence.merged(stored.evidence or Evidence())
        turn = (ChatMessage(Role.USER, question.query), ChatMessage(Role.ASSISTANT, answer.text))
        cited = dict.fromkeys(citation.chunk.document_id for citation in answer.citations)
        await self._sessions.append(key, turn, evidence, tuple(cited))

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

    async def forget(self, key: SessionKey, caller: str, *, tenant_admin: bool) -> int:
        """Delete the session and its turns, returning how many turns; NotFound when it does not exist, or is
        another caller's and `tenant_admin` (an admin key of the session's tenant) is false."""
        sessions = self._stored()
        owner = await sessions.owner(key)
        if owner is None or (owner != caller and not tenant_admin):
            raise _unknown(key)
        return await sessions.delete(key)

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
