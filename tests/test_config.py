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
