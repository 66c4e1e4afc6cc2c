"""The README's configuration table is generated from the settings: it cannot drift from them."""

from __future__ import annotations

from pathlib import Path

from ragsvc.config import reference
from ragsvc.config.settings import variables

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_holds_the_generated_table() -> None:
    text = README.read_text()
    assert reference.rewrite(text) == text, "the README's configuration table is stale: run `make docs`"


def test_the_table_has_a_row_per_setting_with_its_default() -> None:
    table = reference.table()
    for _, _, _, info in variables():
        assert f"| `{info.validation_alias}` | {reference.display(info.default)} | {info.description} |" in table
