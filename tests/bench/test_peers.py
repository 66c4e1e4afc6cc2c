"""The peer benchmark's own parts, so that `make bench-peers` cannot rot unseen: the job is deterministic, the
baseline worker and ragsvc do it exactly (top 5 of exact search, the reference prompt), and the report reads
the results. The frameworks' workers need their own venvs and run only in `make bench-peers`."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from bench.peers import report
from bench.peers.common import HashingEmbedder, corpus, queries
from bench.peers.ragsvc_variant import RagsvcServer
from bench.peers.workers import LLMServer, Reference, Worker, job_config

SIZE = 120


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMServer]:
    server = LLMServer()
    yield server
    server.close()


def test_the_job_is_the_same_every_time() -> None:
    assert corpus(50) == corpus(50) and queries(corpus(50), 5, seed=3) == queries(corpus(50), 5, seed=3)
    assert {p.tenant for p in corpus(50)} == {"tenant-0", "tenant-1", "tenant-2", "tenant-3"}
    vector = HashingEmbedder().embed(corpus(1)[0].text)
    assert len(vector) == 384 and abs(sum(v * v for v in vector) - 1.0) < 1e-9


def _exact(llm: LLMServer, results: list[dict], asked: list[tuple[str, str]], reference: Reference) -> None:
    served = llm.drain_log()
    assert len(served) == len(asked), "one LLM call per question"
    for (query, tenant), result, call in zip(asked, results, served, strict=True):
        assert call["messages_sha256"] == reference.messages_sha256(query, reference.top_ids(query, tenant))
        assert result["answer"].endswith("[#1].") and result["ttft_ms"] <= result["total_ms"]


def test_the_baseline_worker_does_the_job_exactly(llm: LLMServer) -> None:
    config = job_config(SIZE, llm.base_url)
    reference = Reference(config)
    asked = queries(reference.passages, 8, seed=1)
    worker = Worker(sys.executable, "bench.peers.baseline_peer", config)
    try:
        llm.drain_log()
        results = worker.ask(asked)
    finally:
        worker.close()
    assert [r["ids"] for r in results] == [reference.top_ids(q, t) for q, t in asked]
    _exact(llm, results, asked, reference)


def test_ragsvc_does_the_job_exactly_and_reports_its_stages(llm: LLMServer) -> None:
    config = job_config(SIZE, llm.base_url)
    reference = Reference(config)
    asked = queries(reference.passages, 8, seed=2)
    server = RagsvcServer(config)
    try:
        server.ingest(reference.passages)
        assert server.context_ids(asked) == [reference.top_ids(q, t) for q, t in asked]
        llm.drain_log()
        results = server.ask(asked)
    finally:
        server.close()
    _exact(llm, results, asked, reference)
    for result in results:
        stages = result["server"]
        assert 0 < stages["embedding"] <= stages["retrieval"] and stages["validation"] > 0
        assert result["total_ms"] >= stages["total"] >= stages["retrieval"] + stages["budget"] + stages["generation"]


def test_the_report_takes_medians_over_rounds_and_judges_the_targets() -> None:
    def variant(p50: float) -> dict:
        quantiles = {"p50_ms": p50, "p99_ms": p50 * 2}
        measured = {"total": quantiles, "overhead": quantiles, "ttft_overhead": quantiles, "n": 10,
                    "prompts_as_exact_top5": 10, "answers_whole": 10, "cpu": {"others_cores": 0.1}}
        stages = {"server_overhead": {"p50_ms": p50 / 2, "p99_ms": p50}}
        return measured | {"stages": stages}

    rounds = [{"order": ["ragsvc"], "variants": {"ragsvc": variant(p50)}} for p50 in (3.0, 1.0, 2.0)]
    summary = report.summarize({"sizes": {"100": {"rounds": rounds}}})
    row = summary["sizes"]["100"]["ragsvc"]
    assert row["overhead_p50_ms"] == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert row["stages_p50_ms"]["server_overhead"] == 1.0
    targets = {t["target"]: t["met"] for t in summary["targets"]}
    assert targets["server overhead p50 ≤ 2 ms"] and not targets["first-token overhead p50 ≤ 1 ms"]
