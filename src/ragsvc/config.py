"""Settings from the environment. Names follow the source specifications (RAG_*, OLLAMA_BASE_URL, CHAT_MODEL)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ragsvc.budget import DEFAULT_MODELS, ModelLimits, parse_model_table
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.prompts import DEFAULT_TEMPLATE, TEMPLATES

GENERATORS = ("extractive", "openai", "ollama")
EMBEDDERS = ("minilm", "ollama", "openai")


def _env(name: str, default: Any, doc: str) -> Any:
    """A dataclass field read from environment variable `name`; `doc` feeds the README's configuration table."""
    return field(default=default, metadata={"env": name, "doc": doc})


@dataclass(frozen=True, slots=True)
class Settings:
    # Serving
    grpc_address: str = _env("RAG_GRPC_ADDRESS", "127.0.0.1:50051", "host:port the gRPC server listens on")
    grace_period_s: float = _env("RAG_GRACE_PERIOD_SECONDS", 10.0, "drain time for in-flight RPCs on SIGTERM")
    health_probe_interval_s: float = _env(
        "RAG_HEALTH_PROBE_INTERVAL_SECONDS", 5.0, "how often dependencies are probed for health"
    )
    # Hardening (issue 6): authentication, TLS, load limits, transport limits, sanitizer, cache, logs, metrics
    auth_enabled: bool = _env(
        "RAG_AUTH_ENABLED", False, "require a bearer token (from RAG_API_KEYS_FILE / RAG_API_KEYS) on every call"
    )
    api_keys_file: str = _env(
        "RAG_API_KEYS_FILE", "", "JSON file of API keys: each token mapped to a tenant and the tags it may read"
    )
    api_keys: str = _env("RAG_API_KEYS", "", "the same JSON keys document, inline")
    tls_cert_file: str = _env("RAG_TLS_CERT_FILE", "", "PEM server certificate (with RAG_TLS_KEY_FILE: serve TLS only)")
    tls_key_file: str = _env("RAG_TLS_KEY_FILE", "", "PEM private key of the server certificate")
    tls_client_ca_file: str = _env(
        "RAG_TLS_CLIENT_CA_FILE", "", "PEM CA bundle: require client certificates signed by it (mutual TLS)"
    )
    rate_limit_per_minute: int = _env(
        "RAG_API_RATE_LIMIT", 60, "calls per minute per client (key, else token, else peer address); 0: no limit"
    )
    max_concurrent_requests: int = _env(
        "RAG_MAX_CONCURRENT_REQUESTS", 10, "Ask/AskStream calls in flight; more are refused with OVERLOADED"
    )
    max_receive_message_bytes: int = _env(
        "RAG_MAX_RECEIVE_MESSAGE_BYTES", 16 * 1024 * 1024, "largest request message accepted (bytes)"
    )
    max_send_message_bytes: int = _env(
        "RAG_MAX_SEND_MESSAGE_BYTES", 16 * 1024 * 1024, "largest response message sent (bytes)"
    )
    keepalive_time_s: float = _env("RAG_KEEPALIVE_TIME_SECONDS", 60.0, "ping a connection idle this long")
    keepalive_timeout_s: float = _env(
        "RAG_KEEPALIVE_TIMEOUT_SECONDS", 20.0, "close a connection whose ping is unanswered this long"
    )
    keepalive_min_ping_interval_s: float = _env(
        "RAG_KEEPALIVE_MIN_PING_INTERVAL_SECONDS", 10.0, "clients pinging more often than this are disconnected"
    )
    max_history_messages: int = _env(
        "RAG_MAX_HISTORY_MESSAGES", 50, "most chat_history messages a request may carry (1-50)"
    )
    injection_detection: bool = _env(
        "RAG_ENABLE_INJECTION_DETECTION", True, "flag input matching prompt-injection patterns (injection_suspected)"
    )
    reject_injection: bool = _env(
        "RAG_REJECT_INJECTION", False, "refuse such input with INVALID_ARGUMENT INJECTION_SUSPECTED instead"
    )
    cache_max_entries: int = _env("RAG_CACHE_MAX_ENTRIES", 1000, "answers kept in the in-memory cache; 0: no cache")
    cache_ttl_s: float = _env("RAG_CACHE_TTL_SECONDS", 3600.0, "how long a cached answer may be served")
    request_log: bool = _env("RAG_REQUEST_LOG", True, "log one JSON line per call (logger ragsvc.requests)")
    metrics_port: int = _env("RAG_METRICS_PORT", 0, "serve Prometheus /metrics on this port (same host); 0: off")
    otel_endpoint: str = _env(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "", "OpenTelemetry: send a span per call to this OTLP/gRPC collector; empty: off"
    )
    # Storage
    data_dir: Path = _env("RAG_DATA_DIR", Path(".ragsvc-data"), "where the embedded Qdrant engine keeps its data")
    demo_corpus: bool = _env(
        "RAG_DEMO_CORPUS", True, "index the bundled demo corpus on start when the store is empty"
    )
    default_tenant: str = _env("RAG_DEFAULT_TENANT", "default", "tenant used when a request names none")
    # Ingestion
    # 180 cl100k tokens stay within MiniLM's 256 word pieces for most English text.
    chunk_tokens: int = _env("RAG_CHUNK_TOKENS", 180, "chunk size in tokens")
    chunk_overlap_tokens: int = _env("RAG_CHUNK_OVERLAP_TOKENS", 40, "tokens shared by neighbouring chunks")
    # Retrieval
    top_k: int = _env("RAG_TOTAL_CONTEXT_CHUNKS", 5, "chunks retrieved when a request sets no top_k")
    min_similarity: float = _env(
        "RAG_MIN_SIMILARITY_SCORE", 0.3, "minimum cosine similarity for a chunk to count as evidence"
    )
    score_gate: float = _env("RAG_SCORE_GATE", 0.3, "refuse without calling the LLM when the best chunk scores lower")
    # Retrieval quality, ranking and access (issue 3; seeds 000 and 003)
    max_chunks_per_doc: int = _env("RAG_MAX_CHUNKS_PER_DOC", 3, "max chunks of one document among the retrieved")
    chunk_overlap_threshold: float = _env(
        "RAG_CHUNK_OVERLAP_THRESHOLD", 0.9, "drop a chunk whose cosine similarity to a better-ranked one is higher"
    )
    similarity_weight: float = _env("RAG_SIMILARITY_WEIGHT", 0.7, "ranking weight of the cosine similarity")
    recency_weight: float = _env("RAG_RECENCY_WEIGHT", 0.2, "ranking weight of the recency boost (0-0.3 by age)")
    trust_weight: float = _env("RAG_TRUST_WEIGHT", 0.1, "ranking weight of the document's source trust (0-1)")
    untagged_visible: bool = _env(
        "RAG_UNTAGGED_CHUNKS_VISIBLE", True, "untagged chunks are visible to every caller of the tenant (else to none)"
    )
    clearance_tag: str = _env(
        "RAG_CONFIDENTIAL_CLEARANCE_TAG", "confidential", "user tag needed to read confidential chunks (else redacted)"
    )
    # Vector engine (issue 3): the embedded qdrant-edge shard, or a Qdrant server when RAG_QDRANT_URL is set
    qdrant_url: str = _env("RAG_QDRANT_URL", "", "Qdrant server URL (e.g. http://qdrant:6333); empty: embedded engine")
    qdrant_api_key: str = _env("RAG_QDRANT_API_KEY", "", "API key for the Qdrant server")
    qdrant_collection: str = _env("RAG_QDRANT_COLLECTION", "ragsvc_chunks", "collection on the Qdrant server")
    qdrant_prefer_grpc: bool = _env("RAG_QDRANT_PREFER_GRPC", True, "talk to the Qdrant server over gRPC (port 6334)")
    qdrant_timeout_s: float = _env("RAG_QDRANT_TIMEOUT_SECONDS", 10.0, "timeout of one Qdrant server call")
    edge_index_after_points: int = _env(
        "RAG_EDGE_INDEX_AFTER_POINTS",
        50000,
        "embedded engine: build its HNSW index in the background after this many new points (0: never)",
    )
    edge_index_delay_s: float = _env(
        "RAG_EDGE_INDEX_DELAY_SECONDS", 5.0, "embedded engine: quiet time after the last write before that build"
    )
    # Embeddings (issue 3): the bundled ONNX model, or an Ollama / OpenAI-compatible server
    embedder: str = _env(
        "RAG_EMBEDDER", "minilm", "minilm (bundled ONNX), ollama (/api/embed) or openai (/v1/embeddings)"
    )
    embedding_model: str = _env(
        "EMBEDDING_MODEL", "", "embedding model; empty: nomic-embed-text (ollama), text-embedding-3-small (openai)"
    )
    embedding_dimension: int = _env("EMBEDDING_DIMENSION", 0, "dimension of the served embeddings (0: ask at start)")
    embedding_base_url: str = _env(
        "RAG_EMBEDDING_BASE_URL", "", "embedding server URL (default OLLAMA_BASE_URL or OPENAI_BASE_URL)"
    )
    ollama_base_url: str = _env("OLLAMA_BASE_URL", "http://localhost:11434", "Ollama server URL")
    embedding_batch_size: int = _env("RAG_EMBEDDING_BATCH_SIZE", 64, "texts per embedding request")
    embedding_timeout_s: float = _env("RAG_EMBEDDING_TIMEOUT_SECONDS", 30.0, "timeout of one embedding request")
    # Generation
    generator: str = _env(
        "RAG_GENERATOR", "extractive", "extractive (no LLM), openai (OpenAI-compatible server) or ollama (Ollama)"
    )
    openai_base_url: str = _env("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1", "OpenAI-compatible server URL")
    openai_api_key: str = _env("OPENAI_API_KEY", "", "bearer key for the OpenAI-compatible server")
    chat_model: str = _env("CHAT_MODEL", "llama3.2", "default LLM model")
    temperature: float = _env("RAG_TEMPERATURE", 0.1, "LLM temperature")
    retrieval_timeout_s: float = _env(
        "RAG_RETRIEVAL_TIMEOUT_SECONDS", 5.0, "retrieval stage budget (embedding + engine query)"
    )
    total_timeout_s: float = _env(
        "RAG_TOTAL_TIMEOUT_SECONDS", 30.0, "whole-request budget; stages end by it (and by the caller's deadline)"
    )
    timeout_s: float = _env(
        "RAG_TIMEOUT_SECONDS", 30.0, "generation stage timeout (the caller's deadline, when sooner, wins)"
    )
    # Models, templates and fallbacks (issue 4; seeds 000, 003, 004)
    models: str = _env(
        "RAG_MODELS",
        DEFAULT_MODELS,
        "the model allowlist: name=context_window/max_response_tokens, comma-separated; must list CHAT_MODEL",
    )
    fallback_model: str = _env(
        "FALLBACK_LLM",
        "",
        "model tried when CHAT_MODEL (or the requested one) is unreachable, 5xx or 429; in RAG_MODELS",
    )
    fallback_extractive: bool = _env(
        "RAG_FALLBACK_EXTRACTIVE", False, "when every LLM attempt fails, answer extractively (flagged degraded)"
    )
    default_template: str = _env(
        "RAG_DEFAULT_TEMPLATE", DEFAULT_TEMPLATE, "prompt template of requests naming none: " + ", ".join(TEMPLATES)
    )
    ollama_keep_alive: str = _env(
        "RAG_OLLAMA_KEEP_ALIVE", "5m", "how long Ollama keeps the model loaded after a request (-1: always)"
    )
    model_list_ttl_s: float = _env(
        "RAG_MODEL_LIST_TTL_SECONDS", 10.0, "how long the LLM server's model list is trusted for availability checks"
    )
    # Token budget
    max_context_tokens: int = _env("RAG_MAX_CONTEXT_TOKENS", 3000, "max tokens of retrieved context")
    max_history_tokens: int = _env("RAG_MAX_HISTORY_TOKENS", 1000, "max tokens of chat history")
    max_response_tokens: int = _env(
        "RAG_MAX_RESPONSE_TOKENS", 1024, "tokens reserved for the answer of a RAG_MODELS entry that sets none"
    )
    system_prompt_tokens: int = _env("RAG_SYSTEM_PROMPT_TOKENS", 500, "tokens reserved for the system prompt")
    # Answer trust
    confidence_threshold: float = _env(
        "RAG_CONFIDENCE_THRESHOLD", 60.0, "minimum confidence (0-100) to CITE; below it the answer is ROUTEd"
    )
    default_llm_score: float = _env(
        "RAG_DEFAULT_LLM_SCORE", 50.0, "LLM self-score (0-100) used when no LLM scores the answer"
    )
    admin_email: str = _env("RAG_ADMIN_EMAIL", "admin@example.com", "route target when no owner is known")
    llm_classify: bool = _env(
        "RAG_LLM_CLASSIFY", True, "classify questions with the LLM (a short call; rules when it fails or with extractive)"
    )
    model_prices: str = _env(
        "RAG_MODEL_PRICES", "", "USD per 1M tokens, model=prompt/completion,... (unlisted models cost 0)"
    )
    llm_self_score: bool = _env(
        "RAG_LLM_SELF_SCORE", True, "ask the LLM to rate its answer's support (a second, short call)"
    )
    follow_up_count: int = _env(
        "RAG_DEFAULT_FOLLOW_UP_COUNT", 2, "follow-up questions asked of the LLM for a grounded answer (0: none)"
    )
    hallucination_retries: int = _env(
        "RAG_MAX_RETRIES_ON_HALLUCINATION", 2, "strict re-runs of an answer that cites unknown markers"
    )
    # Records: the audit log, sessions and the tag-owner directory share one SQLite file
    database_path: str = _env(
        "RAG_DB_PATH", "", "SQLite file for answers, sessions, owners, templates and weights (default: in RAG_DATA_DIR)"
    )
    owners_file: str = _env("RAG_OWNERS_FILE", "", 'JSON {"users": [{id, email}], "tags": [{name, owner_user_id}]} loaded at start')
    session_history_messages: int = _env(
        "RAG_SESSION_HISTORY_MESSAGES", 10, "stored messages reused as a session's history"
    )
    session_retention_days: float = _env(
        "RAG_SESSION_RETENTION_DAYS", 30.0, "session messages older than this are purged at start"
    )

    def model_limits(self) -> dict[str, ModelLimits]:
        """RAG_MODELS read (ValueError when it does not parse)."""
        return parse_model_table(self.models, default_max_response=self.max_response_tokens)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read every field from `environ` (default os.environ); a bad value raises InvalidRequest naming it."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        violations: list[FieldViolation] = []
        for f in fields(cls):
            raw = environ.get(f.metadata["env"])
            if raw is None:
                continue
            try:
                values[f.name] = _PARSERS[type(f.default)](raw)
            except ValueError as exc:
                violations.append(FieldViolation(f.metadata["env"], str(exc)))
        settings = cls(**values)
        if settings.generator not in GENERATORS:
            violations.append(FieldViolation("RAG_GENERATOR", f"must be one of {', '.join(GENERATORS)}"))
        violations += _retrieval_violations(settings)
        violations += generation_violations(settings)
        if violations:
            raise InvalidRequest(violations, "invalid configuration: " + "; ".join(v.field for v in violations))
        return settings


def _retrieval_violations(settings: Settings) -> list[FieldViolation]:
    """The retrieval settings' own constraints (issue 3)."""
    checks = [
        ("RAG_EMBEDDER", settings.embedder in EMBEDDERS, f"must be one of {', '.join(EMBEDDERS)}"),
        ("RAG_MAX_CHUNKS_PER_DOC", settings.max_chunks_per_doc >= 1, "must be at least 1"),
        ("RAG_CHUNK_OVERLAP_THRESHOLD", 0.0 < settings.chunk_overlap_threshold <= 1.0, "must be in (0, 1]"),
        ("RAG_SIMILARITY_WEIGHT", settings.similarity_weight >= 0.0, "must not be negative"),
        ("RAG_RECENCY_WEIGHT", settings.recency_weight >= 0.0, "must not be negative"),
        ("RAG_TRUST_WEIGHT", settings.trust_weight >= 0.0, "must not be negative"),
        ("RAG_EDGE_INDEX_AFTER_POINTS", settings.edge_index_after_points >= 0, "must not be negative"),
        ("EMBEDDING_DIMENSION", settings.embedding_dimension >= 0, "must not be negative"),
        ("RAG_EMBEDDING_BATCH_SIZE", settings.embedding_batch_size >= 1, "must be at least 1"),
    ]
    return [FieldViolation(name, description) for name, ok, description in checks if not ok]


def generation_violations(settings: Settings) -> list[FieldViolation]:
    """The generation settings' own constraints (issue 4)."""
    try:
        models = settings.model_limits()
    except ValueError as exc:
        return [FieldViolation("RAG_MODELS", str(exc))]
    checks = [
        ("CHAT_MODEL", settings.chat_model in models, f"{settings.chat_model!r} is not in RAG_MODELS"),
        (
            "FALLBACK_LLM",
            not settings.fallback_model or settings.fallback_model in models,
            f"{settings.fallback_model!r} is not in RAG_MODELS",
        ),
        ("RAG_DEFAULT_TEMPLATE", settings.default_template in TEMPLATES, f"must be one of {', '.join(TEMPLATES)}"),
        ("RAG_TIMEOUT_SECONDS", settings.timeout_s > 0, "must be positive"),
        ("RAG_MODEL_LIST_TTL_SECONDS", settings.model_list_ttl_s >= 0, "must not be negative"),
    ]
    return [FieldViolation(name, description) for name, ok, description in checks if not ok]


def _parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


_PARSERS: dict[type, Callable[[str], Any]] = {str: str, int: int, float: float, bool: _parse_bool, Path: Path}
# A PosixPath default has type PosixPath, not Path.
_PARSERS[type(Path())] = Path
