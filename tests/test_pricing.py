from __future__ import annotations

import pytest

from ragsvc.config import Settings
from ragsvc.domain import Usage
from ragsvc.errors import InvalidRequest
from ragsvc.pricing import PriceTable

BAD_SPECS = ["gpt", "gpt=1", "gpt=a/b", "=1/2", "gpt=-1/2"]


def test_cost_of_a_priced_model() -> None:
    table = PriceTable.parse("gpt-4o=2.5/10, gpt-4o-mini=0.15/0.6")
    assert table.cost("gpt-4o", Usage(prompt_tokens=1000, completion_tokens=200)) == pytest.approx(0.0045)
    assert table.cost("gpt-4o-mini", Usage(1_000_000, 0)) == pytest.approx(0.15)


def test_local_models_cost_nothing() -> None:
    assert PriceTable.parse("").cost("llama3.2", Usage(5000, 500)) == 0.0


@pytest.mark.parametrize("spec", BAD_SPECS)
def test_bad_specs_are_refused_naming_the_entry(spec: str) -> None:
    with pytest.raises(ValueError, match="is not model=prompt/completion") as caught:
        PriceTable.parse(spec)
    assert repr(spec) in str(caught.value)


@pytest.mark.parametrize("spec", BAD_SPECS)
def test_bad_specs_name_the_setting(spec: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        Settings.of(model_prices=spec)
    assert [v.field for v in caught.value.violations] == ["RAG_MODEL_PRICES"]
    assert Settings.of(model_prices="gpt-4o=2.5/10").generation.prices == PriceTable.parse("gpt-4o=2.5/10")
