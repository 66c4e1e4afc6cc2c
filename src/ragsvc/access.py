"""Who a caller is and what it may read: the principal an API key stands for, and the keys document.

Keys come from a JSON document (RAG_API_KEYS_FILE, or inline in RAG_API_KEYS)::

    {"keys": [
        {"name": "billing-svc", "token": "s3cr3t", "tenant": "acme", "tags": ["finance"]},
        {"name": "indexer", "token_sha256": "<hex sha256 of the token>", "tenant": "acme", "tags": ["*"],
         "index": true},
        {"name": "ops", "token_sha256": "<hex sha256 of the token>", "tenant": "acme", "tags": ["*"], "admin": true}
    ]}

`token` is the bearer token itself, or `token_sha256` its SHA-256 in hex (so the file need not hold secrets);
`tags` are the access tags the key may read (`"*"`: any tag the request names); `index` allows IndexService
calls and `admin` AdminService calls (both default false: the key may only ask).

A principal bounds every request: a request naming another tenant, or a tag the key does not hold, is
PERMISSION_DENIED. A request that names no tenant gets the key's, one that names no tags gets every tag of the
key: a caller can narrow what it reads, never widen it.

A key's `name` is the caller's identity (with its tenant): replays and sessions are bound to it. Entries that
share a name (a token being rotated) are one caller, so they must agree on the tenant and tags.

`Evidence` is what an answer was drawn from, as access sees it: stored with a session's turn, it decides who may
have that turn in a prompt again (`AccessPolicy.covers`). `AccessPolicy` is who sees and reads what within a
tenant: the rule the engines' filters and redaction apply.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragsvc.domain import Chunk, Question
from ragsvc.errors import PermissionDenied
from ragsvc.sanitize import TENANT_ID_PATTERN, tenant_violations

ANY_TAG = "*"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a valid token stands for: `tags` None means any tag."""

    name: str
    tenant_id: str
    tags: frozenset[str] | None = frozenset()
    can_index: bool = False
    can_admin: bool = False

    def check(self, tenant_id: str, tags: Iterable[str]) -> None:
        """Raise PermissionDenied when a request for `tenant_id` (empty: the key's own) reading `tags` oversteps."""
        tenant_id = tenant_id.strip()
        if tenant_id and tenant_id != self.tenant_id:
            raise PermissionDenied(f"this key may not use tenant {tenant_id!r}", metadata={"tenant": tenant_id, "key": self.name})
        if self.tags is not None:
            extra = sorted({tag.strip() for tag in tags} - self.tags)
            if extra:
                raise PermissionDenied(
                    f"this key may not use the tags {', '.join(extra)}",
                    metadata={"tags": ",".join(extra), "key": self.name},
                )

    def scope(self, question: Question) -> Question:
        """`question` bounded by this principal: its tenant, and the tags asked for (or all of the key's)."""
        self.check(question.tenant_id, question.user_tags)
        return dataclasses.replace(question, tenant_id=self.tenant_id, user_tags=self.reading_tags(question.user_tags))

    def reading_tags(self, requested: tuple[str, ...]) -> tuple[str, ...]:
        """The tags a request reads with: those it names (checked), else every tag of the key."""
        if not requested and self.tags is not None:
            return tuple(sorted(self.tags))
        return requested


@dataclass(frozen=True, slots=True)
class Evidence:
    """The access an answer's sources need: the distinct tag sets of its chunks (an empty one: an untagged
    chunk), and whether any chunk was confidential."""

    tag_sets: tuple[tuple[str, ...], ...] = ()
    confidential: bool = False

    @classmethod
    def of(cls, chunks: Iterable[Chunk]) -> Evidence:
        chunks = list(chunks)
        return cls(
            tuple(sorted({tuple(sorted(set(chunk.tags))) for chunk in chunks})),
            any(chunk.confidential for chunk in chunks),
        )

    def merged(self, other: Evidence) -> Evidence:
        """The evidence of an answer drawn from both."""
        return Evidence(tuple(sorted({*self.tag_sets, *other.tag_sets})), self.confidential or other.confidential)

    def to_json(self) -> str:
        return json.dumps({"tag_sets": self.tag_sets, "confidential": self.confidential}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Evidence:
        data = json.loads(text)
        return cls(tuple(tuple(tags) for tags in data["tag_sets"]), bool(data["confidential"]))


def key_caller(tenant_id: str, key_name: str) -> str:
    """The caller a key stands for, as stored state (sessions, replays, audit rows) is bound to it."""
    return f"key:{tenant_id}/{key_name}"


def peer_caller(peer: str) -> str:
    """The caller a call without a key comes from (authentication off): its peer identity."""
    return f"peer:{peer}"


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class KeyStore:
    """The configured keys, by the SHA-256 of their token."""

    def __init__(self, principals: Mapping[str, Principal]) -> None:
        self._by_digest = dict(principals)

    def __len__(self) -> int:
        return len(self._by_digest)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyStore) and other._by_digest == self._by_digest

    def __hash__(self) -> int:
        return hash(frozenset(self._by_digest))

    def lookup(self, token: str) -> Principal | None:
        return self._by_digest.get(token_digest(token))

    def merged(self, other: KeyStore) -> KeyStore:
        """These keys and `other`'s (a token in both: `other`'s entry)."""
        return KeyStore({**self._by_digest, **other._by_digest})

    @classmethod
    def from_json(cls, text: str) -> KeyStore:
        """Parse the keys document; ValueError saying what is wrong with it."""
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        entries = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(entries, list):
            raise ValueError('expected {"keys": [...]}')
        principals: dict[str, Principal] = {}
        by_name: dict[str, Principal] = {}
        for i, entry in enumerate(entries):
            digest, principal = _entry(entry, i)
            if digest in principals:
                raise ValueError(f"keys[{i}] repeats the token of another key")
            named = by_name.setdefault(principal.name, principal)
            if (named.tenant_id, named.tags) != (principal.tenant_id, principal.tags):
                raise ValueError(f"keys[{i}] repeats the name {principal.name!r} with another tenant or tags")
            principals[digest] = principal
        return cls(principals)


def _entry(entry: Any, i: int) -> tuple[str, Principal]:
    if not isinstance(entry, dict):
        raise ValueError(f"keys[{i}] must be an object")
    token, digest = entry.get("token"), entry.get("token_sha256")
    if bool(token) == bool(digest):
        raise ValueError(f"keys[{i}] needs exactly one of token, token_sha256")
    if token is not None and not isinstance(token, str):
        raise ValueError(f"keys[{i}].token must be a string")
    digest = token_digest(token) if token else str(digest).lower()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"keys[{i}].token_sha256 must be 64 hex digits")
    tenant = entry.get("tenant")
    if not isinstance(tenant, str) or not tenant.strip() or tenant_violations(tenant):
        raise ValueError(f"keys[{i}].tenant must be a tenant id ({TENANT_ID_PATTERN})")
    tags = entry.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and t.strip() for t in tags):
        raise ValueError(f"keys[{i}].tags must be a list of non-empty strings")
    allowed = None if ANY_TAG in tags else frozenset(t.strip() for t in tags)
    name = str(entry.get("name") or f"key{i}")
    return digest, Principal(name, tenant.strip(), allowed, bool(entry.get("index", False)), bool(entry.get("admin", False)))


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """Who sees and reads what, within a tenant.

    - A chunk is visible when it shares a tag with the caller; an untagged chunk is visible to everyone when
      `untagged_visible` (the default), to no one otherwise. A caller without tags sees only untagged chunks.
    - A visible chunk marked confidential is readable only by a caller holding `clearance_tag`; for the others
      the engine returns it redacted (R-003-07: content "[REDACTED]", redactions_applied).
    """

    untagged_visible: bool = True
    clearance_tag: str = "confidential"

    def may_read(self, chunk: Chunk, user_tags: Sequence[str]) -> bool:
        return not chunk.confidential or self.clearance_tag in user_tags

    def sees(self, chunk_tags: Collection[str], user_tags: Collection[str]) -> bool:
        """Whether a chunk tagged `chunk_tags` is visible to a caller holding `user_tags` (the engines' filter)."""
        return bool(set(user_tags).intersection(chunk_tags)) if chunk_tags else self.untagged_visible

    def shows(self, document_tags: Collection[str], reader: Collection[str] | None) -> bool:
        """Whether an IndexService call by a key holding the tags `reader` (None: a key of any tag) may list, read,
        count or delete a document tagged `document_tags`: the rule of `sees`; every document for a key of any tag."""
        return reader is None or self.sees(document_tags, reader)

    def covers(self, evidence: Evidence, user_tags: Sequence[str]) -> bool:
        """Whether a caller holding `user_tags` could read every chunk `evidence` describes (the engines' filter
        and the redaction above, applied to what an answer was drawn from)."""
        tags = set(user_tags)
        visible = all(self.sees(chunk_tags, tags) for chunk_tags in evidence.tag_sets)
        return visible and (not evidence.confidential or self.clearance_tag in tags)
