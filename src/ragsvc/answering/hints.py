"""What a NO_CHUNKS refusal adds about why nothing was found, where saying so reveals nothing its caller may not know.

Counted over the documents the caller may see (without authentication, or with a key of any tag: every document of
the tenant; else those the key's tags show, `AccessPolicy.shows`):

- none, and the caller may see every document: "Tenant 'beez' holds no documents." (a misspelt tenant);
- some, that the tags the request passed do not show: "3 documents here carry tags you did not pass.";
- otherwise nothing is added: a key that sees no document of its tenant learns nothing of those it may not see.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Protocol

from ragsvc.access import Principal
from ragsvc.domain import Answer, IndexStats, Mode, Question, RefusalReason

__all__ = ["DocumentCounts", "NoChunksHint"]


class DocumentCounts(Protocol):
    """How many documents of a tenant a key holding `tags` (None: any tag) may see: `VectorEngine.stats`."""

    async def stats(self, tenant_id: str, *, tags: Collection[str] | None = None) -> IndexStats: ...


class NoChunksHint:
    def __init__(self, documents: DocumentCounts) -> None:
        self._documents = documents

    async def explained(self, answer: Answer, question: Question, principal: Principal | None) -> Answer:
        """`answer` with the hint after its refusal sentence, when it is a NO_CHUNKS refusal that has one."""
        if answer.refusal is not RefusalReason.NO_CHUNKS or question.mode is not Mode.GENERAL:
            return answer
        hint = await self.hint(question, principal)
        return dataclasses.replace(answer, text=f"{answer.text} {hint}") if hint else answer

    async def hint(self, question: Question, principal: Principal | None) -> str:
        """Why `question` (tenant and tags applied) found nothing, as far as `principal` (None: no authentication)
        may know; "" when it may know nothing more."""
        readable = None if principal is None else principal.tags
        visible = (await self._documents.stats(question.tenant_id, tags=readable)).documents
        if not visible:
            return f"Tenant {question.tenant_id!r} holds no documents." if readable is None else ""
        passed = (await self._documents.stats(question.tenant_id, tags=question.user_tags)).documents
        if (hidden := visible - passed) > 0:
            return (
                f"{hidden} documents here carry tags you did not pass."
                if hidden > 1
                else "1 document here carries tags you did not pass."
            )
        return ""
