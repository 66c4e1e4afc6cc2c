from __future__ import annotations

import json

import pytest

from ragsvc.config.documents import parse_owners
from ragsvc.storage.backend import Backend
from ragsvc.storage.owners import OwnerDirectory


@pytest.fixture
async def directory(database: Backend) -> OwnerDirectory:
    owners = OwnerDirectory(database, admin_email="admin@example.com")
    await owners.set_user("u1", "finance-lead@example.com")
    await owners.set_tag_owner("finance", "u1")
    await owners.set_tag_owner("orphan", None)
    await owners.set_tag_owner("ghost", "u-deleted")
    return owners


async def test_tag_with_an_owner_routes_to_the_owner(directory: OwnerDirectory) -> None:
    route = await directory.route("finance", "low confidence: 45%")
    assert (route.tag, route.owner_user_id, route.owner_email, route.fallback) == (
        "finance",
        "u1",
        "finance-lead@example.com",
        False,
    )
    assert route.reason.startswith("low confidence: 45%")


@pytest.mark.parametrize(
    ("tag", "why"), [("", "no tags"), ("orphan", "no owner"), ("unknown", "no owner"), ("ghost", "owner user not found")]
)
async def test_admin_fallback(directory: OwnerDirectory, tag: str, why: str) -> None:
    route = await directory.route(tag, "low confidence")
    assert route.fallback and route.owner_email == "admin@example.com" and not route.owner_user_id
    assert route.tag == (tag or "system")
    assert why in route.reason


async def test_owners_load_from_the_owners_document(database: Backend) -> None:
    text = json.dumps({"users": [{"id": "u2", "email": "hr@example.com"}], "tags": [{"name": "hr", "owner_user_id": "u2"}]})
    owners = OwnerDirectory(database, admin_email="admin@example.com")
    await owners.load(parse_owners(text))
    assert (await owners.route("hr", "r")).owner_email == "hr@example.com"
    with pytest.raises(ValueError, match="not JSON"):
        parse_owners("{not json")
    # A bad RAG_OWNERS_FILE is refused when the settings are read: see tests/config/test_settings.py.
