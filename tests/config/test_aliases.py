"""The source specifications' settings names, read as aliases of ragsvc's own (ragsvc.config.aliases): each alias
read as its setting with one log line naming it, each way two names can disagree refused with what to use, the
names ragsvc has no setting for logged as not used, and deployments written from the agent API and orchestration
specifications as they would be set."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest
from pydantic import SecretStr

from ragsvc.config import Settings
from ragsvc.config.aliases import SEED_NAMES, SeedName, Spec, resolve
from ragsvc.config.settings import variables
from ragsvc.errors import InvalidRequest

ALIASES = [seed_name for seed_name in SEED_NAMES if seed_name.reads_as]
UNUSED = [seed_name for seed_name in SEED_NAMES if not seed_name.reads_as and seed_name.check is None]
VARIABLES = {str(info.validation_alias): info for _, _, _, info in variables()}
# A value for each setting an alias is read as, and another one (for the conflicts).
SAMPLES: dict[str, tuple[str, str]] = {
    "RAG_QDRANT_URL": ("http://qdrant.example:6333", "http://other.example:6333"),
    "RAG_QDRANT_API_KEY": ("q-secret", "q-other"),
    "RAG_QDRANT_COLLECTION": ("rag_embedding", "financial_docs"),
    "RAG_DATABASE_URL": ("postgresql://user:pass@db.example/rag", "postgresql://user:pass@other.example/rag"),
    "RAG_API_RATE_LIMIT": ("100", "30"),
    "RAG_SESSION_HISTORY_MESSAGES": ("6", "10"),
    "RAG_SESSION_RETENTION_DAYS": ("7", "30"),
    "CHAT_MODEL": ("qwen3:8b", "deepseek-r1:32b"),
    "OPENAI_BASE_URL": ("https://generativelanguage.googleapis.com/v1beta/openai/", "http://127.0.0.1:9/v1"),
    "OPENAI_API_KEY": ("g-secret", "g-other"),
    "RAG_TOTAL_CONTEXT_CHUNKS": ("8", "5"),
    "RAG_MIN_SIMILARITY_SCORE": ("0.5", "0.7"),
    "RAG_MAX_CONTEXT_TOKENS": ("2500", "3000"),
    "RAG_MAX_CONTEXT_CHUNKS": ("10", "4"),
    "RAG_TEMPERATURE": ("0.0", "0.7"),
    "RAG_MAX_RESPONSE_TOKENS": ("2000", "512"),
    "RAG_CHUNK_TOKENS": ("1000", "300"),
    "RAG_CHUNK_OVERLAP_TOKENS": ("20", "40"),
}
# The names whose value is made from more than their own (QDRANT_HOST and QDRANT_PORT make one URL).
COMPOSED = {"QDRANT_HOST": ("qdrant.example", "http://qdrant.example:6333"),
            "QDRANT_PORT": ("6334", "http://localhost:6334")}  # fmt: skip


def value(settings: Settings, variable: str) -> Any:
    """The setting `variable` names, as the settings hold it (a secret's value revealed)."""
    for group, _, name, info in variables():
        if info.validation_alias == variable:
            held = getattr(getattr(settings, group), name)
            return held.get_secret_value() if isinstance(held, SecretStr) else held
    raise KeyError(variable)


def refusal(environ: dict[str, str]) -> list[tuple[str, str]]:
    with pytest.raises(InvalidRequest) as refused:
        Settings.from_env(environ)
    return [(v.field, v.description) for v in refused.value.violations]


def sample(seed_name: SeedName) -> tuple[str, str]:
    """(the value to set the alias to, the value its setting then has, as ragsvc's own name would be set)."""
    if seed_name.name in COMPOSED:
        return COMPOSED[seed_name.name]
    given = SAMPLES[seed_name.reads_as][0]
    return given, given


def test_every_alias_reads_as_a_ragsvc_setting_and_none_is_one() -> None:
    assert {seed_name.reads_as for seed_name in ALIASES} <= set(VARIABLES)
    assert not {seed_name.name for seed_name in SEED_NAMES} & set(VARIABLES), "a ragsvc name needs no alias"
    assert set(SAMPLES) == {seed_name.reads_as for seed_name in ALIASES}, "a sample for each setting read"


def test_no_name_has_two_meanings_in_the_specifications() -> None:
    """QDRANT_COLLECTION is the one name two specifications share (the agent API's config.py constant, the query
    system's setting); both mean the collection."""
    meanings: dict[str, set[str]] = {}
    for seed_name in SEED_NAMES:
        meanings.setdefault(seed_name.name, set()).add(seed_name.reads_as)
    shared = {name for name in meanings if sum(s.name == name for s in SEED_NAMES) > 1}
    assert shared == {"QDRANT_COLLECTION"} and meanings["QDRANT_COLLECTION"] == {"RAG_QDRANT_COLLECTION"}


@pytest.mark.parametrize("seed_name", ALIASES, ids=lambda s: f"{s.name}-{s.spec.name}")
def test_an_alias_is_read_as_its_setting_with_one_line_naming_it(seed_name: SeedName, caplog) -> None:
    given, held = sample(seed_name)
    caplog.set_level(logging.INFO, "ragsvc.config")
    settings = Settings.from_env({seed_name.name: given})
    assert settings == Settings.from_env({seed_name.reads_as: held}), "as if ragsvc's own name were set"
    assert settings != Settings.of(), "the alias changed something"
    [line] = [r for r in caplog.records if r.name == "ragsvc.config"]
    assert line.levelno == logging.INFO
    assert line.getMessage().startswith(f"{seed_name.name} (") and f"is read as {seed_name.reads_as}" in line.getMessage()
    assert seed_name.spec.value in line.getMessage()


@pytest.mark.parametrize("seed_name", ALIASES, ids=lambda s: f"{s.name}-{s.spec.name}")
def test_an_alias_and_its_setting_set_apart_are_refused(seed_name: SeedName) -> None:
    given, _ = sample(seed_name)
    other = SAMPLES[seed_name.reads_as][1]
    [(variable, why)] = refusal({seed_name.name: given, seed_name.reads_as: other})
    assert variable == seed_name.name
    assert why.endswith(f"set {seed_name.reads_as} alone and unset {seed_name.name}")
    secret = VARIABLES[seed_name.reads_as].annotation is SecretStr
    assert (given in why, other in why) == (not secret, not secret), "values are shown, a secret's never"


@pytest.mark.parametrize("seed_name", ALIASES, ids=lambda s: f"{s.name}-{s.spec.name}")
def test_an_alias_and_its_setting_set_alike_are_read(seed_name: SeedName) -> None:
    given, held = sample(seed_name)
    assert value(Settings.from_env({seed_name.name: given, seed_name.reads_as: held}), seed_name.reads_as) == value(
        Settings.from_env({seed_name.reads_as: held}), seed_name.reads_as
    )


def _pairs() -> list[tuple[SeedName, SeedName]]:
    by_setting: dict[str, dict[str, SeedName]] = {}
    for seed_name in ALIASES:
        by_setting.setdefault(seed_name.reads_as, {}).setdefault(seed_name.name, seed_name)
    return [pair for names in by_setting.values() for pair in itertools.combinations(names.values(), 2)
            if {pair[0].name, pair[1].name} != {"QDRANT_HOST", "QDRANT_PORT"}]  # fmt: skip  (those two make one URL)


@pytest.mark.parametrize("pair", _pairs(), ids=lambda p: f"{p[0].name}+{p[1].name}")
def test_two_aliases_of_one_setting_must_agree(pair: tuple[SeedName, SeedName]) -> None:
    first, second = pair
    setting = first.reads_as
    given, _ = sample(first)
    other = SAMPLES[setting][1] if second.name not in COMPOSED else "elsewhere.example"
    [(variable, why)] = refusal({first.name: given, second.name: other})
    assert variable == first.name and why.endswith(f"set {setting} alone and unset {first.name} and {second.name}")
    agreeing = {first.name: given, second.name: given}
    if second.name in COMPOSED:  # QDRANT_URL as QDRANT_HOST or QDRANT_PORT makes it
        agreeing = {first.name: COMPOSED[second.name][1], second.name: COMPOSED[second.name][0]}
    assert Settings.from_env(agreeing) == Settings.from_env({setting: agreeing[first.name]})


def test_values_that_differ_only_in_spelling_agree() -> None:
    settings = Settings.from_env({"RAG_MIN_SIMILARITY_THRESHOLD": "0.5", "MIN_RELEVANCE_SCORE": "0.50",
                                  "RAG_MIN_SIMILARITY_SCORE": " .5"})  # fmt: skip
    assert settings.retrieval.min_similarity == 0.5


def test_qdrant_host_and_port_make_one_url() -> None:
    both = Settings.from_env({"QDRANT_HOST": "qdrant", "QDRANT_PORT": "7000"})
    assert both.retrieval.qdrant_url == "http://qdrant:7000"
    assert Settings.from_env({"QDRANT_HOST": "qdrant", "QDRANT_PORT": "7000", "RAG_QDRANT_URL": "http://qdrant:7000"})
    [(variable, _)] = refusal({"QDRANT_HOST": "qdrant", "RAG_QDRANT_URL": "http://qdrant:6334"})
    assert variable == "QDRANT_HOST"


@pytest.mark.parametrize("seed_name", UNUSED, ids=lambda s: s.name)
def test_a_name_without_a_ragsvc_setting_is_logged_as_not_used(seed_name: SeedName, caplog) -> None:
    caplog.set_level(logging.INFO, "ragsvc.config")
    assert Settings.from_env({seed_name.name: "anything"}) == Settings.of()
    [line] = [r for r in caplog.records if r.name.startswith("ragsvc.config")]
    assert line.levelno == logging.WARNING
    assert line.getMessage() == (f"{seed_name.name} ({seed_name.spec.value}'s name) has no ragsvc setting and is "
                                 f"not used: {seed_name.note}")  # fmt: skip


@pytest.mark.parametrize(
    ("environ", "refused"),
    [
        ({"RAG_CACHE_BACKEND": "redis"}, "redis needs RAG_REDIS_URL"),
        ({"RAG_CACHE_BACKEND": "memory", "RAG_REDIS_URL": "redis://cache:6379/0"}, "unset one of them"),
        ({"RAG_CACHE_BACKEND": "memcached"}, "expected redis or memory"),
        ({"RAG_CACHE_BACKEND": "Redis", "RAG_REDIS_URL": "redis://cache:6379/0"}, None),
        ({"RAG_CACHE_BACKEND": "memory"}, None),
    ],
)
def test_the_cache_backend_is_checked_against_the_redis_url(environ: dict[str, str], refused: str | None) -> None:
    if refused is None:
        assert Settings.from_env(environ).shared.redis_url.get_secret_value() == environ.get("RAG_REDIS_URL", "")
        return
    [(variable, why)] = refusal(environ)
    assert variable == "RAG_CACHE_BACKEND" and refused in why


def test_a_name_two_specifications_read_apart_is_refused_with_both_settings() -> None:
    names = (SeedName("TOP_K", Spec.AGENT_API, "RAG_TOTAL_CONTEXT_CHUNKS"),
             SeedName("TOP_K", Spec.ORCHESTRATION, "RAG_MAX_CONTEXT_CHUNKS"))  # fmt: skip
    resolution = resolve({"TOP_K": "5"}, VARIABLES, names)
    [(variable, why)] = resolution.refusals
    assert variable == "TOP_K" and "TOP_K" not in resolution.environ
    assert why == (
        "means different settings in different specifications (the RAG agent API specification reads it as "
        "RAG_TOTAL_CONTEXT_CHUNKS; the RAG orchestration specification reads it as RAG_MAX_CONTEXT_CHUNKS): set "
        "RAG_TOTAL_CONTEXT_CHUNKS or RAG_MAX_CONTEXT_CHUNKS instead, and unset TOP_K"
    )
    assert resolve({}, VARIABLES, names).refusals == ()


def test_a_bad_value_is_blamed_on_the_name_that_was_set() -> None:
    assert refusal({"API_RATE_LIMIT": "lots"}) == [
        ("API_RATE_LIMIT (read as RAG_API_RATE_LIMIT)",
         "'lots' refused: Input should be a valid integer, unable to parse string as an integer"),
    ]  # fmt: skip
    assert refusal({"DATABASE_URL": "mysql://user:secret@db/rag"}) == [
        ("DATABASE_URL (read as RAG_DATABASE_URL)",
         "(secret) refused: expected a URL starting with postgresql:// or postgres://"),
    ]  # fmt: skip


def test_aliases_are_not_reported_as_unknown_settings(caplog) -> None:
    caplog.set_level(logging.WARNING)
    Settings.from_env({"RAG_DEFAULT_TOP_K": "5", "RAG_SNIPPET_SIZE": "300", "RAG_TOTALLY_UNKNOWN": "1"})
    unknown = [r.getMessage() for r in caplog.records if "unknown settings" in r.getMessage()]
    assert unknown == ["ignoring unknown settings (typos?): RAG_TOTALLY_UNKNOWN"]


def test_a_deployment_written_from_the_agent_api_specification(caplog) -> None:
    """Its environment-variable table, with its examples (and the model allowed, as ragsvc needs it to be)."""
    environ = {
        "GEMINI_API_KEY": "AIza-example", "COHERE_API_KEY": "co-example",
        "QDRANT_URL": "https://xyz.cloud.qdrant.io:6333", "QDRANT_API_KEY": "qd-example",
        "QDRANT_COLLECTION_NAME": "rag_embedding", "GEMINI_MODEL": "gemini-2.0-flash",
        "GEMINI_BASE_URL": "https://generativelanguage.googleapis.com/v1beta/openai/",
        "DATABASE_URL": "postgresql://user:pass@ep-xxx.neon.tech/dbname", "API_RATE_LIMIT": "100",
        "MAX_CONVERSATION_HISTORY": "10", "CONVERSATION_RETENTION_DAYS": "30",
    }  # fmt: skip
    [(variable, why)] = refusal(environ)
    assert variable == "GEMINI_MODEL (read as CHAT_MODEL)" and why.startswith("'gemini-2.0-flash' is not in RAG_MODELS")
    caplog.clear()
    caplog.set_level(logging.INFO, "ragsvc.config")
    settings = Settings.from_env({**environ, "RAG_GENERATOR": "openai", "RAG_MODELS": "gemini-2.0-flash=1048576/8192"})
    assert (settings.retrieval.qdrant_url, settings.retrieval.qdrant_api_key.get_secret_value(),
            settings.retrieval.qdrant_collection) == ("https://xyz.cloud.qdrant.io:6333", "qd-example", "rag_embedding")
    assert settings.records.database_url.get_secret_value() == "postgresql://user:pass@ep-xxx.neon.tech/dbname"
    assert settings.hardening.rate_limit_per_minute == 100
    assert (settings.records.session_history_messages, settings.records.session_retention_days) == (10, 30.0)
    assert settings.records.audit_text_days == 30.0, "the audit log's text is kept as long as conversations"
    generation = settings.generation
    assert (generation.chat_model, generation.openai_api_key.get_secret_value()) == ("gemini-2.0-flash", "AIza-example")
    assert generation.openai_base_url == "https://generativelanguage.googleapis.com/v1beta/openai/"
    lines = [r.getMessage() for r in caplog.records if r.name == "ragsvc.config"]
    assert len(lines) == len(environ), "one line per name"
    assert "COHERE_API_KEY (the RAG agent API specification's name) has no ragsvc setting" in " ".join(lines)


def test_a_deployment_written_from_the_orchestration_specification() -> None:
    """Its configuration block as written: two of its values cannot be served as they are, and ragsvc says so."""
    environ = {
        "RAG_MAX_QUERY_LENGTH": "500", "RAG_MAX_TOKEN_LENGTH": "2000", "RAG_DEFAULT_TOP_K": "5",
        "RAG_MIN_SIMILARITY_THRESHOLD": "0.5", "RAG_SNIPPET_SIZE": "300", "RAG_SIMILARITY_WEIGHT": "0.7",
        "RAG_RECENCY_WEIGHT": "0.2", "RAG_TRUST_WEIGHT": "0.1", "RAG_TOKEN_BUDGET": "3000", "RAG_MAX_SNIPPETS": "10",
        "RAG_DEFAULT_TEMPLATE": "legal_analysis_balanced", "RAG_DEFAULT_FOLLOW_UP_COUNT": "2",
        "RAG_CACHE_TTL_SECONDS": "3600", "RAG_CACHE_BACKEND": "redis", "RAG_ENABLE_INJECTION_DETECTION": "true",
        "RAG_MAX_RETRIES_ON_HALLUCINATION": "2",
    }  # fmt: skip
    assert [variable for variable, _ in refusal(environ)] == ["RAG_CACHE_BACKEND"]
    environ["RAG_REDIS_URL"] = "redis://cache:6379/0"
    assert [variable for variable, _ in refusal(environ)] == ["RAG_DEFAULT_TEMPLATE"]
    settings = Settings.from_env({**environ, "RAG_DEFAULT_TEMPLATE": "rag-v1"})
    assert (settings.retrieval.top_k, settings.retrieval.min_similarity) == (5, 0.5)
    assert (settings.budget.max_context_tokens, settings.budget.max_context_chunks) == (3000, 10)
    assert settings.hardening.cache_ttl_s == 3600.0 and settings.generation.hallucination_retries == 2
