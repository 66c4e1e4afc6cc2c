"""Retries of transient LLM failures (seed 001's error table: a failing agent is retried twice, a rate limit with
backoff).

A request is tried again when it failed before its response began: the server could not be reached, dropped the
connection before answering, or answered 429 or 500, 502, 503, 504. Each retry waits an exponentially growing
backoff with jitter (half of it random, so that replicas do not retry in step), and at least the server's
`Retry-After`. No retry waits longer than MAX_WAIT_S, nor past the request's deadline: then the failure is returned
at once, its Retry-After in the error (the client's RetryInfo), for the client to decide. A response that began (a
stream under way) is never retried: see `generation/fallback.py` for why an answer that started is not replaced.

(A request sent on a kept-alive connection that the server closed as it was reused is not a failure here: the
transport sends it once more on a new connection, without waiting: see `generation/transport.py`.)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
# The longest wait before a retry: an interactive answer does not sit out a long rate limit.
MAX_WAIT_S = 5.0
# Failures before any response: nobody listening, connecting timed out, the connection dropped unanswered.
RETRIED_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """`retries` after the first try (seed 001: 2); the n-th retry (from 0) waits `backoff_s` * 2**n, half of it
    random, or the server's Retry-After when longer; None when that is longer than MAX_WAIT_S."""

    retries: int = 2
    backoff_s: float = 0.5

    def wait_s(self, retry: int, retry_after_s: float | None = None) -> float | None:
        base = self.backoff_s * 2**retry
        wait_s = max(base / 2 + random.uniform(0, base / 2), retry_after_s or 0.0)  # jitter, not secrets
        return wait_s if wait_s <= MAX_WAIT_S else None



def retried(exc: Exception) -> bool:
    """Whether `exc`, raised before a response began, is worth another try."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code in RETRIED_STATUSES
    return isinstance(exc, RETRIED_ERRORS)


__all__ = ["MAX_WAIT_S", "RETRIED_STATUSES", "RetryPolicy", "retried"]
