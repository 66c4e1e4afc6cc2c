"""Conversation history per session: the turns of a session_id, reused when a request sends no history.

A session is named by a `SessionKey`, made from the question in one place (`SessionKey.of`): today a session is
its tenant's, so binding a session to the caller that created it (issue 16) adds to the key, not to every call.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ragsvc.domain import ChatMessage, Question, Role
from ragsvc.storage.backend import Backend, WriteConflict, utc_now

# Two replicas appending to one session at once may compute the same next `seq`; the loser retries after a
# random pause (up to APPEND_BACKOFF_S, doubling), so that racing appends spread out instead of colliding again.
APPEND_ATTEMPTS = 10
APPEND_BACKOFF_S = 0.002
_APPEND = (
    "INSERT INTO session_messages (tenant_id, session_id, seq, role, content, created_at) "
    "VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM session_messages "
    "WHERE tenant_id = ? AND session_id = ?), ?, ?, ?)"
)


@dataclass(frozen=True, slots=True)
class SessionKey:
    """Which session: `session_id` within its tenant (sessions never cross tenants)."""

    tenant_id: str
    session_id: str

    @classmethod
    def of(cls, question: Question) -> SessionKey:
        """The session an admitted question names (its tenant resolved)."""
        return cls(question.tenant_id, question.session_id)


class SessionStore:
    def __init__(self, database: Backend, *, max_messages: int = 10) -> None:
        self._db = database
        self._max_messages = max_messages

    async def history(self, key: SessionKey) -> tuple[ChatMessage, ...]:
        """The session's last `max_messages` messages, oldest first; empty for an unknown session (or one of
        another tenant: sessions never cross tenants)."""
        rows = await self._db.fetch_all(
            "SELECT role, content FROM session_messages WHERE tenant_id = ? AND session_id = ? "
            "ORDER BY seq DESC LIMIT ?",
            (key.tenant_id, key.session_id, self._max_messages),
        )
        return tuple(ChatMessage(Role(row["role"]), row["content"]) for row in reversed(rows))

    async def append(self, key: SessionKey, messages: Sequence[ChatMessage]) -> None:
        """Add `messages` after the session's last ones, in one transaction (retried when a concurrent append
        took the same sequence numbers)."""
        now = utc_now()
        scope = (key.tenant_id, key.session_id)
        rows = [(*scope, *scope, m.role.value, m.content, now) for m in messages]
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                await self._db.execute_many(_APPEND, rows)
                return
            except WriteConflict:
                if attempt == APPEND_ATTEMPTS:
                    raise
                await asyncio.sleep(random.uniform(0, APPEND_BACKOFF_S * 2**attempt))

    async def purge(self, *, retention_days: float, now: datetime | None = None) -> int:
        """Delete messages older than the retention period; returns how many were deleted."""
        cutoff = (now or utc_now()) - timedelta(days=retention_days)
        return await self._db.execute("DELETE FROM session_messages WHERE created_at < ?", (cutoff,))
