"""The exception tree of ragsvc. Components raise these; only `ragsvc.wire.status` maps them to gRPC.

RagError
├── InvalidRequest ................ the caller sent something we cannot serve (INVALID_ARGUMENT)
│   ├── ModelNotAllowed ........... the model is not in the allowlist
│   ├── TokenBudgetExceeded ....... query + history cannot fit the model's window
│   ├── InjectionSuspected ........ the input looks like prompt injection (when configured to reject it)
│   └── DocumentLimitExceeded ..... reading a document went past a limit of the server's (a setting it names)
├── Unauthenticated ............... no bearer token, or one no key matches (UNAUTHENTICATED)
├── PermissionDenied .............. the key does not allow this tenant, tag or call (PERMISSION_DENIED)
├── NotFound ...................... an unknown document, template or session (NOT_FOUND)
├── ModelUnavailable .............. the model is allowed but not served by the LLM server (FAILED_PRECONDITION)
├── IdempotencyKeyReused .......... an idempotency key sent again with another request (FAILED_PRECONDITION)
├── ReadOnlyIndex ................. a write to the index of a read-only worker process (FAILED_PRECONDITION)
├── OperationDone ................. a cancel of a long-running operation that has finished (FAILED_PRECONDITION)
├── OperationCancelled ............ a long-running operation stopped because its caller cancelled it (CANCELLED)
├── OperationAbandoned ............ the replica running an operation stopped or died before it finished (ABORTED)
├── IndexOutdated ................. the index's terms were written by another analyser version (FAILED_PRECONDITION)
├── StageTimeout .................. a stage ran past its budget or the caller's deadline (DEADLINE_EXCEEDED)
│   └── LLMTimeout ................ the LLM did not answer in time
└── RetryableError ................ a retry after `retry_after_s` may succeed (sent as RetryInfo)
    ├── DependencyUnavailable ..... a dependency cannot be reached or failed (UNAVAILABLE)
    │   ├── LLMUnavailable ........ the LLM server is unreachable or answered 5xx
    │   ├── EmbeddingFailed ....... the embedder failed
    │   ├── RetrievalUnavailable .. the vector engine failed
    │   ├── DatabaseUnavailable ... the records database (SQLite, or PostgreSQL) failed; its subclass
    │   │                           storage.backend.WriteConflict is a write that lost a race (retried there)
    │   └── SharedStateUnavailable  Redis is out: health says so (`redis`); requests go on without it
    └── ResourceExhausted ......... too many requests (RESOURCE_EXHAUSTED)
        ├── RateLimited ........... per-client rate limit reached
        └── Overloaded ............ too many requests in flight
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field: `field` is the request field path (e.g. "query", "chat_history[2].content")."""

    field: str
    description: str


class RagError(Exception):
    """Base of every error ragsvc raises on purpose; `reason` is the stable machine-readable cause."""

    reason = "INTERNAL"

    def __init__(self, message: str, *, metadata: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = dict(metadata or {})


class InvalidRequest(RagError):
    """The request is malformed; `violations` names each bad field."""

    reason = "VALIDATION_ERROR"

    def __init__(self, violations: list[FieldViolation], message: str = "") -> None:
        super().__init__(message or "; ".join(f"{v.field}: {v.description}" for v in violations))
        self.violations = list(violations)


class ModelNotAllowed(InvalidRequest):
    """The requested model is not in the configured allowlist."""

    reason = "MODEL_NOT_ALLOWED"


class TokenBudgetExceeded(InvalidRequest):
    """The query and chat history alone do not fit the model's context window."""

    reason = "TOKEN_BUDGET_EXCEEDED"


class InjectionSuspected(InvalidRequest):
    """The input matched prompt-injection patterns and the server is configured to reject such input."""

    reason = "INJECTION_SUSPECTED"


class DocumentLimitExceeded(InvalidRequest):
    """Reading a document went past one of the server's ingest limits: `metadata` names the limit's setting
    ("limit") and its value ("maximum"). Nothing of the document is written."""

    reason = "DOCUMENT_LIMIT_EXCEEDED"


class Unauthenticated(RagError):
    """The call carries no bearer token, or one that matches no configured key."""

    reason = "UNAUTHENTICATED"


class PermissionDenied(RagError):
    """The caller's key does not allow the tenant, the tags or the service the request asks for."""

    reason = "PERMISSION_DENIED"


class NotFound(RagError):
    """An unknown document, template or session."""

    reason = "NOT_FOUND"


class AlreadyExists(RagError):
    """What a create request names exists already (a prompt template id)."""

    reason = "ALREADY_EXISTS"


class BuiltInTemplate(RagError):
    """A built-in prompt template cannot be changed or deleted (FAILED_PRECONDITION)."""

    reason = "BUILT_IN_TEMPLATE"


class ModelUnavailable(RagError):
    """The model is allowed but the LLM server does not serve it."""

    reason = "MODEL_UNAVAILABLE"


class IdempotencyKeyReused(RagError):
    """The caller sent an idempotency key again with a request other than the one the key recorded."""

    reason = "IDEMPOTENCY_KEY_REUSED"


class ReadOnlyIndex(RagError):
    """This server process serves a read-only copy of the embedded engine's index (RAG_WORKERS > 1)."""

    reason = "READ_ONLY_INDEX"


class OperationDone(RagError):
    """A long-running operation that has finished cannot be cancelled."""

    reason = "OPERATION_DONE"


class OperationCancelled(RagError):
    """A long-running operation stopped at its caller's request: the error it ends with (google.longrunning's
    CANCELLED)."""

    reason = "CANCELLED"


class OperationAbandoned(RagError):
    """The replica running a long-running operation stopped, or died, before it finished: the error it ends with.
    Submitting it again is safe (asks are answered anew, ingests are idempotent)."""

    reason = "OPERATION_ABANDONED"


class IndexOutdated(RagError):
    """The index's stored terms were written by another version of the analyser: `ragsvc reindex` rewrites them."""

    reason = "INDEX_OUTDATED"


class RetryableError(RagError):
    """An error that retrying after `retry_after_s` seconds may clear (sent to clients as RetryInfo).

    `transient` says the failure belongs to this attempt rather than to the request: the server could not be
    reached, dropped the connection, failed (5xx) or shed load (429), so the same request may succeed against
    another model or replica. Whoever maps a transport failure to this error sets it (generation/http.py); the
    fallback chain reads it and nothing else."""

    def __init__(
        self,
        message: str,
        *,
        retry_after_s: float = 1.0,
        metadata: dict[str, str] | None = None,
        transient: bool = False,
    ) -> None:
        super().__init__(message, metadata=metadata)
        self.retry_after_s = retry_after_s
        self.transient = transient


class DependencyUnavailable(RetryableError):
    """A dependency failed."""

    reason = "DEPENDENCY_UNAVAILABLE"


class LLMUnavailable(DependencyUnavailable):
    """The LLM server is unreachable or answered with a server error."""

    reason = "LLM_UNAVAILABLE"


class EmbeddingFailed(DependencyUnavailable):
    """The embedder could not embed the text."""

    reason = "EMBEDDING_FAILED"


class RetrievalUnavailable(DependencyUnavailable):
    """The vector engine could not be queried or written."""

    reason = "RETRIEVAL_UNAVAILABLE"


class DatabaseUnavailable(DependencyUnavailable):
    """The records database (SQLite, or PostgreSQL when RAG_DATABASE_URL is set) could not be read or written."""

    reason = "DATABASE_UNAVAILABLE"


class SharedStateUnavailable(DependencyUnavailable):
    """Redis (RAG_REDIS_URL: the answer cache, rate limits and change feed replicas share) cannot be reached."""

    reason = "SHARED_STATE_UNAVAILABLE"


class StageTimeout(RagError):
    """A stage ran out of time; `stage` names it (retrieval, generation, total)."""

    reason = "DEADLINE"

    def __init__(self, stage: str, message: str = "") -> None:
        super().__init__(message or f"{stage} stage timed out", metadata={"stage": stage})
        self.stage = stage


class LLMTimeout(StageTimeout):
    """The LLM did not produce its answer in time."""

    reason = "LLM_TIMEOUT"


class ResourceExhausted(RetryableError):
    """Too much load."""

    reason = "RESOURCE_EXHAUSTED"


class RateLimited(ResourceExhausted):
    """The client exceeded its request rate."""

    reason = "RATE_LIMITED"


class Overloaded(ResourceExhausted):
    """The server has too many requests in flight."""

    reason = "OVERLOADED"
