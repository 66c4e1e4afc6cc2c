from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from ragsvc.config import Settings
from ragsvc.errors import InvalidRequest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_environment_overrides_defaults() -> None:
    settings = Settings.from_env({"RAG_TOTAL_CONTEXT_CHUNKS": "3", "RAG_DEMO_CORPUS": "no", "RAG_DATA_DIR": "/d"})
    assert (settings.top_k, settings.demo_corpus, str(settings.data_dir)) == (3, False, "/d")
    assert Settings.from_env({}) == Settings()


def test_every_bad_value_is_named() -> None:
    with pytest.raises(InvalidRequest) as caught:
        Settings.from_env({"RAG_TIMEOUT_SECONDS": "soon", "RAG_DEMO_CORPUS": "maybe", "RAG_GENERATOR": "gpt"})
    assert {v.field for v in caught.value.violations} == {"RAG_TIMEOUT_SECONDS", "RAG_DEMO_CORPUS", "RAG_GENERATOR"}


@pytest.mark.parametrize("field", fields(Settings), ids=lambda f: f.name)
def test_readme_documents_every_setting(field) -> None:  # noqa: ANN001
    assert f"| `{field.metadata['env']}` |" in README


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
    limits = settings.model_limits()
    assert (limits["llama3.2"].context_window, limits["llama3.2"].max_response_tokens) == (8192, 512)
    assert (limits["qwen3:8b"].context_window, limits["qwen3:8b"].max_response_tokens) == (32768, 2048)
