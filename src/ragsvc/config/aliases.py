"""The settings names of the source specifications, read as aliases of ragsvc's own (R-001-22, R-003-23).

A deployment written from one of the specifications sets the names that specification uses (QDRANT_URL,
DATABASE_URL, RAG_DEFAULT_TOP_K, ...). Many of them are ragsvc's own names already (RAG_TEMPERATURE, CHAT_MODEL,
OPENAI_API_KEY, ...); the others are listed in `SEED_NAMES`, each with the ragsvc setting it is read as. When
the settings are read (`resolve`, called by `Settings.from_env`):

- a name set in the environment is read as its ragsvc setting, and one line is logged naming that setting;
- a name ragsvc has no setting for is logged as not used, saying what ragsvc does instead; RAG_CACHE_BACKEND is
  checked against RAG_REDIS_URL, which is what chooses the cache's backend here;
- ragsvc refuses to start, naming the variables and which to use, when the names say two things at once: an
  alias and ragsvc's own name set to different values, two aliases of one setting set to different values, an
  impossible RAG_CACHE_BACKEND, or a name that two specifications use with different meanings. (No name of the
  five specifications has two meanings today: QDRANT_COLLECTION, the one name two of them share, names the
  collection in both.)

A value refused afterwards (a bad number, a URL of the wrong scheme) is blamed on the name that was set, with
the ragsvc setting it was read as (`Resolution.blame`).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import SecretStr, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

__all__ = ["SEED_NAMES", "Resolution", "SeedName", "Spec", "resolve"]

_log = logging.getLogger("ragsvc.config")


class Spec(enum.Enum):
    """The source specifications that name settings (the fifth, the pipeline task specification, names none)."""

    RAG_SERVICE = "the RAG service specification"
    AGENT_API = "the RAG agent API specification"
    ORCHESTRATION = "the RAG orchestration specification"
    QUERY_SYSTEM = "the RAG query system specification"


Environ = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class SeedName:
    """A settings name of a specification: read as ragsvc's `reads_as` (empty: ragsvc has no such setting, and
    `note` says what it does instead). `value` makes the value read from the environment (default: the name's
    own value); `check` returns why the environment is refused, or "" (a name without a ragsvc setting)."""

    name: str
    spec: Spec
    reads_as: str
    note: str = ""
    value: Callable[[Environ], str] | None = None
    check: Callable[[Environ], str] | None = None

    def read(self, environ: Environ) -> str:
        return self.value(environ) if self.value is not None else environ[self.name]


def _qdrant_url(environ: Environ) -> str:
    """The query system specification's QDRANT_HOST and QDRANT_PORT (defaults localhost, 6333) as one URL."""
    host = environ.get("QDRANT_HOST", "").strip() or "localhost"
    port = environ.get("QDRANT_PORT", "").strip() or "6333"
    return f"http://{host}:{port}"


def _cache_backend(environ: Environ) -> str:
    backend = environ["RAG_CACHE_BACKEND"].strip().lower()
    redis = bool(environ.get("RAG_REDIS_URL", "").strip())
    if backend == "redis" and not redis:
        return "redis needs RAG_REDIS_URL (redis://host:6379/0): ragsvc puts the cache on Redis when it is set"
    if backend == "memory" and redis:
        return "memory, but RAG_REDIS_URL is set (the cache is then on Redis): unset one of them"
    if backend not in ("redis", "memory"):
        return f"{backend!r} refused: expected redis or memory (ragsvc chooses by RAG_REDIS_URL; unset it)"
    return ""


_GENERATOR = "read with RAG_GENERATOR=openai"
SEED_NAMES: tuple[SeedName, ...] = (
    # The RAG agent API specification.
    SeedName("QDRANT_URL", Spec.AGENT_API, "RAG_QDRANT_URL"),
    SeedName("QDRANT_API_KEY", Spec.AGENT_API, "RAG_QDRANT_API_KEY"),
    SeedName("QDRANT_COLLECTION_NAME", Spec.AGENT_API, "RAG_QDRANT_COLLECTION"),
    SeedName("QDRANT_COLLECTION", Spec.AGENT_API, "RAG_QDRANT_COLLECTION", "a constant of its config.py"),
    SeedName("DATABASE_URL", Spec.AGENT_API, "RAG_DATABASE_URL"),
    SeedName("API_RATE_LIMIT", Spec.AGENT_API, "RAG_API_RATE_LIMIT"),
    SeedName("MAX_CONVERSATION_HISTORY", Spec.AGENT_API, "RAG_SESSION_HISTORY_MESSAGES",
             "the stored messages a session's next question is answered with"),
    SeedName("CONVERSATION_RETENTION_DAYS", Spec.AGENT_API, "RAG_SESSION_RETENTION_DAYS",
             "and so the audit log's text, unless RAG_AUDIT_TEXT_RETENTION_DAYS is set"),
    SeedName("GEMINI_MODEL", Spec.AGENT_API, "CHAT_MODEL", f"{_GENERATOR}; the model must be in RAG_MODELS"),
    SeedName("GEMINI_BASE_URL", Spec.AGENT_API, "OPENAI_BASE_URL", f"Gemini's OpenAI-compatible endpoint, {_GENERATOR}"),
    SeedName("GEMINI_API_KEY", Spec.AGENT_API, "OPENAI_API_KEY", _GENERATOR),
    SeedName("COHERE_API_KEY", Spec.AGENT_API, "",
             "ragsvc embeds with its bundled model or an Ollama or OpenAI-compatible server (RAG_EMBEDDER), not "
             "Cohere's API"),
    # The RAG orchestration specification.
    SeedName("RAG_DEFAULT_TOP_K", Spec.ORCHESTRATION, "RAG_TOTAL_CONTEXT_CHUNKS"),
    SeedName("RAG_MIN_SIMILARITY_THRESHOLD", Spec.ORCHESTRATION, "RAG_MIN_SIMILARITY_SCORE"),
    SeedName("RAG_TOKEN_BUDGET", Spec.ORCHESTRATION, "RAG_MAX_CONTEXT_TOKENS"),
    SeedName("RAG_MAX_SNIPPETS", Spec.ORCHESTRATION, "RAG_MAX_CONTEXT_CHUNKS"),
    SeedName("RAG_CACHE_BACKEND", Spec.ORCHESTRATION, "",
             "checked against RAG_REDIS_URL, which chooses the backend: Redis when it is set, memory otherwise",
             check=_cache_backend),
    SeedName("RAG_MAX_QUERY_LENGTH", Spec.ORCHESTRATION, "",
             "a question may have 2000 characters, the limit of the contract (the agent API specification's)"),
    SeedName("RAG_MAX_TOKEN_LENGTH", Spec.ORCHESTRATION, "",
             "a question with its history must fit the model's window (RAG_MODELS), else TOKEN_BUDGET_EXCEEDED"),
    SeedName("RAG_SNIPPET_SIZE", Spec.ORCHESTRATION, "",
             "a citation's snippet is its chunk's first 200 characters (the RAG service specification's rule), "
             "and its text the whole chunk"),
    # The RAG query system specification.
    SeedName("QDRANT_HOST", Spec.QUERY_SYSTEM, "RAG_QDRANT_URL", "http://QDRANT_HOST:QDRANT_PORT (port 6333 unless set)",
             value=_qdrant_url),
    SeedName("QDRANT_PORT", Spec.QUERY_SYSTEM, "RAG_QDRANT_URL", "http://QDRANT_HOST:QDRANT_PORT (host localhost unless set)",
             value=_qdrant_url),
    SeedName("QDRANT_COLLECTION", Spec.QUERY_SYSTEM, "RAG_QDRANT_COLLECTION"),
    SeedName("PRIMARY_LLM", Spec.QUERY_SYSTEM, "CHAT_MODEL", "the model must be in RAG_MODELS"),
    SeedName("LLM_TEMPERATURE", Spec.QUERY_SYSTEM, "RAG_TEMPERATURE"),
    SeedName("LLM_MAX_TOKENS", Spec.QUERY_SYSTEM, "RAG_MAX_RESPONSE_TOKENS"),
    SeedName("CHUNK_SIZE", Spec.QUERY_SYSTEM, "RAG_CHUNK_TOKENS"),
    SeedName("CHUNK_OVERLAP", Spec.QUERY_SYSTEM, "RAG_CHUNK_OVERLAP_TOKENS"),
    SeedName("TOP_K_CHUNKS", Spec.QUERY_SYSTEM, "RAG_TOTAL_CONTEXT_CHUNKS"),
    SeedName("MIN_RELEVANCE_SCORE", Spec.QUERY_SYSTEM, "RAG_MIN_SIMILARITY_SCORE"),
    SeedName("CHUNKING_SEPARATORS", Spec.QUERY_SYSTEM, "",
             "ragsvc splits documents into sections and those into chunks of RAG_CHUNK_TOKENS tokens, cut between "
             "words"),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Resolution:
    """The environment as ragsvc reads it (each alias read as its setting, the specifications' names removed), the
    lines to log (level, text), the refusals (variable, why), and which names each setting was read from."""

    environ: dict[str, str]
    notes: tuple[tuple[int, str], ...] = ()
    refusals: tuple[tuple[str, str], ...] = ()
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def log(self) -> None:
        for level, text in self.notes:
            _log.log(level, text)

    def blame(self, variable: str) -> str:
        """How a refusal names `variable`: by the names it was read from, when it was read from aliases."""
        names = self.sources.get(variable)
        return f"{' and '.join(names)} (read as {variable})" if names else variable


def resolve(
    environ: Environ, variables: Mapping[str, FieldInfo], names: Sequence[SeedName] = SEED_NAMES
) -> Resolution:
    """Read the specifications' names in `environ` as ragsvc's `variables` (see the module's docstring)."""
    readings: dict[str, list[SeedName]] = {}
    for seed_name in names:
        readings.setdefault(seed_name.name, []).append(seed_name)
    given = [name for name in readings if name in environ]
    notes: list[tuple[int, str]] = []
    refusals: list[tuple[str, str]] = []
    aliases: dict[str, list[SeedName]] = {}  # ragsvc's variable -> the names set that read as it
    for name in given:
        meanings = {reading.reads_as: reading for reading in readings[name]}
        if len(meanings) > 1:
            refusals.append((name, _ambiguous(name, list(meanings.values()))))
            continue
        reading = readings[name][0]
        if reading.reads_as:
            aliases.setdefault(reading.reads_as, []).append(reading)
            notes.append((logging.INFO, f"{name} ({_whose(readings[name])} name) is read as {reading.reads_as}"
                          + (f": {reading.note}" if reading.note else "")))  # fmt: skip
        elif reading.check is not None and (why := reading.check(environ)):
            refusals.append((name, why))
        else:
            notes.append((logging.WARNING, f"{name} ({_whose(readings[name])} name) has no ragsvc setting and is "
                          f"not used: {reading.note}"))  # fmt: skip
    resolved = {name: value for name, value in environ.items() if name not in readings}
    for variable, read in aliases.items():
        values = {reading.name: reading.read(environ) for reading in read}
        refusal = _disagreement(variable, values, environ.get(variable), variables.get(variable))
        if refusal:
            refusals.append(refusal)
        elif variable not in environ:
            resolved[variable] = next(iter(values.values()))
    sources = {variable: tuple(reading.name for reading in read) for variable, read in aliases.items()}
    return Resolution(resolved, tuple(notes), tuple(refusals), sources)


def _whose(readings: Sequence[SeedName]) -> str:
    specs = list(dict.fromkeys(reading.spec.value for reading in readings))
    return " and ".join(specs) + "'s"


def _ambiguous(name: str, meanings: Sequence[SeedName]) -> str:
    said = "; ".join(f"{m.spec.value} reads it as {m.reads_as or 'nothing ragsvc has'}" for m in meanings)
    use = " or ".join(m.reads_as for m in meanings if m.reads_as)
    return f"means different settings in different specifications ({said}): set {use} instead, and unset {name}"


def _disagreement(
    variable: str, values: Mapping[str, str], own: str | None, info: FieldInfo | None
) -> tuple[str, str] | None:
    """A refusal (blaming an alias) when the aliases of `variable`, or one of them and `own` (its value under
    ragsvc's name, when set), say different values; None when they agree."""
    secret = info is not None and info.annotation is SecretStr

    def same(a: str, b: str) -> bool:
        return _parsed(a, info) == _parsed(b, info)

    def refused(value: str, other: str, holder: str) -> str:
        if secret:  # no value of a secret is ever echoed
            return f"(secret) refused: {holder} holds another value"
        return f"{value!r} refused: {holder} is set to {other!r}"

    for name, value in values.items():
        if own is not None and not same(value, own):
            why = refused(value, own, f"{variable}, ragsvc's name for it,")
            return name, f"{why}: set {variable} alone and unset {name}"
    first, *others = values.items()
    for name, value in others:
        if not same(value, first[1]):
            why = refused(first[1], value, f"{name}, read as {variable} too,")
            return first[0], f"{why}: set {variable} alone and unset {first[0]} and {name}"
    return None


def _parsed(value: str, info: FieldInfo | None) -> object:
    """`value` as the setting reads it, to compare two spellings of one value ("5" and "5.0"); the stripped text
    when it does not parse (the setting refuses it later)."""
    if info is None or info.annotation is None:
        return value.strip()
    try:
        parsed = TypeAdapter(info.annotation).validate_python(value.strip())
    except ValidationError:
        return value.strip()
    return parsed.get_secret_value() if isinstance(parsed, SecretStr) else parsed
