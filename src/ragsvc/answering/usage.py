"""Every model call made for one answer, with its purpose and usage, so that the answer's usage and cost add up:
condensing a follow-up, classification, the answer itself, strict re-runs, the self-score, follow-up questions."""

from __future__ import annotations

from dataclasses import dataclass

from ragsvc.domain import CallPurpose, ModelUsage, Usage
from ragsvc.generation.base import Generator
from ragsvc.pricing import PriceTable


@dataclass(frozen=True, slots=True)
class ModelCall:
    purpose: CallPurpose
    model: str  # as the answer names it (the generator's model_name)
    usage: Usage
    cost_estimate_usd: float


class UsageLedger:
    """The model calls of one request, in the order they reported their usage."""

    def __init__(self, prices: PriceTable) -> None:
        self._prices = prices
        self._calls: list[ModelCall] = []

    def record(self, purpose: CallPurpose, generator: Generator, model: str, usage: Usage) -> None:
        """A call of `generator` with `model` that reported `usage` (zero when it reported none)."""
        cost = self._prices.cost(model, usage)
        self._calls.append(ModelCall(purpose, generator.model_name(model), usage, cost))

    @property
    def usage(self) -> Usage:
        return sum((call.usage for call in self._calls), Usage())

    @property
    def cost_estimate_usd(self) -> float:
        return sum(call.cost_estimate_usd for call in self._calls)

    def by_purpose(self) -> tuple[ModelUsage, ...]:
        """The calls summed per purpose and model, in the order each first occurred."""
        summed: dict[tuple[CallPurpose, str], ModelUsage] = {}
        for call in self._calls:
            key = (call.purpose, call.model)
            before = summed.get(key, ModelUsage(call.purpose, call.model, 0, Usage(), 0.0))
            summed[key] = ModelUsage(
                call.purpose,
                call.model,
                before.calls + 1,
                before.usage + call.usage,
                before.cost_estimate_usd + call.cost_estimate_usd,
            )
        return tuple(summed.values())
