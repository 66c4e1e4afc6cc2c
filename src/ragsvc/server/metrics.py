"""Prometheus metrics (R-003-25's list), recorded once each call's status is sent and served over HTTP
(RAG_METRICS_PORT). A server without the endpoint records no call (nothing could read them); the dependencies'
health is kept whatever.

| metric | labels | what |
|---|---|---|
| rag_queries_total | tenant, template, status | Ask/AskStream calls by final status code |
| rag_query_duration_seconds | tenant, template | server time per question (histogram) |
| rag_stage_duration_seconds | stage | retrieval, budget, generation, first_token, total (histogram) |
| rag_documents_retrieved | tenant | chunks retrieved per question (histogram) |
| rag_search_latency_seconds | tenant | retrieval stage time (histogram) |
| rag_model_calls_total | provider, model | generations run (cache hits and gate refusals call no model) |
| rag_model_tokens_used_total | provider, kind | prompt and completion tokens |
| rag_model_cost_estimate_total | provider | estimated US dollars of model calls (RAG_MODEL_PRICES; local models: 0) |
| rag_citations_per_response | template | citations per answer (histogram) |
| rag_confidence_score | template | overall confidence 0-100 (histogram) |
| rag_hallucinations_detected_total | tenant | answers with invalid citation markers |
| rag_repetition_stops_total | provider, model | generations stopped early because the model was looping |
| rag_cache_hits_total, rag_cache_misses_total | tenant | answer cache lookups |
| rag_grpc_requests_total | method, code | every intercepted call (Ask, AskStream, IndexService) |
| rag_requests_in_flight | | asks in flight (what the concurrency limit counts) |
| rag_event_loop_tasks | | asyncio tasks alive in the server's loop |
| rag_dependency_up | dependency | 1 while retrieval, embedder, llm or db answers its health probe (0: down, degraded) |
| process_* | | the process collector: resident memory, CPU, open fds |

Each server has its own registry, so several servers in one process (tests) do not collide. The tenant label is
the tenant a call was admitted for (a refused call counts under "-"), so a refused caller cannot mint labels;
with authentication on, tenants are bounded by the keys.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from wsgiref.simple_server import WSGIServer

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ragsvc.domain import RefusalReason
from ragsvc.server.interceptors import CallInput, Interceptor
from ragsvc.server.request_log import retrieved_scores

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_COUNTS = (0, 1, 2, 3, 5, 8, 13, 20, 40, 60)
_CONFIDENCE = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100)
_GATE_REFUSALS = (RefusalReason.NO_CHUNKS, RefusalReason.SCORE_GATE)


class Metrics:
    def __init__(self, *, provider: str) -> None:
        self.provider = provider
        self.registry = registry = CollectorRegistry()
        prometheus_client.ProcessCollector(registry=registry)
        self.queries = Counter(
            "rag_queries_total", "Questions by final status", ["tenant", "template", "status"], registry=registry
        )
        self.query_duration = Histogram(
            "rag_query_duration_seconds",
            "Server time per question",
            ["tenant", "template"],
            buckets=_SECONDS,
            registry=registry,
        )
        self.stage_duration = Histogram(
            "rag_stage_duration_seconds", "Time per pipeline stage", ["stage"], buckets=_SECONDS, registry=registry
        )
        self.documents_retrieved = Histogram(
            "rag_documents_retrieved", "Chunks retrieved per question", ["tenant"], buckets=_COUNTS, registry=registry
        )
        self.search_latency = Histogram(
            "rag_search_latency_seconds", "Retrieval time", ["tenant"], buckets=_SECONDS, registry=registry
        )
        self.model_calls = Counter("rag_model_calls_total", "Generations run", ["provider", "model"], registry=registry)
        self.model_tokens = Counter(
            "rag_model_tokens_used", "Tokens used by generations", ["provider", "kind"], registry=registry
        )
        self.model_cost = Counter(
            "rag_model_cost_estimate",
            "Estimated US dollars of the model calls made (RAG_MODEL_PRICES)",
            ["provider"],
            registry=registry,
        )
        self.citations = Histogram(
            "rag_citations_per_response", "Citations per answer", ["template"], buckets=_COUNTS, registry=registry
        )
        self.confidence = Histogram(
            "rag_confidence_score",
            "Overall confidence of answers",
            ["template"],
            buckets=_CONFIDENCE,
            registry=registry,
        )
        self.hallucinations = Counter(
            "rag_hallucinations_detected_total", "Answers with invalid citations", ["tenant"], registry=registry
        )
        self.repetition_stops = Counter(
            "rag_repetition_stops_total",
            "Generations stopped early because the model was looping",
            ["provider", "model"],
            registry=registry,
        )
        self.cache_hits = Counter("rag_cache_hits_total", "Answer cache hits", ["tenant"], registry=registry)
        self.cache_misses = Counter("rag_cache_misses_total", "Answer cache misses", ["tenant"], registry=registry)
        self.requests = Counter(
            "rag_grpc_requests_total", "Intercepted calls by final status", ["method", "code"], registry=registry
        )
        self.in_flight = Gauge("rag_requests_in_flight", "Asks in flight", registry=registry)
        self.loop_tasks = Gauge("rag_event_loop_tasks", "asyncio tasks alive in the server loop", registry=registry)
        self.dependency_up = Gauge(
            "rag_dependency_up", "1 while a dependency answers its health probe", ["dependency"], registry=registry
        )

    def watch(self, *, in_flight: Callable[[], float], loop: asyncio.AbstractEventLoop) -> None:
        """Gauges read at scrape time: asks in flight, and the tasks of `loop`."""
        self.in_flight.set_function(in_flight)
        self.loop_tasks.set_function(lambda: len(asyncio.all_tasks(loop)))

    def dependencies(self, healthy: Mapping[str, bool]) -> None:
        """The latest health probes' results (server/health.py reports each change)."""
        for name, ok in healthy.items():
            self.dependency_up.labels(name).set(1 if ok else 0)

    def record(self, call: CallInput) -> None:
        state = call.state
        code = state.code.name if state.code is not None else "UNKNOWN"
        self.requests.labels(call.method.rsplit("/", 1)[-1], code).inc()
        if not call.is_ask:
            return
        question, answer = state.report.question, state.report.answer
        # Only a tenant the call was admitted for becomes a label: a refused call's claim could be anything.
        if question is not None:
            tenant = question.tenant_id
        else:
            tenant = state.principal.tenant_id if state.principal is not None else "-"
        template = (answer.template_version if answer else "") or (question.template_id if question else "") or "-"
        self.queries.labels(tenant, template, code).inc()
        self.query_duration.labels(tenant, template).observe(state.elapsed_ms() / 1000)
        if state.report.cache_hit is not None:
            (self.cache_hits if state.report.cache_hit else self.cache_misses).labels(tenant).inc()
        if answer is None:
            return
        self.citations.labels(template).observe(len(answer.citations))
        self.confidence.labels(template).observe(answer.confidence.overall)
        if answer.flags.hallucination_detected:
            self.hallucinations.labels(tenant).inc()
        if state.report.cache_hit:
            return  # no stage ran, no model was called
        self.model_cost.labels(self.provider).inc(answer.cost_estimate_usd)
        if answer.flags.repetition_stopped:
            self.repetition_stops.labels(self.provider, answer.model or "-").inc()
        timings = answer.timings
        scores, complete = retrieved_scores(answer)
        if complete:  # known when the pipeline reports every retrieved score
            self.documents_retrieved.labels(tenant).observe(len(scores))
        self.search_latency.labels(tenant).observe(timings.retrieval_ms / 1000)
        for stage, ms in (
            ("retrieval", timings.retrieval_ms),
            ("budget", timings.budget_ms),
            ("generation", timings.generation_ms),
            ("first_token", timings.first_token_ms),
            ("total", timings.total_ms),
        ):
            if ms > 0:
                self.stage_duration.labels(stage).observe(ms / 1000)
        if answer.refusal not in _GATE_REFUSALS and (timings.generation_ms > 0 or answer.usage.completion_tokens):
            self.model_calls.labels(self.provider, answer.model or "-").inc()
            self.model_tokens.labels(self.provider, "prompt").inc(answer.usage.prompt_tokens)
            self.model_tokens.labels(self.provider, "completion").inc(answer.usage.completion_tokens)

    def serve(self, host: str, port: int) -> MetricsEndpoint:
        """Serve /metrics on host:port in a background thread."""
        server, thread = prometheus_client.start_http_server(port, addr=host, registry=self.registry)
        return MetricsEndpoint(server, thread)


class MetricsEndpoint:
    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class MetricsInterceptor(Interceptor):
    """Records each call once its status is sent."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def finished(self, call: CallInput) -> None:
        self._metrics.record(call)
