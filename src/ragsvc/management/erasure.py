"""Erasing a caller (AdminService.EraseCaller, `ragsvc erase`; R-001-20): every text the service stored from one
caller's requests, removed in one call that reports what each store dropped.

A caller is who stored state is bound to (`ragsvc.access.key_caller`, `peer_caller`): an API key in its tenant, or,
with authentication off, a peer. What is removed:
- its sessions, with every message (question and answer) of them;
- the text of its rows in the audit log (question, search, answer, draft, packed chunks, error message), and its
  name on them: the rows stay as anonymous metadata (ids, times, outcome, confidence, flags, model, timings); and
  the text of its sessions' rows (those written before rows named their caller name none);
- its long-running operations, with their results (`operations`: see below);
- the answers its requests wrote into the answer cache and the replay store (in memory, or on Redis).

The scope is one tenant, or every tenant (`tenant_id` None: a peer's requests may have named several).

Each store is erased in turn, the shared ones first: when Redis cannot be reached the erasure fails
(SharedStateUnavailable) before anything else is touched. Every step is idempotent, so a failed erasure is simply
repeated (its counts then cover what the repeat found). A request of the caller still in flight while the erasure
runs may store its turn afterwards: erase a caller once it no longer calls (its key removed).

With RAG_WORKERS > 1 and no Redis, each worker process keeps its own cache and replay store; an erasure empties
those of the worker it reaches, and the others' entries of the caller expire with RAG_CACHE_TTL_SECONDS and
RAG_IDEMPOTENCY_TTL_SECONDS.

The long-running operations' store is given as `operations`: any store of records bound to their caller with
`erase_caller(caller, tenant_id) -> int` (`CallerRecords`; `storage.operations.OperationStore` in the server).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from ragsvc.answering.cache import AnswerStore
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.sessions import SessionStore

__all__ = ["CallerErasure", "CallerRecords", "Erased"]

_log = logging.getLogger(__name__)


class CallerRecords(Protocol):
    """A store of records bound to their caller, that can drop one caller's (the long-running operations)."""

    async def erase_caller(self, caller: str, tenant_id: str | None = None) -> int:
        """Delete every record of `caller` (in `tenant_id`; None: in every tenant); returns how many."""
        ...


@dataclass(frozen=True, slots=True)
class Erased:
    """What one erasure removed, per store."""

    sessions: int = 0
    session_messages: int = 0
    audit_records: int = 0  # audit rows whose text (and caller) was erased
    operations: int = 0
    cached_answers: int = 0
    replayed_answers: int = 0


class CallerErasure:
    def __init__(
        self,
        answers: AnswerLog,
        *,
        sessions: SessionStore | None = None,
        cache: AnswerStore | None = None,
        replays: AnswerStore | None = None,
        operations: CallerRecords | None = None,
    ) -> None:
        self._answers = answers
        self._sessions = sessions
        self._cache = cache
        self._replays = replays
        self._operations = operations

    async def erase(self, caller: str, tenant_id: str | None) -> Erased:
        """Erase everything `caller` stored in `tenant_id` (None: in every tenant); see the module's docstring."""
        cached = await self._cache.erase_caller(caller, tenant_id) if self._cache is not None else 0
        replayed = await self._replays.erase_caller(caller, tenant_id) if self._replays is not None else 0
        audit = await self._answers.erase_caller(caller, tenant_id)
        sessions, messages = (0, 0)
        if self._sessions is not None:
            # Its sessions' rows too: those written before rows named their caller name none. The sessions go
            # last, so that a repeat after a failure still finds them.
            for key in await self._sessions.owned_by(caller, tenant_id):
                audit += await self._answers.erase_session(key.tenant_id, key.session_id)
            sessions, messages = await self._sessions.erase_caller(caller, tenant_id)
        erased = Erased(
            sessions=sessions,
            session_messages=messages,
            audit_records=audit,
            operations=await self._operations.erase_caller(caller, tenant_id) if self._operations is not None else 0,
            cached_answers=cached,
            replayed_answers=replayed,
        )
        # The caller is not named: the log would otherwise keep what was just erased.
        _log.info("erased a caller's stored text (%s): %s", "one tenant" if tenant_id is not None else "every tenant", erased)
        return erased
