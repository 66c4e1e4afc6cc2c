"""The model table RAG_MODELS: each allowed model with its context window and response reserve."""

from __future__ import annotations

import pytest

from ragsvc.model_table import DEFAULT_MODELS, ModelLimits, format_model_table, parse_model_table


def test_model_table_reads_names_with_tags_and_default_response() -> None:
    table = parse_model_table("llama3.2=8192/1024, qwen3:8b=32768, gpt-4o=128000/4096", default_max_response=777)
    assert table == {
        "llama3.2": ModelLimits(8192, 1024),
        "qwen3:8b": ModelLimits(32768, 777),
        "gpt-4o": ModelLimits(128000, 4096),
    }
    assert parse_model_table(DEFAULT_MODELS, default_max_response=1) == {
        "llama3.2": ModelLimits(8192, 1024),
        "qwen3:8b": ModelLimits(32768, 2048),
        "deepseek-r1:32b": ModelLimits(65536, 4096),
    }


@pytest.mark.parametrize(
    "text", ["", "llama3.2", "llama3.2=big", "=8192/1024", "a=100/100", "a=100/0", "a=100/10,a=200/10", "a=10/x"]
)
def test_bad_model_tables_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not name=window/max_response|lists no model|listed twice|smaller than"):
        parse_model_table(text, default_max_response=1024)


def test_a_table_formats_back_to_what_parses_to_it() -> None:
    table = parse_model_table("llama3.2=8192, qwen3:8b=32768/2048", default_max_response=512)
    assert format_model_table(table) == "llama3.2=8192/512,qwen3:8b=32768/2048"
    assert parse_model_table(format_model_table(table), default_max_response=1) == table
