"""Stored conversations: a question in a session that brings no history of its own continues the session's
stored turns, and each answered turn is stored before its answer goes out.

A session is its creator's: another caller naming it gets NOT_FOUND, before anything is read or written. A turn
whose evidence the caller's tags no longer cover is left out of the history, so it never reaches a prompt; a new
turn's evidence includes that of the turns its prompt held (an answer may repeat them).
"""

from __future__ import annotations

import dataclasses

from ragsvc.access import Evidence
from ragsvc.domain import Answer, ChatMessage, Question, Retrieval, Role
from ragsvc.errors import NotFound
from ragsvc.retrieval.layout import AccessPolicy
from ragsvc.storage.sessions import SessionKey, SessionStore, StoredMessage


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
            raise _unknown(question)
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
            raise _unknown(question)
        evidence = Evidence.of(scored.chunk for scored in (*retrieval.hits, *retrieval.rejected))
        for stored in await self._readable(self._sessions, key, question):
            evidence = evidence.merged(stored.evidence or Evidence())
        turn = (ChatMessage(Role.USER, question.query), ChatMessage(Role.ASSISTANT, answer.text))
        await self._sessions.append(key, turn, evidence)

    async def _readable(self, sessions: SessionStore, key: SessionKey, question: Question) -> list[StoredMessage]:
        """The session's stored messages whose evidence the question's tags cover (never a message stored
        without its evidence)."""
        return [
            stored
            for stored in await sessions.history(key)
            if stored.evidence is not None and self._access.covers(stored.evidence, question.user_tags)
        ]


def _unknown(question: Question) -> NotFound:
    """What naming another caller's session gets: NOT_FOUND naming the id only (nothing says whose it is)."""
    return NotFound(f"no session {question.session_id!r}", metadata={"session_id": question.session_id})
