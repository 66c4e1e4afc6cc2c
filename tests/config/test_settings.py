"""Settings: read from the environment (or built by field name), grouped, and checked in one pass when they are
built; every refused value is a FieldViolation naming its environment variable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsvc.config import GenerationSettings, RetrievalSettings, Settings
from ragsvc.config.documents import OwnersDocument
from ragsvc.config.settings import variables
from ragsvc.errors import InvalidRequest

SETTINGS_PAGE = (Path(__file__).resolve().parents[2] / "docs" / "settings.md").read_text()


def refused(**fields: object) -> list[str]:
    """The variables `Settings.of(**fields)` refuses, in the order reported."""
    with pytest.raises(InvalidRequest) as caught:
        Settings.of(**fields)
    return [v.field for v in caught.value.violations]


def test_environment_overrides_defaults() -> None:
    settings = Settings.from_env({"RAG_TOTAL_CONTEXT_CHUNKS": "3", "RAG_DEMO_CORPUS": "no", "RAG_DATA_DIR": "/d"})
    assert (settings.retrieval.top_k, settings.server.demo_corpus, str(settings.server.data_dir)) == (3, False, "/d")
    assert Settings.from_env({}) == Settings.of()


def test_field_names_build_the_same_settings_as_the_environment() -> None:
    by_name = Settings.of(top_k=3, demo_corpus=False, chat_model="qwen3:8b", admin_email="ops@example.com")
    by_env = Settings.from_env(
        {
            "RAG_TOTAL_CONTEXT_CHUNKS": "3",
            "RAG_DEMO_CORPUS": "false",
            "CHAT_MODEL": "qwen3:8b",
            "RAG_ADMIN_EMAIL": "ops@example.com",
        }
    )
    assert by_name == by_env
    assert by_name.trust.admin_email == "ops@example.com" and by_name.generation.chat_model == "qwen3:8b"
    with pytest.raises(TypeError, match="top_kk"):
        Settings.of(top_kk=3)


def test_replace_changes_fields_and_checks_them_again() -> None:
    settings = Settings.of(top_k=3)
    changed = settings.replace(min_similarity=0.5, grace_period_s=1.0)
    assert (changed.retrieval.top_k, changed.retrieval.min_similarity, changed.server.grace_period_s) == (3, 0.5, 1.0)
    assert settings.retrieval.min_similarity == 0.15, "the original is unchanged"
    with pytest.raises(InvalidRequest) as caught:
        settings.replace(chat_model="gpt-4o")
    assert [v.field for v in caught.value.violations] == ["CHAT_MODEL"]


def test_the_answer_fingerprint_follows_the_settings_that_shape_an_answer_and_no_others() -> None:
    base = Settings.of()
    assert base.answer_fingerprint() == Settings.of().answer_fingerprint()
    shaping = {"confidence_threshold": 0.5, "top_k": 3, "temperature": 0.7, "score_gate": 0.4}
    for name, value in shaping.items():
        assert base.replace(**{name: value}).answer_fingerprint() != base.answer_fingerprint(), name
    others = {"grace_period_s": 1.0, "grpc_address": "127.0.0.1:50999", "demo_corpus": False}
    for name, value in others.items():
        assert base.replace(**{name: value}).answer_fingerprint() == base.answer_fingerprint(), name
    keyed = base.replace(openai_api_key="sk-1")
    assert keyed.replace(openai_api_key="sk-2").answer_fingerprint() == keyed.answer_fingerprint(), "secrets are masked"


def test_a_group_can_be_built_alone_by_field_name() -> None:
    assert RetrievalSettings(min_similarity=0.3).min_similarity == 0.3
    assert GenerationSettings(chat_model="qwen3:8b").model_limits["qwen3:8b"].context_window == 32768


def test_every_bad_value_is_named() -> None:
    with pytest.raises(InvalidRequest) as caught:
        Settings.from_env({"RAG_TIMEOUT_SECONDS": "soon", "RAG_DEMO_CORPUS": "maybe", "RAG_GENERATOR": "gpt"})
    assert {v.field for v in caught.value.violations} == {"RAG_TIMEOUT_SECONDS", "RAG_DEMO_CORPUS", "RAG_GENERATOR"}


def test_a_refused_value_is_quoted_but_a_secret_never_is() -> None:
    with pytest.raises(InvalidRequest) as caught:
        Settings.from_env({"RAG_TIMEOUT_SECONDS": "soon", "RAG_API_KEYS": "s3cr3t-token"})
    described = {v.field: v.description for v in caught.value.violations}
    assert "'soon'" in described["RAG_TIMEOUT_SECONDS"]
    assert "s3cr3t" not in str(caught.value) and "s3cr3t" not in described["RAG_API_KEYS"]


@pytest.mark.parametrize("setting", [info for _, _, _, info in variables()], ids=lambda info: info.validation_alias)
def test_the_settings_page_documents_every_setting(setting) -> None:
    assert f"| `{setting.validation_alias}` |" in SETTINGS_PAGE


@pytest.mark.parametrize(
    ("environ", "field"),
    [
        ({"CHAT_MODEL": "gpt-4o"}, "CHAT_MODEL"),
        ({"FALLBACK_LLM": "mistral"}, "FALLBACK_LLM"),
        ({"RAG_MODELS": "llama3.2=8192"}, None),
        ({"RAG_MODELS": "llama3.2=big"}, "RAG_MODELS"),
        ({"RAG_MODELS": "llama3.2=1024/1024"}, "RAG_MODELS"),
        ({"RAG_DEFAULT_TEMPLATE": "rag-v9"}, "RAG_DEFAULT_TEMPLATE"),
        ({"RAG_TIMEOUT_SECONDS": "0"}, "RAG_TIMEOUT_SECONDS"),
        ({"RAG_MODEL_PRICES": "gpt=cheap"}, "RAG_MODEL_PRICES"),
        ({"RAG_GENERATOR": "ollama", "FALLBACK_LLM": "qwen3:8b", "RAG_FALLBACK_EXTRACTIVE": "yes"}, None),
    ],
)
def test_generation_settings_are_checked(environ: dict[str, str], field: str | None) -> None:
    if field is None:
        Settings.from_env(environ)
        return
    with pytest.raises(InvalidRequest) as caught:
        Settings.from_env(environ)
    assert [v.field for v in caught.value.violations] == [field]


def test_the_model_table_names_a_window_and_response_per_model() -> None:
    settings = Settings.from_env({"RAG_MODELS": "llama3.2=8192, qwen3:8b=32768/2048", "RAG_MAX_RESPONSE_TOKENS": "512"})
    limits = settings.generation.model_limits
    assert (limits["llama3.2"].context_window, limits["llama3.2"].max_response_tokens) == (8192, 512)
    assert (limits["qwen3:8b"].context_window, limits["qwen3:8b"].max_response_tokens) == (32768, 2048)


# Moved here from tests/server/test_hardening.py: these values used to be refused by Hardening.build when the
# server started; they are now refused when the settings are built.
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"max_history_messages": 51}, "RAG_MAX_HISTORY_MESSAGES"),
        ({"max_history_messages": 0}, "RAG_MAX_HISTORY_MESSAGES"),
        ({"max_concurrent_requests": 0}, "RAG_MAX_CONCURRENT_REQUESTS"),
        ({"max_receive_message_bytes": 0}, "RAG_MAX_RECEIVE_MESSAGE_BYTES"),
        ({"rate_limit_per_minute": -1}, "RAG_API_RATE_LIMIT"),
        ({"metrics_port": -5}, "RAG_METRICS_PORT"),
        ({"auth_enabled": True}, "RAG_AUTH_ENABLED"),
        ({"auth_enabled": True, "api_keys": "[]"}, "RAG_API_KEYS"),
        ({"chunk_tokens": 40, "chunk_overlap_tokens": 40}, "RAG_CHUNK_OVERLAP_TOKENS"),
        ({"grpc_address": "localhost"}, "RAG_GRPC_ADDRESS"),
        ({"default_tenant": "../x"}, "RAG_DEFAULT_TENANT"),  # a tenant id, as requests name them
        ({"max_html_depth": 0}, "RAG_INGEST_MAX_HTML_DEPTH"),
        ({"parse_seconds": 0}, "RAG_INGEST_PARSE_SECONDS"),
        ({"max_call_chunks": 0}, "RAG_INGEST_MAX_CALL_CHUNKS"),
        ({"operation_retention_days": 0}, "RAG_OPERATION_RETENTION_DAYS"),
        ({"operation_lease_s": 0.5}, "RAG_OPERATION_LEASE_SECONDS"),
        ({"operation_max_running": 0}, "RAG_OPERATION_MAX_RUNNING"),
        ({"operation_max_queued": -1}, "RAG_OPERATION_MAX_QUEUED"),
        ({"operation_wait_max_s": 0}, "RAG_OPERATION_WAIT_MAX_SECONDS"),
    ],
)
def test_bad_settings_are_refused_when_built(overrides: dict, field: str) -> None:
    assert field in refused(**overrides)


def test_api_keys_come_from_the_file_and_the_environment_together(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps({"keys": [{"name": "a", "token": "tok-a", "tenant": "acme"}]}))
    inline = json.dumps({"keys": [{"name": "b", "token": "tok-b", "tenant": "globex", "tags": ["*"]}]})
    keys = Settings.of(auth_enabled=True, api_keys_file=str(keys_file), api_keys=inline).hardening.keys
    assert keys is not None and len(keys) == 2
    assert keys.lookup("tok-a").tenant_id == "acme" and keys.lookup("tok-b").tags is None
    assert Settings.of(api_keys=inline).hardening.keys is None, "no keys are used while auth is off"


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"keys": {}}',
        '{"keys": [{"token": "a"}]}',  # no tenant
        '{"keys": [{"token": "a", "token_sha256": "00", "tenant": "t"}]}',
        '{"keys": [{"token": "a", "tenant": "t"}, {"token": "a", "tenant": "u"}]}',
        '{"keys": [{"token": "a", "tenant": "t", "tags": "finance"}]}',
        '{"keys": [{"token": "a", "tenant": "../t"}]}',  # not a tenant id
    ],
)
def test_a_bad_keys_document_names_where_it_came_from(text: str, tmp_path: Path) -> None:
    assert refused(api_keys=text) == ["RAG_API_KEYS"]
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(text)
    assert refused(api_keys_file=str(keys_file)) == ["RAG_API_KEYS_FILE"]


def test_a_missing_keys_file_is_named(tmp_path: Path) -> None:
    assert refused(auth_enabled=True, api_keys_file=str(tmp_path / "missing.json")) == ["RAG_API_KEYS_FILE"]


def test_the_owners_file_is_parsed_when_the_settings_are_built(tmp_path: Path) -> None:
    path = tmp_path / "owners.json"
    path.write_text(
        json.dumps(
            {
                "users": [{"id": "u2", "email": "hr@example.com"}],
                "tags": [{"name": "hr", "owner_user_id": "u2"}, {"name": "orphan"}],
            }
        )
    )
    owners = Settings.of(owners_file=str(path)).records.owners
    assert owners == OwnersDocument(users=(("u2", "hr@example.com"),), tags=(("hr", "u2"), ("orphan", None)))
    assert Settings.of().records.owners is None

    path.write_text("{not json")
    assert refused(owners_file=str(path)) == ["RAG_OWNERS_FILE"]
    path.write_text(json.dumps({"users": [{"id": "u2"}]}))
    assert refused(owners_file=str(path)) == ["RAG_OWNERS_FILE"]
    assert refused(owners_file=str(tmp_path / "missing.json")) == ["RAG_OWNERS_FILE"]


def test_every_refused_value_of_a_group_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest) as refused:
        Settings.of(chat_model="gpt-4o", model_prices="x", api_keys="not json", tls_key_file=str(tmp_path / "none"))
    assert {v.field for v in refused.value.violations} == {
        "CHAT_MODEL",
        "RAG_MODEL_PRICES",
        "RAG_API_KEYS",
        "RAG_TLS_CERT_FILE",
        "RAG_TLS_KEY_FILE",
    }


def test_the_cross_encoder_settings_are_checked(tmp_path: Path) -> None:
    assert Settings.from_env({"RAG_READER_CROSS_CANDIDATES": "0"}).trust.reader_cross_candidates == 0
    assert Settings.from_env({"RAG_READER_CROSS_CANDIDATES": "12"}).trust.reader_cross_candidates == 12
    for bad in ("1", "13", "-1", "six"):
        assert refused(reader_cross_candidates=bad) == ["RAG_READER_CROSS_CANDIDATES"]
    assert refused(reader_cross_model=str(tmp_path / "missing.onnx")) == ["RAG_READER_CROSS_MODEL"]
    model = tmp_path / "cross.onnx"
    model.write_bytes(b"x")
    assert Settings.of(reader_cross_model=str(model)).trust.reader_cross_model == str(model)
