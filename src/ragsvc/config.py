"""Settings from the environment. Names follow the source specifications (RAG_*, OLLAMA_BASE_URL, CHAT_MODEL)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ragsvc.errors import FieldViolation, InvalidRequest

GENERATORS = ("extractive", "openai")


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
    # Generation
    generator: str = _env("RAG_GENERATOR", "extractive", "extractive (no LLM) or openai (OpenAI-compatible server)")
    openai_base_url: str = _env("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1", "OpenAI-compatible server URL")
    openai_api_key: str = _env("OPENAI_API_KEY", "", "bearer key for the OpenAI-compatible server")
    chat_model: str = _env("CHAT_MODEL", "llama3.2", "default LLM model")
    temperature: float = _env("RAG_TEMPERATURE", 0.1, "LLM temperature")
    timeout_s: float = _env("RAG_TIMEOUT_SECONDS", 30.0, "LLM response timeout")
    # Token budget
    model_context_tokens: int = _env("RAG_MODEL_CONTEXT_TOKENS", 8192, "context window of the chat model")
    max_context_tokens: int = _env("RAG_MAX_CONTEXT_TOKENS", 3000, "max tokens of retrieved context")
    max_history_tokens: int = _env("RAG_MAX_HISTORY_TOKENS", 1000, "max tokens of chat history")
    max_response_tokens: int = _env("RAG_MAX_RESPONSE_TOKENS", 1024, "tokens reserved for the answer")
    system_prompt_tokens: int = _env("RAG_SYSTEM_PROMPT_TOKENS", 500, "tokens reserved for the system prompt")
    # Answer trust
    confidence_threshold: float = _env(
        "RAG_CONFIDENCE_THRESHOLD", 60.0, "minimum confidence (0-100) to CITE; below it the answer is ROUTEd"
    )
    default_llm_score: float = _env(
        "RAG_DEFAULT_LLM_SCORE", 50.0, "LLM self-score (0-100) used when no LLM scores the answer"
    )
    admin_email: str = _env("RAG_ADMIN_EMAIL", "admin@example.com", "route target when no owner is known")

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
        if violations:
            raise InvalidRequest(violations, "invalid configuration: " + "; ".join(v.field for v in violations))
        return settings


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
