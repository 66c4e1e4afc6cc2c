"""Pages of List-style responses (AIP-158): the page size a request asks for, and page tokens that say where
the next page starts in one listing (`scope`: a tenant's documents, a session's turns, the tag owners)."""

from __future__ import annotations

import base64
import json

from ragsvc.errors import FieldViolation, InvalidRequest

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
BAD_PAGE_TOKEN = FieldViolation("page_token", "not a token this server returned for this listing")


def page_size_of(requested: int) -> int:
    """The page size a request asks for (0: the default); InvalidRequest outside 0 to MAX_PAGE_SIZE."""
    if not 0 <= requested <= MAX_PAGE_SIZE:
        raise InvalidRequest([FieldViolation("page_size", f"must be 0 to {MAX_PAGE_SIZE}")])
    return requested or DEFAULT_PAGE_SIZE


def page_token(scope: str, after: str) -> str:
    """The token of the page that starts after `after` in the listing of `scope`."""
    return base64.urlsafe_b64encode(json.dumps({"tenant": scope, "after": after}).encode()).decode()


def page_after(token: str, scope: str) -> str:
    """Where a page token continues after ("" without a token). Raises InvalidRequest for a token this server
    did not give for the listing of `scope`."""
    if not token:
        return ""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        after, token_scope = decoded["after"], decoded["tenant"]
    except (ValueError, TypeError, KeyError):
        after = token_scope = None
    if not isinstance(after, str) or not after or token_scope != scope:
        raise InvalidRequest([BAD_PAGE_TOKEN])
    return after
