"""The keys document and the principal it maps a token to (which tenant, which tags, which services)."""

from __future__ import annotations

import json
import re

import pytest

from ragsvc.access import ANY_TAG, AccessPolicy, Evidence, KeyStore, Principal, token_digest
from ragsvc.domain import Chunk, Question
from ragsvc.errors import PermissionDenied

KEYS = {
    "keys": [
        {"name": "acme-finance", "token": "tok-finance", "tenant": "acme", "tags": ["finance"]},
        {
            "name": "acme-admin",
            "token_sha256": token_digest("tok-admin"),
            "tenant": "acme",
            "tags": [ANY_TAG],
            "index": True,
            "admin": True,
        },
    ]
}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not json", "not JSON"),
        ('{"keys": {}}', '{"keys": [...]}'),
        ('{"keys": [{"token": "a"}]}', "tenant"),  # no tenant
        ('{"keys": [{"token": "a", "token_sha256": "00", "tenant": "t"}]}', "exactly one of token, token_sha256"),
        ('{"keys": [{"token_sha256": "00", "tenant": "t"}]}', "64 hex digits"),
        ('{"keys": [{"token": "a", "tenant": "t"}, {"token": "a", "tenant": "u"}]}', "repeats the token"),
        ('{"keys": [{"token": "a", "tenant": "t", "tags": "finance"}]}', "tags"),
        ('{"keys": ["a"]}', "must be an object"),
    ],
)
def test_keys_documents_are_checked(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        KeyStore.from_json(text)
    # Which setting held the bad document is said when the settings are built: tests/config/test_settings.py.


def test_tokens_map_to_their_principal() -> None:
    store = KeyStore.from_json(json.dumps(KEYS))
    assert len(store) == 2
    admin = store.lookup("tok-admin")
    assert admin is not None and admin.tags is None and admin.can_index and admin.can_admin
    finance = store.lookup("tok-finance")
    assert finance == Principal("acme-finance", "acme", frozenset({"finance"}))
    assert store.lookup("nope") is None


def test_merged_keys_take_the_other_stores_entry_for_a_shared_token() -> None:
    first = KeyStore.from_json('{"keys": [{"name": "old", "token": "t", "tenant": "a"}]}')
    second = KeyStore.from_json('{"keys": [{"name": "new", "token": "t", "tenant": "b"}, {"token": "u", "tenant": "c"}]}')
    merged = first.merged(second)
    assert len(merged) == 2 and merged.lookup("t").name == "new"
    assert first.lookup("t").name == "old", "merging makes a new store"


def test_a_principal_narrows_a_question_and_never_widens_it() -> None:
    finance = Principal("acme-finance", "acme", frozenset({"finance", "travel"}))
    scoped = finance.scope(Question("q"))
    assert (scoped.tenant_id, scoped.user_tags) == ("acme", ("finance", "travel"))
    assert finance.scope(Question("q", user_tags=("travel",))).user_tags == ("travel",)
    with pytest.raises(PermissionDenied) as caught:
        finance.scope(Question("q", tenant_id="globex"))
    assert caught.value.metadata == {"tenant": "globex", "key": "acme-finance"}
    with pytest.raises(PermissionDenied) as caught:
        finance.scope(Question("q", user_tags=("finance", "hr")))
    assert caught.value.metadata == {"tags": "hr", "key": "acme-finance"}
    anything = Principal("ops", "acme", None)
    assert anything.scope(Question("q", user_tags=("hr",))).user_tags == ("hr",)


def test_entries_sharing_a_name_are_one_caller_and_must_agree_on_tenant_and_tags() -> None:
    rotated = KeyStore.from_json(json.dumps({"keys": [
        {"name": "svc", "token": "old", "tenant": "acme", "tags": ["finance"]},
        {"name": "svc", "token": "new", "tenant": "acme", "tags": ["finance"]},
    ]}))  # fmt: skip
    assert rotated.lookup("old") == rotated.lookup("new"), "a token being rotated: the same caller"
    for other in ({"tenant": "globex", "tags": ["finance"]}, {"tenant": "acme", "tags": ["hr"]}):
        document = {"keys": [{"name": "svc", "token": "old", "tenant": "acme", "tags": ["finance"]},
                             {"name": "svc", "token": "new", **other}]}  # fmt: skip
        with pytest.raises(ValueError, match="repeats the name 'svc' with another tenant or tags"):
            KeyStore.from_json(json.dumps(document))


def test_evidence_is_covered_by_the_tags_that_could_read_each_of_its_chunks() -> None:
    finance = Evidence.of([Chunk("budget", 0, "x", tags=("finance", "board")), Chunk("faq", 0, "y")])
    policy = AccessPolicy()
    assert policy.covers(finance, ["finance"]) and policy.covers(finance, ["board", "hr"])
    assert not policy.covers(finance, []) and not policy.covers(finance, ["hr"])
    assert not AccessPolicy(untagged_visible=False).covers(finance, ["finance"]), "the untagged chunk is hidden"
    secret = finance.merged(Evidence.of([Chunk("memo", 0, "z", tags=("finance",), confidential=True)]))
    assert not policy.covers(secret, ["finance"]) and policy.covers(secret, ["finance", "confidential"])
    assert Evidence.from_json(secret.to_json()) == secret
