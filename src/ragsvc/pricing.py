"""Per-answer cost estimates from a per-model price table (R-003-13's `cost_estimate`, R-003-27)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ragsvc.domain import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    prompt_per_million: float
    completion_per_million: float


class PriceTable:
    """Prices by model; a model without a price (a local one: Ollama, llama.cpp, extractive) costs nothing."""

    def __init__(self, prices: Mapping[str, Price]) -> None:
        self._prices = dict(prices)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PriceTable) and other._prices == self._prices

    def __hash__(self) -> int:
        return hash(frozenset(self._prices.items()))

    @classmethod
    def parse(cls, spec: str) -> PriceTable:
        """`model=prompt/completion,...` in dollars per million tokens, e.g. "gpt-4o=2.5/10,gpt-4o-mini=0.15/0.6";
        ValueError naming the first bad entry."""
        prices: dict[str, Price] = {}
        for entry in filter(None, (part.strip() for part in spec.split(","))):
            model, _, rates = entry.rpartition("=")
            prompt, _, completion = rates.partition("/")
            try:
                price = Price(float(prompt), float(completion))
            except ValueError:
                price = None
            if not model or price is None or price.prompt_per_million < 0 or price.completion_per_million < 0:
                raise ValueError(f"{entry!r} is not model=prompt/completion (USD per 1M tokens)")
            prices[model] = price
        return cls(prices)

    def cost(self, model: str, usage: Usage) -> float:
        """The estimated cost in US dollars of `usage` on `model`."""
        price = self._prices.get(model)
        if price is None:
            return 0.0
        return (usage.prompt_tokens * price.prompt_per_million + usage.completion_tokens * price.completion_per_million) / 1e6
