"""The tag-owner directory as AdminService manages it (R-000-22: tags.owner_user_id -> users.email): list, set
and remove a tag's owner. Routing reads the directory from the database on every routed answer
(`storage.owners.OwnerDirectory.route`), so a change is used at once by every replica; answers that route to a
human are never cached, so no cache holds an old owner. The directory is global (one for every tenant), like the
prompt templates; RAG_OWNERS_FILE adds its entries at start, so an entry removed here that the file holds comes
back at the next start."""

from __future__ import annotations

import logging

from ragsvc.errors import FieldViolation, InvalidRequest, NotFound
from ragsvc.storage.owners import OwnerDirectory, TagOwner

MAX_FIELD_CHARS = 256
_log = logging.getLogger(__name__)


class OwnerControl:
    def __init__(self, directory: OwnerDirectory) -> None:
        self._directory = directory

    async def list(self, *, after: str, limit: int) -> list[TagOwner]:
        """Up to `limit` owned tags, by name, after the tag `after`."""
        return await self._directory.owners(after=after, limit=limit)

    async def set(self, owner: TagOwner) -> TagOwner:
        """Make `owner.owner_user_id` (with its email) the owner of `owner.tag`; InvalidRequest naming the
        `tag_owner.*` fields that cannot be stored."""
        violations = [
            FieldViolation(f"tag_owner.{field}", problem)
            for field, value in (("name", owner.tag), ("owner_user_id", owner.owner_user_id))
            if (problem := _text_problem(value))
        ]
        if problem := _text_problem(owner.owner_email) or _email_problem(owner.owner_email):
            violations.append(FieldViolation("tag_owner.owner_email", problem))
        if violations:
            raise InvalidRequest(violations)
        await self._directory.set_user(owner.owner_user_id, owner.owner_email)
        await self._directory.set_tag_owner(owner.tag, owner.owner_user_id)
        _log.info("tag %r is owned by %r now", owner.tag, owner.owner_user_id)
        return owner

    async def delete(self, tag: str) -> None:
        """Forget who owns `tag` (its questions route to the admin); NotFound when no one does."""
        if not await self._directory.remove_tag_owner(tag):
            raise NotFound(f"no owner for the tag {tag!r}", metadata={"tag": tag})
        _log.info("tag %r has no owner now", tag)


def _text_problem(value: str) -> str:
    if not value.strip():
        return "must not be empty"
    if value != value.strip() or len(value) > MAX_FIELD_CHARS:
        return f"must be at most {MAX_FIELD_CHARS} characters, without surrounding spaces"
    return ""


def _email_problem(email: str) -> str:
    local, at, domain = email.partition("@")
    return "" if at and local and "." in domain and " " not in email else "must be an email address"
