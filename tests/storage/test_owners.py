from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsvc.errors import InvalidRequest
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
        "finance", "u1", "finance-lead@example.com", False,
    )  # fmt: skip
    assert route.reason.startswith("low confidence: 45%")


@pytest.mark.parametrize(("tag", "why"), [("", "no tags"), ("orphan", "no owner"), ("unknown", "no owner"),
                                          ("ghost", "owner user not found")])  # fmt: skip
async def test_admin_fallback(directory: OwnerDirectory, tag: str, why: str) -> None:
    route = await directory.route(tag, "low confidence")
    assert route.fallback and route.owner_email == "admin@example.com" and not route.owner_user_id
    assert route.tag == (tag or "system")
    assert why in route.reason


async def test_owners_load_from_a_file(database: Backend, tmp_path: Path) -> None:
    path = tmp_path / "owners.json"
    path.write_text(json.dumps({"users": [{"id": "u2", "email": "hr@example.com"}],
                                "tags": [{"name": "hr", "owner_user_id": "u2"}]}))  # fmt: skip
    owners = OwnerDirectory(database, admin_email="admin@example.com")
    assert await owners.load_file(path) == (1, 1)
    assert (await owners.route("hr", "r")).owner_email == "hr@example.com"
    path.write_text("{not json")
    with pytest.raises(InvalidRequest):
        await owners.load_file(path)

