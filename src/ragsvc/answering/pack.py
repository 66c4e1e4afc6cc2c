"""The pack stage: what of the history and the evidence fits the model's window, rendered as the prompt."""

from __future__ import annotations

from collections.abc import Sequence

from ragsvc.budget import ModelCatalog, Packing
from ragsvc.domain import Question, ScoredChunk
from ragsvc.prompts import Prompt


class Packer:
    def __init__(self, models: ModelCatalog) -> None:
        self._models = models

    def pack(self, model: str, prompt: Prompt, question: Question, evidence: Sequence[ScoredChunk]) -> Packing:
        """The prompt for `model`: its window decides how much history and evidence go in (see budget.py)."""
        return self._models.budget(model).pack(prompt, question.query, question.chat_history, evidence)
