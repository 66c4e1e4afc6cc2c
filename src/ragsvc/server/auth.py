"""Authentication: bearer tokens mapped to a principal (a tenant and the tags it may read).

Keys come from a JSON document, in a file (RAG_API_KEYS_FILE) or inline in the environment (RAG_API_KEYS)::

    {"keys": [
        {"name": "billing-svc", "token": "s3cr3t", "tenant": "acme", "tags": ["finance"]},
        {"name": "indexer", "token_sha256": "<hex sha256 of the token>", "tenant": "acme", "tags": ["*"],
         "index": true},
        {"name": "ops", "token_sha256": "<hex sha256 of the token>", "tenant": "acme", "tags": ["*"], "admin": true}
    ]}

`token` is the bearer token itself, or `token_sha256` its SHA-256 in hex (so the file need not hold secrets);
`tags` are the access tags the key may read (`"*"`: any tag the request names); `index` allows
IndexService calls and `admin` AdminService calls (both default false: the key may only ask).

A caller sends ``authorization: Bearer <token>``. Without one, or with one no key matches: UNAUTHENTICATED.
The principal then bounds the request: a request naming another tenant, a tag the key does not hold, an
IndexService call by a key without `index`, or an AdminService call by a key without `admin`: PERMISSION_DENIED. A request that names no tenant gets the key's,
one that names no tags gets every tag of the key: a caller can narrow what it reads, never widen it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsvc.domain import Question
from ragsvc.errors import (
    FieldViolation,
    InvalidRequest,
    PermissionDenied,
    Unauthenticated,
)
from ragsvc.server.interceptors import CallInput, Interceptor

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
            raise PermissionDenied(
                f"this key may not use tenant {tenant_id!r}", metadata={"tenant": tenant_id, "key": self.name}
            )
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
        tags = question.user_tags
        if not tags and self.tags is not None:
            tags = tuple(sorted(self.tags))
        return dataclasses.replace(question, tenant_id=self.tenant_id, user_tags=tags)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class KeyStore:
    """The configured keys, by the SHA-256 of their token."""

    def __init__(self, principals: Mapping[str, Principal]) -> None:
        self._by_digest = dict(principals)

    def __len__(self) -> int:
        return len(self._by_digest)

    def lookup(self, token: str) -> Principal | None:
        return self._by_digest.get(token_digest(token))

    @classmethod
    def from_json(cls, text: str, *, source: str) -> KeyStore:
        """Parse the keys document; raise InvalidRequest (a configuration error) naming `source` when it is bad."""
        try:
            document = json.loads(text)
            entries = document["keys"] if isinstance(document, dict) else None
            if not isinstance(entries, list):
                raise ValueError('expected {"keys": [...]}')
            principals: dict[str, Principal] = {}
            for i, entry in enumerate(entries):
                digest, principal = _entry(entry, i)
                if digest in principals:
                    raise ValueError(f"keys[{i}] repeats the token of another key")
                principals[digest] = principal
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidRequest([FieldViolation(source, str(exc))], f"invalid API keys in {source}: {exc}") from exc
        return cls(principals)

    @classmethod
    def load(cls, *, keys_file: str, keys_json: str) -> KeyStore:
        """Keys from the file and the inline JSON together."""
        principals: dict[str, Principal] = {}
        if keys_file:
            try:
                text = Path(keys_file).read_text()
            except OSError as exc:
                raise InvalidRequest([FieldViolation("RAG_API_KEYS_FILE", str(exc))]) from exc
            principals.update(cls.from_json(text, source="RAG_API_KEYS_FILE")._by_digest)
        if keys_json:
            principals.update(cls.from_json(keys_json, source="RAG_API_KEYS")._by_digest)
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
    if not isinstance(tenant, str) or not tenant.strip():
        raise ValueError(f"keys[{i}].tenant must be a non-empty string")
    tags = entry.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and t.strip() for t in tags):
        raise ValueError(f"keys[{i}].tags must be a list of non-empty strings")
    allowed = None if ANY_TAG in tags else frozenset(t.strip() for t in tags)
    name = str(entry.get("name") or f"key{i}")
    return digest, Principal(
        name, tenant.strip(), allowed, bool(entry.get("index", False)), bool(entry.get("admin", False))
    )


def bearer_token(metadata: Mapping[str, str]) -> str | None:
    """The token of an ``authorization: Bearer <token>`` header, or None."""
    scheme, _, token = metadata.get("authorization", "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class AuthInterceptor(Interceptor):
    """Authenticates every call and bounds it by the principal (exposed to the servicer as state.principal)."""

    def __init__(self, keys: KeyStore) -> None:
        self._keys = keys

    @contextlib.asynccontextmanager
    async def intercept(self, call: CallInput) -> AsyncIterator[None]:
        token = bearer_token(call.metadata)
        if token is None:
            raise Unauthenticated("missing bearer token: send the metadata 'authorization: Bearer <token>'")
        principal = self._keys.lookup(token)
        if principal is None:
            raise Unauthenticated("invalid bearer token")
        call.state.principal = principal
        request = call.request
        if call.is_index and not principal.can_index:
            raise PermissionDenied("this key may not call IndexService", metadata={"key": principal.name})
        if call.is_admin and not principal.can_admin:
            raise PermissionDenied("this key may not call AdminService", metadata={"key": principal.name})
        tags = list(getattr(request, "user_tags", ()))
        for document in getattr(request, "documents", ()):
            tags.extend(document.tags)
        principal.check(getattr(request, "tenant_id", ""), tags)
        yield
