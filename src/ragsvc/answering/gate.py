"""The gate: refuse before any model call when there is no evidence, or none good enough."""

from __future__ import annotations

from ragsvc.config import TrustSettings
from ragsvc.domain import RefusalReason, Retrieval


class Gate:
    def __init__(self, settings: TrustSettings) -> None:
        self._score_gate = settings.score_gate

    def refusal(self, retrieval: Retrieval) -> RefusalReason | None:
        """NO_CHUNKS when nothing visible came back, SCORE_GATE when the best evidence scores below the gate
        (or nothing passed the similarity threshold), None when generation may go ahead."""
        if retrieval.hits:
            return RefusalReason.SCORE_GATE if retrieval.hits[0].score < self._score_gate else None
        return RefusalReason.SCORE_GATE if retrieval.rejected else RefusalReason.NO_CHUNKS
