"""Settings from the environment, typed and grouped per component, validated once at start.

Every setting is read from the environment variable the source specifications name (RAG_*, OLLAMA_BASE_URL,
CHAT_MODEL, ...), which is the field's alias. Settings come in groups that are handed whole to the component
that uses them (`RetrievalSettings` to the retriever, `GenerationSettings` to the generators, ...). Every value
is checked in one pass when the settings are read; `Settings.from_env` raises InvalidRequest with one violation
per refused variable, each naming the variable, the value and why it was refused (a secret's value is never
echoed). The documents some settings name (API keys, the owner directory, TLS files, the model and price tables)
are parsed then too, so a bad one stops `ragsvc serve` before anything is opened.
"""

from __future__ import annotations

import contextvars
import enum
import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ragsvc.access import KeyStore
from ragsvc.config import aliases
from ragsvc.config.documents import OwnersDocument, check_pem, parse_owners, read_text
from ragsvc.domain import CitationPolicy, StreamPolicy
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.ingest import limits
from ragsvc.ingest.limits import ChunkLimit, DocumentLimits
from ragsvc.model_table import DEFAULT_MODELS, ModelLimits, parse_model_table
from ragsvc.pricing import PriceTable
from ragsvc.prompts import DEFAULT_TEMPLATE, TEMPLATES
from ragsvc.sanitize import MAX_FOLLOW_UPS, MAX_HISTORY_MESSAGES, TENANT_ID_PATTERN, TOP_K_RANGE
from ragsvc.source_trust import DEFAULT_SOURCE_TRUST, DEFAULT_SOURCE_TYPE, SourceTrust, parse_weights

_T = TypeVar("_T")
_READING = DocumentLimits()  # the defaults of the limits of reading a document
# The URL schemes of RAG_DATABASE_URL that name a PostgreSQL server (storage.database opens them).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_log = logging.getLogger(__name__)


class SettingError(ValueError):
    """Values refused by a group's own checks (documents, values that depend on each other): each blames a
    variable. A group gathers all of its refusals before raising, so that every one is reported at once."""

    def __init__(self, refusals: Sequence[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{variable}: {why}" for variable, why in refusals))
        self.refusals = tuple(refusals)


class _Checks:
    """Collects a group's refusals; `done()` raises them together."""

    def __init__(self) -> None:
        self._refusals: list[tuple[str, str]] = []

    def refuse(self, variable: str, why: str) -> None:
        self._refusals.append((variable, why))

    def parsed(self, variable: str, parse: Callable[[], _T]) -> _T | None:
        """`parse()`, or None with its ValueError blamed on `variable`."""
        try:
            return parse()
        except ValueError as exc:
            self.refuse(variable, str(exc))
            return None

    def blamed(self, *variables: str) -> bool:
        return any(variable in variables for variable, _ in self._refusals)

    def done(self) -> None:
        if self._refusals:
            raise SettingError(self._refusals)


def env(default: Any, name: str, doc: str, **constraints: Any) -> Any:
    """A setting read from environment variable `name`; `doc` is its line in the settings page (docs/settings.md)."""
    return Field(default, validation_alias=name, description=doc, **constraints)


class GeneratorKind(enum.StrEnum):
    EXTRACTIVE = "extractive"  # no LLM: the answer quotes the evidence
    OPENAI = "openai"  # an OpenAI-compatible server (/v1/chat/completions)
    OLLAMA = "ollama"  # an Ollama server (/api/chat)


class ReaderKind(enum.StrEnum):
    TRAINED = "trained"  # the models trained on labelled questions (ragsvc/reading/models)
    RULES = "rules"  # hand-set word rules


class EmbedderKind(enum.StrEnum):
    MINILM = "minilm"  # the bundled all-MiniLM-L6-v2 ONNX model
    OLLAMA = "ollama"  # an Ollama server (/api/embed)
    OPENAI = "openai"  # an OpenAI-compatible server (/v1/embeddings)


class Group(BaseModel):
    """A group of settings: immutable; built from environment names (aliases) or field names."""

    model_config = ConfigDict(frozen=True, extra="ignore", validate_by_name=True, validate_by_alias=True)
    title: ClassVar[str] = ""


class ServerSettings(Group):
    title = "Serving"

    grpc_address: str = env("127.0.0.1:50051", "RAG_GRPC_ADDRESS", "host:port the gRPC server listens on")
    grace_period_s: float = env(10.0, "RAG_GRACE_PERIOD_SECONDS", "drain time for in-flight RPCs on SIGTERM", ge=0)
    health_probe_interval_s: float = env(
        5.0, "RAG_HEALTH_PROBE_INTERVAL_SECONDS", "how often dependencies are probed for health", gt=0
    )
    default_tenant: str = env(
        "default",
        "RAG_DEFAULT_TENANT",
        f"tenant used when a request names none (a tenant id: {TENANT_ID_PATTERN})",
        pattern=f"^{TENANT_ID_PATTERN}$",
    )
    total_timeout_s: float = env(
        30.0,
        "RAG_TOTAL_TIMEOUT_SECONDS",
        "whole-request budget; stages end by it (and by the caller's deadline)",
        gt=0,
    )
    data_dir: Path = env(Path(".ragsvc-data"), "RAG_DATA_DIR", "where the embedded engine and database keep their data")
    demo_corpus: bool = env(True, "RAG_DEMO_CORPUS", "index the bundled demo corpus on start when the store is empty")
    workers: int = env(
        1,
        "RAG_WORKERS",
        "server processes sharing RAG_GRPC_ADDRESS (SO_REUSEPORT) under one supervising parent; with the embedded "
        "engine, more than 1 serves read-only copies of its index (docs/replicas.md, RAG_WORKERS)",
        ge=1,
        le=64,
    )

    @field_validator("grpc_address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, colon, port = value.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("expected host:port, e.g. 127.0.0.1:50051 or [::]:50051")
        return value

    @property
    def host(self) -> str:
        return self.grpc_address.rsplit(":", 1)[0]


class HardeningSettings(Group):
    title = "Authentication, limits and observability"

    auth_enabled: bool = env(
        False, "RAG_AUTH_ENABLED", "require a bearer token (from RAG_API_KEYS_FILE / RAG_API_KEYS) on every call"
    )
    api_keys_file: str = env(
        "", "RAG_API_KEYS_FILE", "JSON file of API keys: each token mapped to a tenant and the tags it may read"
    )
    api_keys: SecretStr = env(SecretStr(""), "RAG_API_KEYS", "the same JSON keys document, inline")
    tls_cert_file: str = env("", "RAG_TLS_CERT_FILE", "PEM server certificate (with RAG_TLS_KEY_FILE: serve TLS only)")
    tls_key_file: str = env("", "RAG_TLS_KEY_FILE", "PEM private key of the server certificate")
    tls_client_ca_file: str = env(
        "", "RAG_TLS_CLIENT_CA_FILE", "PEM CA bundle: require client certificates signed by it (mutual TLS)"
    )
    rate_limit_per_minute: int = env(
        60, "RAG_API_RATE_LIMIT", "calls per minute per client (key, else token, else peer address); 0: no limit", ge=0
    )
    max_concurrent_requests: int = env(
        10, "RAG_MAX_CONCURRENT_REQUESTS", "Ask/AskStream calls in flight; more are refused with OVERLOADED", ge=1
    )
    max_receive_message_bytes: int = env(
        16 * 1024 * 1024, "RAG_MAX_RECEIVE_MESSAGE_BYTES", "largest request message accepted (bytes)", ge=1
    )
    max_send_message_bytes: int = env(
        16 * 1024 * 1024, "RAG_MAX_SEND_MESSAGE_BYTES", "largest response message sent (bytes)", ge=1
    )
    keepalive_time_s: float = env(60.0, "RAG_KEEPALIVE_TIME_SECONDS", "ping a connection idle this long", gt=0)
    keepalive_timeout_s: float = env(
        20.0, "RAG_KEEPALIVE_TIMEOUT_SECONDS", "close a connection whose ping is unanswered this long", gt=0
    )
    max_connection_age_s: float = env(
        0.0,
        "RAG_MAX_CONNECTION_AGE_SECONDS",
        "close client connections this old (after a grace of RAG_KEEPALIVE_TIMEOUT_SECONDS), so that clients "
        "balancing across replicas reconnect and spread onto new ones; 0: never",
        ge=0,
    )
    keepalive_min_ping_interval_s: float = env(
        10.0,
        "RAG_KEEPALIVE_MIN_PING_INTERVAL_SECONDS",
        "clients pinging more often than this are disconnected",
        ge=0,
    )
    max_history_messages: int = env(
        MAX_HISTORY_MESSAGES,
        "RAG_MAX_HISTORY_MESSAGES",
        f"most chat_history messages a request may carry (1-{MAX_HISTORY_MESSAGES})",
        ge=1,
        le=MAX_HISTORY_MESSAGES,
    )
    injection_detection: bool = env(
        True, "RAG_ENABLE_INJECTION_DETECTION", "flag input matching prompt-injection patterns (injection_suspected)"
    )
    reject_injection: bool = env(
        False, "RAG_REJECT_INJECTION", "refuse such input with INVALID_ARGUMENT INJECTION_SUSPECTED instead"
    )
    cache_max_entries: int = env(1000, "RAG_CACHE_MAX_ENTRIES", "answers kept in the in-memory cache; 0: no cache", ge=0)
    cache_ttl_s: float = env(3600.0, "RAG_CACHE_TTL_SECONDS", "how long a cached answer may be served", gt=0)
    idempotency_ttl_s: float = env(
        86400.0, "RAG_IDEMPOTENCY_TTL_SECONDS", "how long an idempotency key replays its caller's recorded answer", gt=0
    )
    request_log: bool = env(True, "RAG_REQUEST_LOG", "log one JSON line per call (logger ragsvc.requests)")
    metrics_port: int = env(
        0, "RAG_METRICS_PORT", "serve Prometheus /metrics on this port (same host); 0: off, no call recorded", ge=0, le=65535
    )
    otel_endpoint: str = env(
        "", "OTEL_EXPORTER_OTLP_ENDPOINT", "OpenTelemetry: send a span per call to this OTLP/gRPC collector; empty: off"
    )
    _keys: KeyStore | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _documents(self) -> Self:
        checks = _Checks()
        keys = KeyStore({})
        if self.api_keys_file:
            from_file = checks.parsed("RAG_API_KEYS_FILE", lambda: KeyStore.from_json(read_text(self.api_keys_file)))
            keys = keys.merged(from_file or KeyStore({}))
        if inline := self.api_keys.get_secret_value():
            keys = keys.merged(checks.parsed("RAG_API_KEYS", lambda: KeyStore.from_json(inline)) or KeyStore({}))
        if self.auth_enabled and not len(keys) and not checks.blamed("RAG_API_KEYS_FILE", "RAG_API_KEYS"):
            checks.refuse("RAG_AUTH_ENABLED", "needs keys in RAG_API_KEYS_FILE or RAG_API_KEYS")
        self._keys = keys if self.auth_enabled else None
        if (self.tls_key_file or self.tls_client_ca_file) and not self.tls_cert_file:
            checks.refuse("RAG_TLS_CERT_FILE", "required when RAG_TLS_KEY_FILE or RAG_TLS_CLIENT_CA_FILE is set")
        if self.tls_cert_file and not self.tls_key_file:
            checks.refuse("RAG_TLS_KEY_FILE", "required with RAG_TLS_CERT_FILE")
        for variable, path in (
            ("RAG_TLS_CERT_FILE", self.tls_cert_file),
            ("RAG_TLS_KEY_FILE", self.tls_key_file),
            ("RAG_TLS_CLIENT_CA_FILE", self.tls_client_ca_file),
        ):
            if path:
                checks.parsed(variable, functools.partial(check_pem, path))
        checks.done()
        return self

    @property
    def keys(self) -> KeyStore | None:
        """The API keys when authentication is on (parsed from both sources), else None."""
        return self._keys

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert_file)


class RetrievalSettings(Group):
    title = "Retrieval"

    top_k: int = env(
        5,
        "RAG_TOTAL_CONTEXT_CHUNKS",
        "chunks retrieved when a request sets no top_k",
        ge=TOP_K_RANGE[0],
        le=TOP_K_RANGE[1],
    )
    min_similarity: float = env(
        0.15, "RAG_MIN_SIMILARITY_SCORE", "minimum cosine similarity for a chunk to count as evidence", ge=-1, le=1
    )
    retrieval_timeout_s: float = env(
        5.0, "RAG_RETRIEVAL_TIMEOUT_SECONDS", "retrieval stage budget (embedding + engine query)", gt=0
    )
    max_chunks_per_doc: int = env(3, "RAG_MAX_CHUNKS_PER_DOC", "max chunks of one document among the retrieved", ge=1)
    chunk_overlap_threshold: float = env(
        0.9,
        "RAG_CHUNK_OVERLAP_THRESHOLD",
        "drop a chunk whose cosine similarity to a better-ranked one is higher",
        gt=0,
        le=1,
    )
    similarity_weight: float = env(
        0.7,
        "RAG_SIMILARITY_WEIGHT",
        "ranking weight of the similarity: a candidate's place in the fused dense + BM25 order, 1 at the top",
        ge=0,
    )
    recency_weight: float = env(0.2, "RAG_RECENCY_WEIGHT", "ranking weight of the recency boost (0-0.3 by age)", ge=0)
    trust_weight: float = env(0.1, "RAG_TRUST_WEIGHT", "ranking weight of the document's source trust (0-1)", ge=0)
    untagged_visible: bool = env(
        True, "RAG_UNTAGGED_CHUNKS_VISIBLE", "untagged chunks are visible to every caller of the tenant (else to none)"
    )
    clearance_tag: str = env(
        "confidential",
        "RAG_CONFIDENTIAL_CLEARANCE_TAG",
        "user tag needed to read confidential chunks (else redacted)",
        min_length=1,
    )
    # The vector engine: the embedded qdrant-edge shard, or a Qdrant server when RAG_QDRANT_URL is set.
    qdrant_url: str = env("", "RAG_QDRANT_URL", "Qdrant server URL (e.g. http://qdrant:6333); empty: embedded engine")
    qdrant_api_key: SecretStr = env(SecretStr(""), "RAG_QDRANT_API_KEY", "API key for the Qdrant server")
    qdrant_collection: str = env("ragsvc_chunks", "RAG_QDRANT_COLLECTION", "collection on the Qdrant server", min_length=1)
    qdrant_prefer_grpc: bool = env(True, "RAG_QDRANT_PREFER_GRPC", "talk to the Qdrant server over gRPC (port 6334)")
    qdrant_timeout_s: float = env(10.0, "RAG_QDRANT_TIMEOUT_SECONDS", "timeout of one Qdrant server call", gt=0)
    edge_index_after_points: int = env(
        50000,
        "RAG_EDGE_INDEX_AFTER_POINTS",
        "embedded engine: build its HNSW index in the background after this many new points (0: never)",
        ge=0,
    )
    edge_index_delay_s: float = env(
        5.0, "RAG_EDGE_INDEX_DELAY_SECONDS", "embedded engine: quiet time after the last write before that build", ge=0
    )
    edge_search_threads: int = env(
        1,
        "RAG_EDGE_SEARCH_THREADS",
        "embedded engine: threads searching its segments for one query (0: one per CPU; 1 was 0.1-0.35 ms faster "
        "a query at 10k points on 2 cores: README's Speed)",
        ge=0,
    )
    # Embeddings: the bundled ONNX model, or an Ollama / OpenAI-compatible server.
    embedder: EmbedderKind = env(
        EmbedderKind.MINILM, "RAG_EMBEDDER", "minilm (bundled ONNX), ollama (/api/embed) or openai (/v1/embeddings)"
    )
    embedder_int8: bool = env(
        False,
        "RAG_EMBEDDER_INT8",
        "minilm computes with its int8 weights: ~1.5x faster, vectors at cosine ~0.994 to fp32's (own embedded index)",
    )
    embedding_model: str = env(
        "", "EMBEDDING_MODEL", "embedding model; empty: nomic-embed-text (ollama), text-embedding-3-small (openai)"
    )
    embedding_dimension: int = env(0, "EMBEDDING_DIMENSION", "dimension of the served embeddings (0: ask at start)", ge=0)
    embedding_base_url: str = env(
        "", "RAG_EMBEDDING_BASE_URL", "embedding server URL (default OLLAMA_BASE_URL or OPENAI_BASE_URL)"
    )
    embedding_batch_size: int = env(64, "RAG_EMBEDDING_BATCH_SIZE", "texts per embedding request", ge=1)
    embedding_timeout_s: float = env(30.0, "RAG_EMBEDDING_TIMEOUT_SECONDS", "timeout of one embedding request", gt=0)

    @property
    def served_embedding_model(self) -> str:
        """The model a served embedder is asked for."""
        default = "nomic-embed-text" if self.embedder is EmbedderKind.OLLAMA else "text-embedding-3-small"
        return self.embedding_model or default


class IngestSettings(Group):
    title = "Ingestion"

    # 180 cl100k tokens stay within MiniLM's 256 word pieces for most English text.
    chunk_tokens: int = env(180, "RAG_CHUNK_TOKENS", "chunk size in tokens", ge=16)
    chunk_overlap_tokens: int = env(40, "RAG_CHUNK_OVERLAP_TOKENS", "tokens shared by neighbouring chunks", ge=0)
    max_document_bytes: int = env(
        256 * 1024 * 1024,
        "RAG_MAX_DOCUMENT_BYTES",
        "largest document IndexService.UploadDocument accepts in pieces (bytes); unfinished uploads wait in RAG_DATA_DIR/uploads",
        ge=1,
    )
    source_trust_table: str = env(
        DEFAULT_SOURCE_TRUST,
        "RAG_SOURCE_TRUST",
        "source types and their trust weight in ranking, type=weight,... (a document's metadata source_type names "
        "one; its own trust, when set, wins)",
    )
    default_source_type: str = env(
        DEFAULT_SOURCE_TYPE, "RAG_DEFAULT_SOURCE_TYPE", "source type of a document that names none (in RAG_SOURCE_TRUST)"
    )
    _source_trust: SourceTrust = PrivateAttr(default_factory=SourceTrust.default)
    # The limits of reading one document (ingest/limits.py); the error past one names its variable.
    parse_seconds: float = env(
        _READING.parse_seconds,
        limits.PARSE_SECONDS,
        "time to read and chunk one document (checked between pages, sections and chunks)",
        gt=0,
    )
    max_html_depth: int = env(
        _READING.html_depth,
        limits.MAX_HTML_DEPTH,
        "deepest nesting of HTML elements read (browsers stop nesting at 512; parsing time grows with its square)",
        ge=1,
    )
    max_html_attributes: int = env(
        _READING.html_attributes,
        limits.MAX_HTML_ATTRIBUTES,
        "most attributes of one HTML element (parsing time grows with their square)",
        ge=1,
    )
    max_line_chars: int = env(
        _READING.line_chars,
        limits.MAX_LINE_CHARS,
        "longest line of a text, Markdown, reStructuredText or CSV/TSV document (characters)",
        ge=1,
    )
    max_decompressed_bytes: int = env(
        _READING.decompressed_bytes,
        limits.MAX_DECOMPRESSED_BYTES,
        "most bytes one PDF stream, or one part of a .docx, may decompress to",
        ge=1,
    )
    max_chunks: int = env(_READING.chunks, limits.MAX_CHUNKS, "most chunks one document may make, however it is ingested", ge=1)
    max_call_chunks: int = env(
        1000,
        limits.MAX_CALL_CHUNKS,
        "most chunks of one document that IngestDocuments or UploadDocument embed within the call (about a minute "
        "of the bundled embedder on 2 cores); a larger document is refused at once: ingest it as a long-running "
        "operation (IndexService.SubmitIngest)",
        ge=1,
    )

    @model_validator(mode="after")
    def _checked(self) -> Self:
        checks = _Checks()
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            checks.refuse("RAG_CHUNK_OVERLAP_TOKENS", f"must be smaller than RAG_CHUNK_TOKENS ({self.chunk_tokens})")
        weights = checks.parsed("RAG_SOURCE_TRUST", lambda: parse_weights(self.source_trust_table))
        trust = None
        if weights is not None:
            trust = checks.parsed("RAG_DEFAULT_SOURCE_TYPE", lambda: SourceTrust(weights, self.default_source_type))
        checks.done()
        assert trust is not None
        self._source_trust = trust
        return self

    @property
    def source_trust(self) -> SourceTrust:
        """RAG_SOURCE_TRUST with RAG_DEFAULT_SOURCE_TYPE, parsed."""
        return self._source_trust

    @property
    def limits(self) -> DocumentLimits:
        """The limits of reading one document, whichever way it comes in."""
        return DocumentLimits(
            parse_seconds=self.parse_seconds,
            html_depth=self.max_html_depth,
            html_attributes=self.max_html_attributes,
            line_chars=self.max_line_chars,
            decompressed_bytes=self.max_decompressed_bytes,
            chunks=self.max_chunks,
        )

    @property
    def call_chunk_limit(self) -> ChunkLimit:
        """The chunks of one document that IngestDocuments and UploadDocument embed within the call."""
        return ChunkLimit(self.max_call_chunks, limits.MAX_CALL_CHUNKS, limits.CALL_ADVICE)


class GenerationSettings(Group):
    title = "Generation"

    generator: GeneratorKind = env(
        GeneratorKind.EXTRACTIVE,
        "RAG_GENERATOR",
        "extractive (no LLM), openai (OpenAI-compatible server) or ollama (Ollama)",
    )
    openai_base_url: str = env("http://127.0.0.1:8080/v1", "OPENAI_BASE_URL", "OpenAI-compatible server URL")
    openai_api_key: SecretStr = env(SecretStr(""), "OPENAI_API_KEY", "bearer key for the OpenAI-compatible server")
    ollama_base_url: str = env("http://localhost:11434", "OLLAMA_BASE_URL", "Ollama server URL")
    chat_model: str = env("llama3.2", "CHAT_MODEL", "default LLM model; must be in RAG_MODELS", min_length=1)
    temperature: float = env(0.1, "RAG_TEMPERATURE", "LLM temperature", ge=0, le=2)
    timeout_s: float = env(
        30.0, "RAG_TIMEOUT_SECONDS", "generation stage timeout (the caller's deadline, when sooner, wins)", gt=0
    )
    models: str = env(
        DEFAULT_MODELS,
        "RAG_MODELS",
        "the model allowlist: name=context_window/max_response_tokens, comma-separated; must list CHAT_MODEL",
    )
    max_response_tokens: int = env(
        1024, "RAG_MAX_RESPONSE_TOKENS", "tokens reserved for the answer of a RAG_MODELS entry that sets none", ge=1
    )
    fallback_model: str = env(
        "", "FALLBACK_LLM", "model tried when CHAT_MODEL (or the requested one) is unreachable, 5xx or 429; in RAG_MODELS"
    )
    fallback_extractive: bool = env(
        False, "RAG_FALLBACK_EXTRACTIVE", "when every LLM attempt fails, answer extractively (flagged degraded)"
    )
    default_template: str = env(
        DEFAULT_TEMPLATE, "RAG_DEFAULT_TEMPLATE", "prompt template of requests naming none: " + ", ".join(TEMPLATES)
    )
    language_detection: bool = env(
        True,
        "RAG_LANGUAGE_DETECTION",
        "detect each question's language offline and answer with a template of that language, refusing questions in "
        "a language no template answers in (UNSUPPORTED_LANGUAGE); off: every question is answered as asked",
    )
    language_min_confidence: float = env(
        0.65,
        "RAG_LANGUAGE_MIN_CONFIDENCE",
        "probability the language detector needs before a question counts as being in a language (below it, or with "
        "fewer than two words, the language is undetermined and the question is never refused)",
        gt=0,
        le=1,
    )
    ollama_keep_alive: str = env(
        "5m", "RAG_OLLAMA_KEEP_ALIVE", "how long Ollama keeps the model loaded after a request (-1: always)"
    )
    model_list_ttl_s: float = env(
        10.0,
        "RAG_MODEL_LIST_TTL_SECONDS",
        "how long the LLM server's model list is trusted for availability checks",
        ge=0,
    )
    llm_classify: bool = env(
        True, "RAG_LLM_CLASSIFY", "classify questions with the LLM (a short call; rules when it fails or with extractive)"
    )
    llm_self_score: bool = env(True, "RAG_LLM_SELF_SCORE", "ask the LLM to rate its answer's support (a second, short call)")
    follow_up_count: int = env(
        2,
        "RAG_DEFAULT_FOLLOW_UP_COUNT",
        "follow-up questions asked of the LLM for a grounded answer (0: none)",
        ge=0,
        le=MAX_FOLLOW_UPS,
    )
    hallucination_retries: int = env(
        2, "RAG_MAX_RETRIES_ON_HALLUCINATION", "strict re-runs of an answer that cites unknown markers", ge=0
    )
    # drop_invalid, measured against strict with the local LLM (docs/llm.md): fewer refusals, no re-runs.
    citation_policy: CitationPolicy = env(
        CitationPolicy.DROP_INVALID,
        "RAG_CITATION_POLICY",
        "what becomes of an answer citing unknown markers when neither the request nor its template says: strict "
        "(re-run strictly, refused when no run is clean) or drop_invalid (the sentences they back are dropped; "
        "re-run only when no cited claim remains)",
    )
    # on: measured with make llm's SmolLM2 (docs/local-llm.md), a restated answer cited and nothing attributed wrongly.
    citation_attribution: bool = env(
        True,
        "RAG_CITATION_ATTRIBUTION",
        "give a sentence the model wrote without a citation marker the marker of the packed chunk that clearly holds "
        "its words (most of its key phrases, in order, in one chunk; never a question, instructions, code or a "
        "sentence saying the evidence is insufficient); off: such a sentence stays uncited",
    )
    llm_retries: int = env(
        2,
        "RAG_LLM_RETRIES",
        "retries of an LLM request that failed before its response began (unreachable, 429, 5xx)",
        ge=0,
        le=10,
    )
    llm_retry_backoff_s: float = env(
        0.5,
        "RAG_LLM_RETRY_BACKOFF_SECONDS",
        "wait before the first LLM retry, doubled for each next one (half of it random; a longer Retry-After wins)",
        gt=0,
        le=10,
    )
    model_prices: str = env("", "RAG_MODEL_PRICES", "USD per 1M tokens, model=prompt/completion,... (unlisted models cost 0)")
    stream_policy: StreamPolicy = env(
        StreamPolicy.VALIDATED,
        "RAG_STREAM_POLICY",
        "what AskStream sends before the final answer when a request names no policy: validated (complete sentences "
        "whose citations are valid) or raw (every token)",
    )
    llm_condense: bool = env(
        True, "RAG_LLM_CONDENSE", "condense follow-ups into standalone questions with the LLM (rules when it fails)"
    )
    condense_timeout_s: float = env(
        3.0, "RAG_CONDENSE_TIMEOUT_SECONDS", "time for the LLM to condense a follow-up before the rule does", gt=0
    )
    _limits: dict[str, ModelLimits] = PrivateAttr(default_factory=dict)
    _prices: PriceTable = PrivateAttr(default_factory=lambda: PriceTable({}))

    @field_validator("default_template")
    @classmethod
    def _built_in(cls, value: str) -> str:
        if value not in TEMPLATES:
            raise ValueError(f"not a built-in template ({', '.join(TEMPLATES)})")
        return value

    @model_validator(mode="after")
    def _tables(self) -> Self:
        checks = _Checks()
        limits = checks.parsed(
            "RAG_MODELS", lambda: parse_model_table(self.models, default_max_response=self.max_response_tokens)
        )
        if limits is not None:
            listed = ", ".join(limits)
            if self.chat_model not in limits:
                checks.refuse("CHAT_MODEL", f"{self.chat_model!r} is not in RAG_MODELS, which lists {listed}")
            if self.fallback_model and self.fallback_model not in limits:
                checks.refuse("FALLBACK_LLM", f"{self.fallback_model!r} is not in RAG_MODELS, which lists {listed}")
            self._limits = limits
        prices = checks.parsed("RAG_MODEL_PRICES", lambda: PriceTable.parse(self.model_prices))
        checks.done()
        self._prices = prices or PriceTable({})
        return self

    @property
    def model_limits(self) -> dict[str, ModelLimits]:
        """RAG_MODELS, parsed: the allowlist with each model's window and response reserve."""
        return dict(self._limits)

    @property
    def prices(self) -> PriceTable:
        return self._prices


class BudgetSettings(Group):
    title = "Token budget"

    max_context_tokens: int = env(3000, "RAG_MAX_CONTEXT_TOKENS", "max tokens of retrieved context", ge=1)
    max_history_tokens: int = env(1000, "RAG_MAX_HISTORY_TOKENS", "max tokens of chat history", ge=0)
    system_prompt_tokens: int = env(500, "RAG_SYSTEM_PROMPT_TOKENS", "tokens reserved for the system prompt", ge=0)
    max_context_chunks: int = env(
        TOP_K_RANGE[1],
        "RAG_MAX_CONTEXT_CHUNKS",
        "most chunks packed into the prompt, best first, whatever the request's top_k",
        ge=1,
        le=TOP_K_RANGE[1],
    )


class TrustSettings(Group):
    title = "Answer trust"

    score_gate: float = env(
        0.15, "RAG_SCORE_GATE", "refuse without calling the LLM when the best chunk scores lower", ge=-1, le=1
    )
    reader: ReaderKind = env(
        ReaderKind.TRAINED,
        "RAG_READER",
        "what reads questions against the evidence: trained (the shipped model) or rules (hand-set word rules)",
    )
    reader_model: str = env(
        "", "RAG_READER_MODEL", "the trained reader's model file (.npz from `make train-reader`); empty: the shipped one"
    )
    reader_pool: int = env(
        8,
        "RAG_READER_POOL",
        "chunks retrieved for the trained reader's chunk model to choose a question's top_k from, best first (at "
        "most top_k: it only orders them); 0: no chunk model, retrieval's top_k in its order",
        ge=0,
        le=50,
    )
    reader_cross_candidates: int = env(
        6,
        "RAG_READER_CROSS_CANDIDATES",
        "the trained reader's extractive answer quotes the best 3 of its sentence model's top this many, re-ranked "
        "with the cross-encoder (RAG_READER_CROSS_MODEL); 0: the sentence model's best 3 (an LLM's answer never "
        "waits for it)",
    )
    reader_cross_model: str = env(
        "",
        "RAG_READER_CROSS_MODEL",
        "the cross-encoder's model file (.onnx from bench/reader/cross_train.py); empty: the shipped one",
    )
    confidence_threshold: float | None = env(
        None,
        "RAG_CONFIDENCE_THRESHOLD",
        "minimum confidence (0-100) to CITE, below it the answer is ROUTEd; empty: the reader's own (the trained "
        "model's, set for 95% precision on its training corpora; 60 for the rules)",
        ge=0,
        le=100,
    )

    @field_validator("confidence_threshold", mode="before")
    @classmethod
    def _empty_is_the_readers(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("reader_cross_candidates")
    @classmethod
    def _cross_candidates(cls, value: int) -> int:
        if value != 0 and not 2 <= value <= 12:
            raise ValueError("must be 0 (off) or 2..12")
        return value

    @field_validator("reader_model", "reader_cross_model")
    @classmethod
    def _model_file_exists(cls, value: str) -> str:
        if value and not Path(value).is_file():
            raise ValueError(f"no model file at {value}")
        return value

    default_llm_score: float = env(
        50.0, "RAG_DEFAULT_LLM_SCORE", "LLM self-score (0-100) used when no LLM scores the answer", ge=0, le=100
    )
    answerability_gate: bool = env(
        True,
        "RAG_ANSWERABILITY_GATE",
        "after the score gate, refuse with INSUFFICIENT_EVIDENCE when the evidence cannot answer the question",
    )
    answerability_min_coverage: float = env(
        0.50,
        "RAG_ANSWERABILITY_MIN_COVERAGE",
        "least share of the question's terms (weighted by rarity in the documents and in English) one piece of "
        "evidence must hold (0-1)",
        ge=0,
        le=1,
    )
    answerability_rare_share: float = env(
        0.002,
        "RAG_ANSWERABILITY_RARE_SHARE",
        "a name in the question that the evidence lacks and at most this share of the chunks mention is not covered",
        ge=0,
        le=1,
    )
    admin_email: str = env("admin@example.com", "RAG_ADMIN_EMAIL", "route target when no owner is known")


class RecordsSettings(Group):
    title = "Records (audit log, sessions, owners, templates, weights)"

    database_path: str = env(
        "", "RAG_DB_PATH", "SQLite file for answers, sessions, owners, templates and weights (default: in RAG_DATA_DIR)"
    )
    database_url: SecretStr = env(
        SecretStr(""),
        "RAG_DATABASE_URL",
        "PostgreSQL for the records instead, shared by replicas: postgresql://user:password@host:5432/db; empty: the SQLite file",
    )
    database_pool_min_size: int = env(1, "RAG_DATABASE_POOL_MIN_SIZE", "PostgreSQL connections each replica keeps open", ge=0)
    database_pool_max_size: int = env(10, "RAG_DATABASE_POOL_MAX_SIZE", "most PostgreSQL connections of one replica", ge=1)
    database_connect_timeout_s: float = env(
        5.0,
        "RAG_DATABASE_CONNECT_TIMEOUT_SECONDS",
        "PostgreSQL: longest wait for a connection (a new one, or a free one of the pool)",
        gt=0,
    )
    database_command_timeout_s: float = env(
        30.0, "RAG_DATABASE_COMMAND_TIMEOUT_SECONDS", "PostgreSQL: longest wait for one statement", gt=0
    )
    owners_file: str = env(
        "", "RAG_OWNERS_FILE", 'JSON {"users": [{id, email}], "tags": [{name, owner_user_id}]} loaded at start'
    )
    session_history_messages: int = env(10, "RAG_SESSION_HISTORY_MESSAGES", "stored messages reused as a session's history", ge=0)
    session_retention_days: float = env(30.0, "RAG_SESSION_RETENTION_DAYS", "session messages older than this are purged", gt=0)
    audit_retention_days: float = env(
        0.0,
        "RAG_AUDIT_RETENTION_DAYS",
        "audit rows (their metadata: ids, caller, times, outcome, timings) older than this are purged; 0: kept forever",
        ge=0,
    )
    audit_text_retention_days: float | None = env(
        None,
        "RAG_AUDIT_TEXT_RETENTION_DAYS",
        "the text of audit rows (question, search, answer, draft, packed chunks, error message) older than this is "
        "erased, the row kept; empty: as RAG_SESSION_RETENTION_DAYS (conversations are kept 30 days); 0: as long "
        "as the row",
        ge=0,
    )
    audit_before_answer: bool = env(
        True,
        "RAG_AUDIT_BEFORE_ANSWER",
        "the final answer waits for its audit row's commit (no crash loses the row of an answer a client got); "
        "false: the row is committed just after the answer goes out (~0.7 ms sooner on SQLite; a crash in "
        "between loses it, a failed commit is logged instead of failing the answer)",
    )
    retention_interval_s: float = env(
        3600.0,
        "RAG_RETENTION_INTERVAL_SECONDS",
        "the purge of old session messages and audit rows runs at start and then this often",
        gt=0,
    )
    _owners: OwnersDocument | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _documents(self) -> Self:
        checks = _Checks()
        if self.owners_file:
            self._owners = checks.parsed("RAG_OWNERS_FILE", lambda: parse_owners(read_text(self.owners_file)))
        url = self.database_url.get_secret_value()
        if url and not url.startswith(POSTGRES_SCHEMES):
            checks.refuse("RAG_DATABASE_URL", f"(secret) refused: expected a URL starting with {' or '.join(POSTGRES_SCHEMES)}")
        if url and self.database_path:
            checks.refuse("RAG_DB_PATH", "set with RAG_DATABASE_URL: the records live in one database (unset one)")
        if self.database_pool_min_size > self.database_pool_max_size:
            checks.refuse(
                "RAG_DATABASE_POOL_MIN_SIZE",
                f"{self.database_pool_min_size} refused: more than RAG_DATABASE_POOL_MAX_SIZE ({self.database_pool_max_size})",
            )
        checks.done()
        return self

    @field_validator("audit_text_retention_days", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def owners(self) -> OwnersDocument | None:
        """RAG_OWNERS_FILE, parsed; None when none is named."""
        return self._owners

    @property
    def audit_text_days(self) -> float:
        """How long the audit log keeps its text: RAG_AUDIT_TEXT_RETENTION_DAYS, else the sessions' retention."""
        if self.audit_text_retention_days is None:
            return self.session_retention_days
        return self.audit_text_retention_days

    def database_location(self, data_dir: Path) -> Path | str:
        """Where the records are: the PostgreSQL URL when one is set, else the SQLite file."""
        return self.database_url.get_secret_value() or self.database_path or data_dir / "ragsvc.sqlite3"


class OperationSettings(Group):
    title = "Long-running operations (SubmitAsk, SubmitIngest)"

    operation_retention_days: float = env(
        7.0, "RAG_OPERATION_RETENTION_DAYS", "finished operations are deleted this long after they finished", gt=0
    )
    operation_lease_s: float = env(
        30.0,
        "RAG_OPERATION_LEASE_SECONDS",
        "a replica renews its lease on the operations it runs every third of this; an operation whose lease ran "
        "out (its replica died) is failed with ABORTED by whichever replica sees it first",
        ge=1,
    )
    operation_max_running: int = env(
        2, "RAG_OPERATION_MAX_RUNNING", "operations of each kind (asks, ingests) one replica runs at once; more wait "
        "QUEUED", ge=1,
    )  # fmt: skip
    operation_max_queued: int = env(
        100,
        "RAG_OPERATION_MAX_QUEUED",
        "operations of each kind one replica holds waiting; one more is refused with RESOURCE_EXHAUSTED (OVERLOADED)",
        ge=0,
    )
    operation_wait_max_s: float = env(
        60.0, "RAG_OPERATION_WAIT_MAX_SECONDS", "longest WaitOperation, whatever timeout it asks for", gt=0
    )
    operation_poll_s: float = env(
        0.5,
        "RAG_OPERATION_POLL_SECONDS",
        "how often a waiting WaitOperation reads an operation another replica runs, and a replica checks for "
        "cancellations asked on another one",
        gt=0,
    )


class SharedStateSettings(Group):
    title = "Shared state (Redis, for replicas)"

    redis_url: SecretStr = env(
        SecretStr(""),
        "RAG_REDIS_URL",
        "Redis or Valkey for the answer cache, idempotent replays, rate limits and change feed, shared by "
        "replicas: redis://[:password@]host:6379/0 (rediss:// with TLS); empty: in memory, per replica",
    )
    redis_timeout_s: float = env(
        0.5,
        "RAG_REDIS_TIMEOUT_SECONDS",
        "longest wait for Redis (connect or command); past it the call goes on without Redis",
        gt=0,
    )
    redis_retry_s: float = env(
        1.0, "RAG_REDIS_RETRY_SECONDS", "while Redis is out, requests skip it for this long between tries", ge=0
    )
    changes_poll_s: float = env(
        0.25,
        "RAG_CHANGES_POLL_SECONDS",
        "how often a replica checks for template and ranking-weight changes made on another one",
        gt=0,
    )

    @model_validator(mode="after")
    def _url(self) -> Self:
        url = self.redis_url.get_secret_value()
        if url and not url.startswith(REDIS_SCHEMES):
            checks = _Checks()
            checks.refuse("RAG_REDIS_URL", f"(secret) refused: expected a URL starting with {' or '.join(REDIS_SCHEMES)}")
            checks.done()
        return self


_ENVIRON: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar("ragsvc_environ", default=None)


class Settings(BaseSettings):
    """Every setting, in its group. Build with `from_env` (the environment, or a mapping) or `of` (field names)."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(default_factory=ServerSettings)
    hardening: HardeningSettings = Field(default_factory=HardeningSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    trust: TrustSettings = Field(default_factory=TrustSettings)
    records: RecordsSettings = Field(default_factory=RecordsSettings)
    shared: SharedStateSettings = Field(default_factory=SharedStateSettings)
    operations: OperationSettings = Field(default_factory=OperationSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _FlatEnvironment(settings_cls))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Every setting from `environ` (default os.environ); InvalidRequest naming each refused variable."""
        return cls._build(os.environ if environ is None else environ, {})

    @classmethod
    def of(cls, **fields: Any) -> Settings:
        """The defaults with `fields` (by field name, any group: `Settings.of(top_k=3, data_dir=path)`) set,
        validated like the environment; the environment is not read."""
        grouped: dict[str, dict[str, Any]] = {}
        for name, value in fields.items():
            group = _GROUP_OF_FIELD.get(name)
            if group is None:
                raise TypeError(f"no setting named {name!r}")
            grouped.setdefault(group, {})[name] = value
        return cls._build({}, grouped)

    def answer_fingerprint(self) -> str:
        """The SHA-256 of the settings that shape an answer (the retrieval, generation, budget and trust groups; secrets
        masked): part of the answer cache's key, so that a server restarted with other settings, or replicas sharing a
        cache while their settings differ (a rolling change), never serve an answer written under other settings."""
        shaping = {group: getattr(self, group).model_dump(mode="json") for group in _ANSWER_SHAPING}
        return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()

    def replace(self, **fields: Any) -> Settings:
        """These settings with `fields` (by field name) changed, validated again."""
        current = {group: getattr(self, group).model_dump() for group in _GROUPS}
        for name, value in fields.items():
            group = _GROUP_OF_FIELD.get(name)
            if group is None:
                raise TypeError(f"no setting named {name!r}")
            current[group][name] = value
        return type(self)._build({}, current)

    @classmethod
    def _build(cls, environ: Mapping[str, str], init: Mapping[str, Mapping[str, Any]]) -> Settings:
        resolution = aliases.resolve(environ, _VARIABLES)  # the specifications' names, read as ragsvc's own
        resolution.log()
        if resolution.refusals:
            raise _invalid([FieldViolation(variable, why) for variable, why in resolution.refusals])
        token = _ENVIRON.set(resolution.environ)
        try:
            return cls.model_validate(init)
        except ValidationError as exc:
            raise _invalid([
                FieldViolation(resolution.blame(v.field), v.description) for v in _violations(exc)
            ]) from None  # fmt: skip
        finally:
            _ENVIRON.reset(token)


def _invalid(violations: list[FieldViolation]) -> InvalidRequest:
    return InvalidRequest(violations, "invalid configuration: " + "; ".join(f"{v.field}: {v.description}" for v in violations))


class _FlatEnvironment(PydanticBaseSettingsSource):
    """Each group's values from the flat environment variables its fields are aliased to."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads whole groups

    def __call__(self) -> dict[str, Any]:
        environ = _ENVIRON.get()
        environ = os.environ if environ is None else environ
        grouped: dict[str, dict[str, str]] = {}
        for group, model in _GROUPS.items():
            for name, info in model.model_fields.items():
                variable = str(info.validation_alias)
                if variable in environ:
                    grouped.setdefault(group, {})[name] = environ[variable]
        unknown = sorted(name for name in environ if name.startswith("RAG_") and name not in _VARIABLES)
        if unknown:
            _log.warning("ignoring unknown settings (typos?): %s", ", ".join(unknown))
        return grouped


_GROUPS: dict[str, type[Group]] = {
    name: info.annotation  # type: ignore[misc]
    for name, info in Settings.model_fields.items()
}
_GROUP_OF_FIELD = {field: group for group, model in _GROUPS.items() for field in model.model_fields}
_ANSWER_SHAPING = ("retrieval", "generation", "budget", "trust")  # the groups whose settings shape an answer
_VARIABLES = {str(info.validation_alias): info for model in _GROUPS.values() for info in model.model_fields.values()}


def variables() -> Iterator[tuple[str, type[Group], str, FieldInfo]]:
    """Every setting as (group name, group, field name, field), in declaration order."""
    for group, model in _GROUPS.items():
        for name, info in model.model_fields.items():
            yield group, model, name, info


def _field(model: type[Group], name: str) -> FieldInfo | None:
    """The field `name` names, by field name or by environment variable."""
    if name in model.model_fields:
        return model.model_fields[name]
    return next((info for info in model.model_fields.values() if info.validation_alias == name), None)


def _violations(exc: ValidationError) -> Iterator[FieldViolation]:
    """One violation per refused value: the variable, the value (never a secret's) and why."""
    for error in exc.errors():
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, SettingError):
            yield from (FieldViolation(variable, why) for variable, why in cause.refusals)
            continue
        group, field = (error["loc"] + ("", ""))[:2]
        model = _GROUPS.get(str(group))
        info = _field(model, str(field)) if model is not None else None
        variable = str(info.validation_alias) if info is not None else ".".join(map(str, error["loc"]))
        secret = info is not None and info.annotation is SecretStr
        value = "(secret)" if secret else repr(error.get("input"))
        yield FieldViolation(variable, f"{value} refused: {error['msg'].removeprefix('Value error, ')}")
