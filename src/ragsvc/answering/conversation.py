"""Stored conversations: a question in a session that brings no history of its own continues the session's
stored turns, and each answered turn is stored before its answer goes out."""

from __future__ import annotations

import dataclasses

from ragsvc.domain import Answer, ChatMessage, Question, Role
from ragsvc.storage.sessions import SessionKey, SessionStore


class Conversation:
    def __init__(self, sessions: SessionStore | None) -> None:
        self._sessions = sessions

    async def with_history(self, question: Question) -> Question:
        if self._sessions is None or not question.session_id or question.chat_history:
            return question
        history = await self._sessions.history(SessionKey.of(question))
        return dataclasses.replace(question, chat_history=history)

    async def remember(self, question: Question, answer: Answer) -> None:
        if self._sessions is not None and question.session_id and not question.dry_run:
            turn = (ChatMessage(Role.USER, question.query), ChatMessage(Role.ASSISTANT, answer.text))
            await self._sessions.append(SessionKey.of(question), turn)
