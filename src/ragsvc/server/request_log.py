"""The request id of every call, and one structured JSON log line per call (R-003-24's fields).

The request id is the caller's ``x-request-id`` (printable ASCII, at most 128 characters) or a new one; it is
returned as ``x-request-id`` initial metadata (refused calls included) and in the Answer.

The log line goes to the ``ragsvc.requests`` logger at INFO, as one JSON object::

    {"ts": "...", "request_id": "...", "method": "Ask", "status": "OK", "error_reason": "", "peer": "...",
     "key": "billing-svc", "tenant_id": "acme", "template_id": "rag-v1", "docs_retrieved": 5, "docs_used": 3,
     "similarity_distribution": {"min": 0.41, "max": 0.62, "avg": 0.52}, "model_used": "llama3.2",
     "grounded": true, "action": "cite", "refusal": "none", "confidence": 74.2, "citations": 2,
     "search": {"rewrite": "llm", "changed": true}, "stream_policy": "validated",
     "model_calls": {"condense": 1, "answer": 1, "self_score": 1},
     "latency": {"search_ms": 4.1, "build_ms": 0.3, "first_token_ms": 9.0, "inference_ms": 22.5,
                 "total_ms": 27.0, "server_ms": 28.1},
     "flags": {"cache_hit": false, "hallucination": false, "injection_suspected": false, ...},
     "injection_patterns": []}

Nothing of the query text or the answer is logged: for a follow-up, only how its search was made ("rewrite":
none, rule, llm or rule_fallback) and whether it differs from the question ("changed"), never the search itself.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from ragsvc import domain
from ragsvc.server.interceptors import CallInput, Interceptor

REQUEST_ID_KEY = "x-request-id"
REQUEST_LOGGER = "ragsvc.requests"
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")
_log = logging.getLogger(REQUEST_LOGGER)


def request_id_from(metadata_value: str | None) -> str:
    """The caller's request id when usable, else a new one."""
    if metadata_value and _REQUEST_ID.fullmatch(metadata_value):
        return metadata_value
    return uuid.uuid4().hex


class RequestIdInterceptor(Interceptor):
    @contextlib.asynccontextmanager
    async def intercept(self, call: CallInput) -> AsyncIterator[None]:
        call.state.request_id = request_id_from(call.metadata.get(REQUEST_ID_KEY))
        call.state.response_metadata.append((REQUEST_ID_KEY, call.state.request_id))
        yield


class RequestLogInterceptor(Interceptor):
    """Logs one JSON line once each call's status is sent, however it ended."""

    def __init__(self, logger: logging.Logger = _log) -> None:
        self._logger = logger

    def finished(self, call: CallInput) -> None:
        if self._logger.isEnabledFor(logging.INFO):
            self._logger.info(json.dumps(log_record(call), separators=(",", ":")))


def _ms(value: float) -> float:
    return round(value, 3)


def similarity(scores: tuple[float, ...] | list[float]) -> dict[str, float] | None:
    if not scores:
        return None
    return {"min": round(min(scores), 4), "max": round(max(scores), 4), "avg": round(sum(scores) / len(scores), 4)}


def retrieved_scores(answer: domain.Answer) -> tuple[list[float], bool]:
    """The similarity scores of the retrieved chunks, and whether they are all of them (the pipeline reports
    them in Answer.retrieval_scores); otherwise those of the evidence the answer shows (cited or packed chunks,
    or the gate's candidates)."""
    scores = list(answer.retrieval_scores)
    if scores:
        return scores, True
    if answer.explanation is not None and answer.explanation.packed:
        return [s.score for s in answer.explanation.packed], False
    if answer.citations:
        return [c.relevance_score for c in answer.citations], False
    return [s.score for s in answer.candidates], False


def search_fields(question: domain.Question | None, answer: domain.Answer) -> dict[str, Any] | None:
    """How the question's search was made, without its text: the rewrite, and whether the search differs from the
    question."""
    if answer.search is None:
        return None
    changed = question is not None and answer.search.text != question.query
    return {"rewrite": answer.search.rewrite.value, "changed": changed}


def log_record(call: CallInput) -> dict[str, Any]:
    """The log line of a finished call, as a dict."""
    state = call.state
    request = call.request
    question = state.report.question
    record: dict[str, Any] = {
        "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "request_id": state.request_id,
        "method": call.method.rsplit("/", 1)[-1],
        "status": state.code.name if state.code is not None else "UNKNOWN",
        "error_reason": state.error_reason,
        "peer": call.peer,
        "key": state.principal.name if state.principal is not None else None,
        "tenant_id": question.tenant_id if question else getattr(request, "tenant_id", "") or None,
    }
    if call.is_ask:
        asked = question.template_id if question else getattr(getattr(request, "generation", None), "template_id", "")
        record["template_id"] = asked or None
        if "AskStream" in call.method:
            policy = question.stream_policy if question else None
            record["stream_policy"] = policy.value if policy is not None else "default"
        answer = state.report.answer
        latency: dict[str, float] = {}
        if answer is not None:
            scores, complete = retrieved_scores(answer)
            timings = answer.timings
            record |= {
                "template_id": answer.template_version or record["template_id"],
                "docs_retrieved": len(scores) if complete else None,
                "docs_used": answer.context_chunks_used,
                "similarity_distribution": similarity(scores),
                "model_used": answer.model or None,
                "query_class": answer.query_class.value,
                "cost_estimate_usd": answer.cost_estimate_usd,
                "grounded": answer.grounded,
                "action": answer.action.value,
                "refusal": answer.refusal.value,
                "confidence": round(answer.confidence.overall, 2),
                "citations": len(answer.citations),
                "tokens": {"prompt": answer.usage.prompt_tokens, "completion": answer.usage.completion_tokens},
                "search": search_fields(question, answer),
                "model_calls": {u.purpose.value: u.calls for u in answer.model_usage},
            }
            latency = {
                "search_ms": _ms(timings.retrieval_ms),
                "build_ms": _ms(timings.budget_ms),
                "first_token_ms": _ms(timings.first_token_ms),
                "inference_ms": _ms(timings.generation_ms),
                "total_ms": _ms(timings.total_ms),
            }
        latency["server_ms"] = _ms(state.elapsed_ms())
        record["latency"] = latency
        flags = answer.flags if answer is not None else domain.Flags()
        record["flags"] = {
            "cache_hit": bool(state.report.cache_hit),
            "hallucination": flags.hallucination_detected,
            "mitigation_applied": flags.mitigation_applied,
            "degraded": flags.degraded,
            "injection_suspected": bool(state.report.injection_patterns) or flags.injection_suspected,
            "redactions_applied": flags.redactions_applied,
            "partial": flags.partial,
            "repetition_stopped": flags.repetition_stopped,
            "citations_dropped": flags.citations_dropped,
            "citations_attributed": flags.citations_attributed,
        }
        record["injection_patterns"] = list(state.report.injection_patterns)
    else:
        record["latency"] = {"server_ms": _ms(state.elapsed_ms())}
    return record
