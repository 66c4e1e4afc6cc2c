"""The documents some settings name or hold, parsed (and so checked) when the settings are read: the tag-owner
directory (RAG_OWNERS_FILE) and PEM files (RAG_TLS_*). Each parser raises ValueError saying what is wrong."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class OwnersDocument:
    """`{"users": [{"id", "email"}], "tags": [{"name", "owner_user_id"}]}`: who owns which tag (R-000-22)."""

    users: tuple[tuple[str, str], ...] = ()  # (user id, email)
    tags: tuple[tuple[str, str | None], ...] = ()  # (tag name, owner user id)


def parse_owners(text: str) -> OwnersDocument:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError('expected {"users": [...], "tags": [...]}')
    try:
        users = tuple((str(u["id"]), str(u["email"])) for u in data.get("users", []))
        tags = tuple(
            (str(t["name"]), None if t.get("owner_user_id") is None else str(t["owner_user_id"])) for t in data.get("tags", [])
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"each user needs an id and an email, each tag a name: {exc!r}") from None
    return OwnersDocument(users, tags)


def read_text(path: str) -> str:
    """The file's text; ValueError naming the OS error."""
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read it: {exc}") from None


def check_pem(path: str) -> None:
    """ValueError unless `path` is a readable PEM file."""
    if "-----BEGIN " not in read_text(path):
        raise ValueError("not a PEM file (no -----BEGIN line)")
