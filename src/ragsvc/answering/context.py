"""What the transport hands the answering service about one call, explicitly, and what it reads back."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragsvc.access import Principal, key_caller, peer_caller
from ragsvc.domain import Answer, Question


@dataclass(slots=True)
class AnswerReport:
    """What the answering service reports about one call, for the transport's request log, metrics and traces."""

    question: Question | None = None  # the question as answered (tenant and tags applied)
    answer: Answer | None = None  # the final answer, when there is one
    cache_hit: bool | None = None  # None: no cache or replay store was consulted
    injection_patterns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CallContext:
    """One call as the answering service sees it. `deadline` is the caller's, on the event loop's clock (None:
    it set none); `principal` is the authenticated key (None: authentication is off); `peer` is who the transport
    says called (its client certificate's identity, else its address without the port)."""

    request_id: str
    principal: Principal | None = None
    deadline: float | None = None
    report: AnswerReport = field(default_factory=AnswerReport)
    peer: str = ""

    @property
    def caller(self) -> str:
        """Who made the call, as stored state (replays, sessions) is bound to it: the key, else the peer."""
        if self.principal is not None:
            return key_caller(self.principal.tenant_id, self.principal.name)
        return peer_caller(self.peer)
