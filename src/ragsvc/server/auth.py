"""Authentication: every call must carry ``authorization: Bearer <token>`` of a configured key (see
`ragsvc.access` for the keys document and what a principal may do).

Without a token, or with one no key matches: UNAUTHENTICATED. The principal then bounds the call: a request
naming another tenant, a tag the key does not hold, an IndexService call by a key without `index`, or an
AdminService call by a key without `admin`: PERMISSION_DENIED (a malformed tenant id: INVALID_ARGUMENT).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping

from ragsvc.access import KeyStore
from ragsvc.errors import PermissionDenied, Unauthenticated
from ragsvc.sanitize import validate_tenant_id
from ragsvc.server.interceptors import CallInput, Interceptor


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
        if getattr(request, "document", None) is not None:  # an upload's first message
            tags.extend(request.document.tags)
        tenant_id = getattr(request, "tenant_id", "")
        validate_tenant_id(tenant_id)  # a malformed tenant is INVALID_ARGUMENT, as without keys, not another's
        principal.check(tenant_id, tags)
        yield
