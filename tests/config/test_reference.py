"""The settings page (docs/settings.md) is generated from the settings: it cannot drift from them."""

from __future__ import annotations

from ragsvc.config import reference
from ragsvc.config.settings import variables


def test_the_settings_page_holds_the_generated_tables() -> None:
    text = reference.PAGE.read_text()
    assert reference.rewrite(text) == text, "docs/settings.md is stale: run `make docs`"


def test_the_table_has_a_row_per_setting_with_its_default() -> None:
    table = reference.table()
    for _, _, _, info in variables():
        assert f"| `{info.validation_alias}` | {reference.display(info.default)} | {info.description} |" in table
