"""Every setting's default, pinned: changing one is a decision this table records (and docs/settings.md follows, as
its tables are generated from the settings: see test_reference.py)."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from ragsvc.config import Settings
from ragsvc.config.settings import variables

DEFAULTS: dict[str, Any] = {
    # Serving
    "RAG_GRPC_ADDRESS": "127.0.0.1:50051",
    "RAG_GRACE_PERIOD_SECONDS": 10.0,
    "RAG_WORKERS": 1,
    "RAG_HEALTH_PROBE_INTERVAL_SECONDS": 5.0,
    "RAG_DEFAULT_TENANT": "default",
    "RAG_TOTAL_TIMEOUT_SECONDS": 30.0,
    "RAG_DATA_DIR": ".ragsvc-data",
    "RAG_DEMO_CORPUS": True,
    # Authentication, limits and observability
    "RAG_AUTH_ENABLED": False,
    "RAG_API_KEYS_FILE": "",
    "RAG_API_KEYS": "",
    "RAG_TLS_CERT_FILE": "",
    "RAG_TLS_KEY_FILE": "",
    "RAG_TLS_CLIENT_CA_FILE": "",
    "RAG_API_RATE_LIMIT": 60,
    "RAG_MAX_CONCURRENT_REQUESTS": 10,
    "RAG_MAX_RECEIVE_MESSAGE_BYTES": 16 * 1024 * 1024,
    "RAG_MAX_SEND_MESSAGE_BYTES": 16 * 1024 * 1024,
    "RAG_KEEPALIVE_TIME_SECONDS": 60.0,
    "RAG_KEEPALIVE_TIMEOUT_SECONDS": 20.0,
    "RAG_MAX_CONNECTION_AGE_SECONDS": 0.0,
    "RAG_KEEPALIVE_MIN_PING_INTERVAL_SECONDS": 10.0,
    "RAG_MAX_HISTORY_MESSAGES": 50,
    "RAG_ENABLE_INJECTION_DETECTION": True,
    "RAG_REJECT_INJECTION": False,
    "RAG_CACHE_MAX_ENTRIES": 1000,
    "RAG_CACHE_TTL_SECONDS": 3600.0,
    "RAG_IDEMPOTENCY_TTL_SECONDS": 86400.0,
    "RAG_REQUEST_LOG": True,
    "RAG_METRICS_PORT": 0,
    "OTEL_EXPORTER_OTLP_ENDPOINT": "",
    # Retrieval
    "RAG_TOTAL_CONTEXT_CHUNKS": 5,
    "RAG_MIN_SIMILARITY_SCORE": 0.15,
    "RAG_RETRIEVAL_TIMEOUT_SECONDS": 5.0,
    "RAG_MAX_CHUNKS_PER_DOC": 3,
    "RAG_CHUNK_OVERLAP_THRESHOLD": 0.9,
    "RAG_SIMILARITY_WEIGHT": 0.7,
    "RAG_RECENCY_WEIGHT": 0.2,
    "RAG_TRUST_WEIGHT": 0.1,
    "RAG_UNTAGGED_CHUNKS_VISIBLE": True,
    "RAG_CONFIDENTIAL_CLEARANCE_TAG": "confidential",
    "RAG_QDRANT_URL": "",
    "RAG_QDRANT_API_KEY": "",
    "RAG_QDRANT_COLLECTION": "ragsvc_chunks",
    "RAG_QDRANT_PREFER_GRPC": True,
    "RAG_QDRANT_TIMEOUT_SECONDS": 10.0,
    "RAG_EDGE_INDEX_AFTER_POINTS": 50000,
    "RAG_EDGE_INDEX_DELAY_SECONDS": 5.0,
    "RAG_EDGE_SEARCH_THREADS": 1,
    "RAG_EMBEDDER": "minilm",
    "RAG_EMBEDDER_INT8": False,
    "EMBEDDING_MODEL": "",
    "EMBEDDING_DIMENSION": 0,
    "RAG_EMBEDDING_BASE_URL": "",
    "RAG_EMBEDDING_BATCH_SIZE": 64,
    "RAG_EMBEDDING_TIMEOUT_SECONDS": 30.0,
    # Ingestion
    "RAG_CHUNK_TOKENS": 180,
    "RAG_CHUNK_OVERLAP_TOKENS": 40,
    "RAG_MAX_DOCUMENT_BYTES": 268435456,
    "RAG_SOURCE_TRUST": "official=1.0,supreme_court=1.0,high_court=0.9,statute=1.0,secondary=0.7,user_upload=0.5",
    "RAG_DEFAULT_SOURCE_TYPE": "user_upload",
    "RAG_INGEST_PARSE_SECONDS": 120.0,
    "RAG_INGEST_MAX_HTML_DEPTH": 1000,
    "RAG_INGEST_MAX_HTML_ATTRIBUTES": 1000,
    "RAG_INGEST_MAX_LINE_CHARS": 100_000,
    "RAG_INGEST_MAX_DECOMPRESSED_BYTES": 32 * 1024 * 1024,
    "RAG_INGEST_MAX_CHUNKS": 50_000,
    "RAG_INGEST_MAX_CALL_CHUNKS": 1000,
    # Generation
    "RAG_GENERATOR": "extractive",
    "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
    "OPENAI_API_KEY": "",
    "OLLAMA_BASE_URL": "http://localhost:11434",
    "CHAT_MODEL": "llama3.2",
    "RAG_TEMPERATURE": 0.1,
    "RAG_TIMEOUT_SECONDS": 30.0,
    "RAG_MODELS": "llama3.2=8192/1024,qwen3:8b=32768/2048,deepseek-r1:32b=65536/4096",
    "RAG_MAX_RESPONSE_TOKENS": 1024,
    "FALLBACK_LLM": "",
    "RAG_FALLBACK_EXTRACTIVE": False,
    "RAG_DEFAULT_TEMPLATE": "rag-v1",
    "RAG_OLLAMA_KEEP_ALIVE": "5m",
    "RAG_LANGUAGE_DETECTION": True,
    "RAG_LANGUAGE_MIN_CONFIDENCE": 0.65,
    "RAG_MODEL_LIST_TTL_SECONDS": 10.0,
    "RAG_LLM_CLASSIFY": True,
    "RAG_LLM_SELF_SCORE": True,
    "RAG_DEFAULT_FOLLOW_UP_COUNT": 2,
    "RAG_MAX_RETRIES_ON_HALLUCINATION": 2,
    "RAG_CITATION_POLICY": "drop_invalid",  # measured against strict: docs/llm.md
    "RAG_CITATION_ATTRIBUTION": True,  # measured on and off with make llm: docs/local-llm.md
    "RAG_LLM_RETRIES": 2,  # R-001-21: an LLM call is retried twice
    "RAG_LLM_RETRY_BACKOFF_SECONDS": 0.5,
    "RAG_MODEL_PRICES": "",
    "RAG_STREAM_POLICY": "validated",
    "RAG_LLM_CONDENSE": True,
    "RAG_CONDENSE_TIMEOUT_SECONDS": 3.0,
    # Token budget
    "RAG_MAX_CONTEXT_TOKENS": 3000,
    "RAG_MAX_HISTORY_TOKENS": 1000,
    "RAG_SYSTEM_PROMPT_TOKENS": 500,
    "RAG_MAX_CONTEXT_CHUNKS": 20,
    # Answer trust
    "RAG_SCORE_GATE": 0.15,
    "RAG_READER": "trained",
    "RAG_READER_MODEL": "",
    "RAG_READER_POOL": 8,
    "RAG_READER_CROSS_CANDIDATES": 6,  # docs/reading.md: the z-sum re-ranking of the top 6, measured unseen
    "RAG_READER_CROSS_MODEL": "",
    "RAG_CONFIDENCE_THRESHOLD": None,
    "RAG_DEFAULT_LLM_SCORE": 50.0,
    "RAG_ANSWERABILITY_GATE": True,
    "RAG_ANSWERABILITY_MIN_COVERAGE": 0.50,
    "RAG_ANSWERABILITY_RARE_SHARE": 0.002,
    "RAG_ADMIN_EMAIL": "admin@example.com",
    # Records
    "RAG_DB_PATH": "",
    "RAG_DATABASE_URL": "",
    "RAG_DATABASE_POOL_MIN_SIZE": 1,
    "RAG_DATABASE_POOL_MAX_SIZE": 10,
    "RAG_DATABASE_CONNECT_TIMEOUT_SECONDS": 5.0,
    "RAG_DATABASE_COMMAND_TIMEOUT_SECONDS": 30.0,
    "RAG_OWNERS_FILE": "",
    "RAG_SESSION_HISTORY_MESSAGES": 10,
    "RAG_SESSION_RETENTION_DAYS": 30.0,
    "RAG_AUDIT_RETENTION_DAYS": 0.0,
    "RAG_AUDIT_TEXT_RETENTION_DAYS": None,  # as RAG_SESSION_RETENTION_DAYS (RecordsSettings.audit_text_days)
    "RAG_AUDIT_BEFORE_ANSWER": True,
    "RAG_RETENTION_INTERVAL_SECONDS": 3600.0,
    # Shared state
    "RAG_REDIS_URL": "",
    "RAG_REDIS_TIMEOUT_SECONDS": 0.5,
    "RAG_REDIS_RETRY_SECONDS": 1.0,
    "RAG_CHANGES_POLL_SECONDS": 0.25,
    # Long-running operations
    "RAG_OPERATION_RETENTION_DAYS": 7.0,
    "RAG_OPERATION_LEASE_SECONDS": 30.0,
    "RAG_OPERATION_MAX_RUNNING": 2,
    "RAG_OPERATION_MAX_QUEUED": 100,
    "RAG_OPERATION_WAIT_MAX_SECONDS": 60.0,
    "RAG_OPERATION_POLL_SECONDS": 0.5,
}

EFFECTIVE = Settings.from_env({})
SETTINGS = {str(info.validation_alias): (group, name) for group, _, name, info in variables()}


def plain(value: Any) -> Any:
    """A setting's value as the table writes it."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


def test_the_table_names_every_setting_once() -> None:
    assert sorted(DEFAULTS) == sorted(SETTINGS)


@pytest.mark.parametrize(("variable", "expected"), DEFAULTS.items(), ids=list(DEFAULTS))
def test_default(variable: str, expected: Any) -> None:
    group, name = SETTINGS[variable]
    value = plain(getattr(getattr(EFFECTIVE, group), name))
    assert (type(value), value) == (type(expected), expected)


def test_the_defaults_need_no_environment() -> None:
    """The defaults alone make a valid configuration (what `make serve` runs with)."""
    assert Settings.of() == EFFECTIVE
