"""Conversation history per session: the turns of a session_id, reused when a request sends no history.

A session is named by a `SessionKey` (its tenant and id, made from the question in `SessionKey.of`) and belongs
to the caller that created it: `claim` records the owner, with its tags at that time, at the session's first turn.
Each message is stored with the `Evidence` of its turn, so that whoever reads the history back can leave out the
turns its caller could not read (ragsvc.answering.conversation decides; this module only stores), and with the
ids of the documents its answer cited. `turns` reads a session back a page at a time; `delete` forgets it, and
`erase_caller` every session of one caller.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ragsvc.access import Evidence
from ragsvc.domain import ChatMessage, Question, Role
from ragsvc.storage.backend import Backend, WriteConflict, utc_now

# Two replicas appending to one session at once may compute the same next `seq`; the loser retries after a
# random pause (up to APPEND_BACKOFF_S, doubling), so that racing appends spread out instead of colliding again.
APPEND_ATTEMPTS = 10
APPEND_BACKOFF_S = 0.002
_APPEND = (
    "INSERT INTO session_messages (tenant_id, session_id, seq, role, content, evidence, cited_document_ids, "
    "created_at) VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM session_messages "
    "WHERE tenant_id = ? AND session_id = ?), ?, ?, ?, ?, ?)"
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


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message of a session and the evidence of its turn (None: stored before evidence was recorded)."""

    message: ChatMessage
    evidence: Evidence | None


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """A question of a session and its answer, as stored: `seq` is the sequence number of its question (turn n
    has the messages 2n-1 and 2n); `evidence` None: stored before evidence was recorded."""

    seq: int
    query: str
    answer: str
    evidence: Evidence | None
    cited_document_ids: tuple[str, ...]
    created_at: datetime

    @property
    def number(self) -> int:
        """The turn's number within its session, from 1."""
        return (self.seq + 1) // 2


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session's owner and when its first and last messages were stored (both None: no messages)."""

    owner: str
    created_at: datetime | None
    updated_at: datetime | None


class SessionStore:
    def __init__(self, database: Backend, *, max_messages: int = 10) -> None:
        self._db = database
        self._max_messages = max_messages

    async def owner(self, key: SessionKey) -> str | None:
        """The caller the session belongs to; None for a session nobody created yet."""
        rows = await self._db.fetch_all(
            "SELECT owner FROM sessions WHERE tenant_id = ? AND session_id = ?", (key.tenant_id, key.session_id)
        )
        return str(rows[0]["owner"]) if rows else None

    async def claim(self, key: SessionKey, caller: str, tags: Sequence[str]) -> str:
        """Make `caller` (holding `tags`) the owner of the session unless it has one; returns the owner."""
        await self._db.execute(
            "INSERT INTO sessions (tenant_id, session_id, owner, owner_tags, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, session_id) DO NOTHING",
            (key.tenant_id, key.session_id, caller, json.dumps(sorted(set(tags))), utc_now()),
        )
        return await self.owner(key) or caller

    async def history(self, key: SessionKey) -> tuple[StoredMessage, ...]:
        """The session's last `max_messages` messages, oldest first; empty for an unknown session (or one of
        another tenant: sessions never cross tenants)."""
        rows = await self._db.fetch_all(
            "SELECT role, content, evidence FROM session_messages WHERE tenant_id = ? AND session_id = ? "
            "ORDER BY seq DESC LIMIT ?",
            (key.tenant_id, key.session_id, self._max_messages),
        )
        return tuple(
            StoredMessage(
                ChatMessage(Role(row["role"]), row["content"]),
                None if row["evidence"] is None else Evidence.from_json(row["evidence"]),
            )
            for row in reversed(rows)
        )

    async def record(self, key: SessionKey) -> SessionRecord | None:
        """The session's owner and times; None for a session nobody created (or one purged)."""
        owner = await self.owner(key)
        if owner is None:
            return None
        rows = await self._db.fetch_all(
            "SELECT MIN(created_at) AS created_at, MAX(created_at) AS updated_at FROM session_messages "
            "WHERE tenant_id = ? AND session_id = ?",
            (key.tenant_id, key.session_id),
        )
        return SessionRecord(owner, rows[0]["created_at"], rows[0]["updated_at"])

    async def turns(self, key: SessionKey, *, after_seq: int = 0, limit: int) -> tuple[StoredTurn, ...]:
        """Up to `limit` turns whose question comes after message `after_seq`, oldest first."""
        rows = await self._db.fetch_all(
            "SELECT seq, role, content, evidence, cited_document_ids, created_at FROM session_messages "
            "WHERE tenant_id = ? AND session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (key.tenant_id, key.session_id, after_seq, 2 * limit),
        )
        questions = {row["seq"]: row for row in rows if row["role"] == Role.USER.value}
        answers = {row["seq"]: row for row in rows if row["role"] == Role.ASSISTANT.value}
        turns = []
        for seq, question in questions.items():
            answer = answers.get(seq + 1)
            if answer is None:
                continue  # a page cut between the question and its answer: the next page starts at it
            turns.append(StoredTurn(
                seq=seq,
                query=question["content"],
                answer=answer["content"],
                evidence=None if answer["evidence"] is None else Evidence.from_json(answer["evidence"]),
                cited_document_ids=tuple(json.loads(answer["cited_document_ids"] or "[]")),
                created_at=answer["created_at"],
            ))  # fmt: skip
        return tuple(turns[:limit])

    async def delete(self, key: SessionKey) -> int:
        """Delete the session and all its messages; returns how many turns (question and answer) were deleted."""
        deleted = await self._db.execute(
            "DELETE FROM session_messages WHERE tenant_id = ? AND session_id = ?", (key.tenant_id, key.session_id)
        )
        await self._db.execute("DELETE FROM sessions WHERE tenant_id = ? AND session_id = ?", (key.tenant_id, key.session_id))
        return (deleted + 1) // 2

    async def owned_by(self, caller: str, tenant_id: str | None = None) -> list[SessionKey]:
        """The sessions `caller` owns (in `tenant_id`; None: in every tenant)."""
        owned, params = "owner = ?", [caller]
        if tenant_id is not None:
            owned, params = owned + " AND tenant_id = ?", [caller, tenant_id]
        rows = await self._db.fetch_all(f"SELECT tenant_id, session_id FROM sessions WHERE {owned}", params)  # noqa: S608
        return [SessionKey(row["tenant_id"], row["session_id"]) for row in rows]

    async def erase_caller(self, caller: str, tenant_id: str | None = None) -> tuple[int, int]:
        """Delete every session `caller` owns (in `tenant_id`; None: in every tenant) with all its messages; returns
        how many sessions and how many messages were deleted."""
        owned, params = "sessions.owner = ?", [caller]
        if tenant_id is not None:
            owned, params = owned + " AND sessions.tenant_id = ?", [caller, tenant_id]
        messages = await self._db.execute(
            "DELETE FROM session_messages WHERE EXISTS (SELECT 1 FROM sessions WHERE sessions.tenant_id = "  # noqa: S608
            f"session_messages.tenant_id AND sessions.session_id = session_messages.session_id AND {owned})",
            params,
        )
        sessions = await self._db.execute(f"DELETE FROM sessions WHERE {owned}", params)  # noqa: S608
        return sessions, messages

    async def append(
        self,
        key: SessionKey,
        messages: Sequence[ChatMessage],
        evidence: Evidence,
        cited_document_ids: Sequence[str] = (),
    ) -> None:
        """Add `messages` (one turn, drawn from `evidence`, its answer citing `cited_document_ids`) after the
        session's last ones, in one transaction (retried when a concurrent append took the same sequence
        numbers)."""
        now = utc_now()
        scope = (key.tenant_id, key.session_id)
        stored, cited = evidence.to_json(), json.dumps(list(cited_document_ids))
        rows = [(*scope, *scope, m.role.value, m.content, stored, cited, now) for m in messages]
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                await self._db.execute_many(_APPEND, rows)
                return
            except WriteConflict:
                if attempt == APPEND_ATTEMPTS:
                    raise
                await asyncio.sleep(random.uniform(0, APPEND_BACKOFF_S * 2**attempt))

    async def purge(self, *, retention_days: float, now: datetime | None = None) -> int:
        """Delete messages older than the retention period, and the sessions left without any; returns how many
        messages were deleted."""
        cutoff = (now or utc_now()) - timedelta(days=retention_days)
        deleted = await self._db.execute("DELETE FROM session_messages WHERE created_at < ?", (cutoff,))
        await self._db.execute(
            "DELETE FROM sessions WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM session_messages m "
            "WHERE m.tenant_id = sessions.tenant_id AND m.session_id = sessions.session_id)",
            (cutoff,),
        )
        return deleted
