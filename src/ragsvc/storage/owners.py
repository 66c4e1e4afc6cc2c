"""Who answers a routed question: the owner of a tag (tags.owner_user_id -> users.email), else the admin.

Every route reads the directory from the database, so a change (AdminService SetTagOwner, DeleteTagOwner) is
used at once by every replica sharing it: nothing is cached.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragsvc.config.documents import OwnersDocument
from ragsvc.domain import RouteTarget
from ragsvc.storage.backend import Backend

ADMIN_TAG = "system"


@dataclass(frozen=True, slots=True)
class TagOwner:
    """A tag's owner, and the owner's email ("" when no such user is recorded)."""

    tag: str
    owner_user_id: str
    owner_email: str


class OwnerDirectory:
    def __init__(self, database: Backend, *, admin_email: str) -> None:
        self._db = database
        self._admin_email = admin_email

    async def route(self, primary_tag: str, reason: str) -> RouteTarget:
        """The owner of `primary_tag`; the admin (fallback=True) when there is no tag, no owner or no such user."""
        if not primary_tag:
            return self._admin(f"{reason}; no tags in context")
        rows = await self._db.fetch_all(
            "SELECT tags.owner_user_id AS user_id, users.email AS email FROM tags "
            "LEFT JOIN users ON users.id = tags.owner_user_id WHERE tags.name = ?",
            (primary_tag,),
        )
        if not rows or not rows[0]["user_id"]:
            return self._admin(f"{reason}; no owner for tag '{primary_tag}'", tag=primary_tag)
        if rows[0]["email"] is None:
            return self._admin(f"{reason}; owner user not found for tag '{primary_tag}'", tag=primary_tag)
        return RouteTarget(
            tag=primary_tag,
            owner_user_id=rows[0]["user_id"],
            owner_email=rows[0]["email"],
            reason=f"{reason}; routing to the owner of '{primary_tag}'",
        )

    def _admin(self, reason: str, *, tag: str = ADMIN_TAG) -> RouteTarget:
        return RouteTarget(tag=tag, owner_email=self._admin_email, reason=f"{reason}; routing to admin", fallback=True)

    async def set_user(self, user_id: str, email: str) -> None:
        await self._db.execute(
            "INSERT INTO users (id, email) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET email = excluded.email",
            (user_id, email),
        )

    async def set_tag_owner(self, tag: str, owner_user_id: str | None) -> None:
        await self._db.execute(
            "INSERT INTO tags (name, owner_user_id) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET owner_user_id = excluded.owner_user_id",
            (tag, owner_user_id),
        )

    async def owners(self, *, after: str = "", limit: int) -> list[TagOwner]:
        """Up to `limit` tags that have an owner, by name, after the tag `after`."""
        rows = await self._db.fetch_all(
            "SELECT tags.name AS tag, tags.owner_user_id AS user_id, users.email AS email FROM tags "
            "LEFT JOIN users ON users.id = tags.owner_user_id "
            "WHERE tags.owner_user_id IS NOT NULL AND tags.name > ? ORDER BY tags.name LIMIT ?",
            (after, limit),
        )
        return [TagOwner(row["tag"], row["user_id"], row["email"] or "") for row in rows]

    async def remove_tag_owner(self, tag: str) -> bool:
        """Forget who owns `tag`; False when it had no owner."""
        return await self._db.execute("DELETE FROM tags WHERE name = ? AND owner_user_id IS NOT NULL", (tag,)) > 0

    async def load(self, document: OwnersDocument) -> None:
        """Add (or update) the users and tag owners of RAG_OWNERS_FILE."""
        for user_id, email in document.users:
            await self.set_user(user_id, email)
        for name, owner in document.tags:
            await self.set_tag_owner(name, owner)
