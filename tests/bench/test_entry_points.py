"""Every benchmark's entry point, run as `make bench`, `make bench-peers` and `make eval` run it but on a tiny
setting, so that a broken benchmark cannot land unseen. Each writes its results file into a temporary directory
(BENCH_RESULTS_DIR), never over bench/results/, and the file says what was measured: counts that add up, the
answer cache's hits and misses apart, as each benchmark set it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.generation import ThreadedLLM

ROOT = Path(__file__).resolve().parents[2]
PAGES = Path(__file__).parent / "data" / "pgdocs"


def run(module: str, *args: str, results: Path, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env={**os.environ, "BENCH_RESULTS_DIR": str(results)},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return completed


def two_pages(tmp_path: Path) -> Path:
    """A folder holding two of the committed PostgreSQL pages."""
    pages = tmp_path / "pages"
    pages.mkdir()
    for name in ("server-shutdown.html", "auth-trust.html"):
        shutil.copy(PAGES / name, pages / name)
    return pages


def result(results: Path, name: str) -> dict[str, Any]:
    [path] = results.glob(f"{name}*.json")
    return json.loads(path.read_text())


@pytest.mark.timeout(300)
def test_ask_latency_measures_the_pipeline_and_the_cache_apart(tmp_path: Path) -> None:
    run("bench.ask_latency", "--rounds", "1", "--calls", "70", "--warmup", "2", results=tmp_path)
    phases = result(tmp_path, "ask_latency")["phases"]
    # 70 calls and more: past the default rate limit of 60 a minute, which the benchmark lifts.
    assert phases["pipeline"]["cache"] == {"setting": "RAG_CACHE_MAX_ENTRIES=0", "hits": 0, "misses": 70}
    assert phases["cache"]["cache"] == {"setting": "RAG_CACHE_MAX_ENTRIES=1000", "hits": 70, "misses": 0}
    pipeline, cache = phases["pipeline"], phases["cache"]
    assert pipeline["server_stage_p50_ms"]["retrieval"] > 0 and cache["server_stage_p50_ms"]["retrieval"] == 0
    assert pipeline["rounds"][0]["ask"]["n"] == pipeline["rounds"][0]["floor_unary"]["n"] == 70
    assert pipeline["ask_p50_ms_median_of_rounds"] > pipeline["floor_p50_ms_median_of_rounds"] > 0
    rules = phases["rules_reader"]
    assert rules["server_settings"]["RAG_READER"] == "rules" and rules["cache"]["misses"] == 70
    added = result(tmp_path, "ask_latency")["reader_added_p50_ms"]
    assert added == round(pipeline["ask_p50_ms_median_of_rounds"] - rules["ask_p50_ms_median_of_rounds"], 3)


@pytest.mark.timeout(300)
def test_generation_counts_its_calls_none_from_the_cache(tmp_path: Path) -> None:
    run(
        "bench.generation",
        "--calls",
        "6",
        "--warmup",
        "1",
        "--first-token-ms",
        "20",
        "--token-ms",
        "1",
        "--pack-repeat",
        "50",
        results=tmp_path,
    )
    measured = result(tmp_path, "generation")
    ttft = measured["time_to_first_token"]
    assert ttft["cache"] == {"setting": "RAG_CACHE_MAX_ENTRIES=0", "hits": 0, "misses": 14}, "warm-up included, raw and validated"
    assert ttft["ragsvc_minus_raw_call_by_call"]["n"] == 6
    assert measured["token_counting"]["request"]["chunks"] == 5


@pytest.mark.timeout(300)
def test_filters_measure_each_expression_against_none(tmp_path: Path) -> None:
    run("bench.filters", "--size", "500", "--queries", "12", results=tmp_path)
    measured = result(tmp_path, "filters")
    plain, *filtered = measured["query_ms"].values()
    assert len(filtered) == 3 and all(m["n"] == plain["n"] == 7 for m in filtered), "5 warm-up queries of 12"
    assert all(m["mean_results"] <= plain["mean_results"] for m in filtered), "an expression only narrows"
    assert measured["parse_and_resolve_ms"]["n"] == 6000


def test_the_llm_path_and_citation_policy_benchmarks_read_every_call(tmp_path: Path) -> None:
    """Against a scripted llama.cpp-like server (one slot; no timings of its own, so no added time either)."""
    with ThreadedLLM(
        deltas=["The overall confidence is 30 times the retrieval score [#1]."], models=("smollm2",), total_slots=1
    ) as llm:
        run("bench.llm_path", "--llm", llm.base_url, "--calls", "2", "--check-calls", "3", results=tmp_path)
        run("bench.citation_policy", "--llm", llm.base_url, "--rounds", "1", "--questions", "2", results=tmp_path)
    path = result(tmp_path, "llm_path")
    assert path["llm"]["total_slots"] == 1
    assert {name: (row["calls"], row["failed"]) for name, row in path["rows"].items()} == {
        "defaults/raw": (3, 0),
        "defaults/validated": (2, 0),
        "serve-llm/raw": (2, 0),
        "serve-llm/validated": (2, 0),
    }
    raw = path["rows"]["defaults/raw"]
    assert raw["first_visible_text_ms"]["n"] + raw["refusals"].get("REFUSAL_REASON_INSUFFICIENT_EVIDENCE", 0) == 3
    assert raw["llm_own_first_token_ms"]["n"] == 0, "the scripted server reports no timings"
    policies = result(tmp_path, "citation_policy")["policies"]
    assert {name: policy["asked"] for name, policy in policies.items()} == {"strict": 2, "drop_invalid": 2}


@pytest.mark.timeout(300)
def test_retrieval_measures_both_engines(tmp_path: Path) -> None:
    run(
        "bench.retrieval",
        "--sizes",
        "300",
        "--queries",
        "5",
        "--index-from",
        "300",
        "--recall-chunks",
        "60",
        "--local-max-chunks",
        "300",
        results=tmp_path,
    )
    measured = result(tmp_path, "retrieval")
    [size] = measured["sizes"]
    assert size["chunks"] == 300
    assert measured["real_embedding_recall"]["chunks"] == 60


@pytest.mark.timeout(300)
def test_soak_sheds_what_exceeds_the_limits_with_no_unexpected_error(tmp_path: Path) -> None:
    run("bench.soak", "--clients", "14", "--seconds", "2", "--profiles", "shed", results=tmp_path)
    [profile] = result(tmp_path, "soak")["profiles"]
    assert profile["limits"] == {"RAG_MAX_CONCURRENT_REQUESTS": "10", "RAG_API_RATE_LIMIT": "60"}
    assert profile["unexpected_errors"] == {} and profile["server_exit_code_after_sigterm"] == 0
    assert profile["cache"]["hits"] == 0 and profile["cache"]["misses"] == profile["calls_by_outcome"]["OK"] > 0


@pytest.mark.timeout(300)
def test_peers_runs_ragsvc_through_the_whole_job(tmp_path: Path) -> None:
    """The frameworks need venvs of their own (make bench-peers); ragsvc, over gRPC (with the benchmark's settings
    and with the production defaults) and in process, runs the whole job here, with the raw_engine row."""
    run("bench.peers.run", "--variants", "ragsvc", "ragsvc_defaults", "ragsvc_inprocess", "--no-ablation", "--sizes",
        "60", "--rounds", "1", "--queries", "3", "--warmup", "1", "--delayed-queries", "2", "--seconds", "0.3",
        "--no-docs", results=tmp_path)  # fmt: skip
    measured = result(tmp_path, "peers")["sizes"]["60"]
    ragsvc = measured["rounds"][0]["variants"]["ragsvc"]
    # ragsvc ranks by the fused dense + BM25 order, the reference by the dense one: its prompts may hold other
    # passages, the same over gRPC and in process.
    assert ragsvc["n"] == 3 and 0 <= ragsvc["prompts_as_exact_top5"] <= 3
    assert ragsvc["cache"] == {"hits": 0, "misses": 3} and ragsvc["llm_calls"] == {"answer": 3}
    defaults = measured["rounds"][0]["variants"]["ragsvc_defaults"]
    assert defaults["n"] + defaults["refused"] == 3 and defaults["llm_calls"]["answer"] == defaults["n"]
    assert defaults["llm_calls"]["follow_ups"] == defaults["llm_calls"]["self_score"] == defaults["n"], (
        "the defaults ask the LLM for a self-score and follow-up questions after each answer"
    )
    raw = measured["rounds"][0]["variants"]["ragsvc_inprocess"]["raw_engine"]
    assert raw["spaced"]["n"] == raw["back_to_back"]["n"] == 3 and raw["spaced"]["p50_ms"] > 0
    summary = result(tmp_path, "peers")["summary"]
    assert set(summary["sizes"]["60"]["store_against_raw_engine"]) == {"ragsvc_inprocess", "ragsvc", "ragsvc_defaults"}
    store = {c["variant"]: c for c in summary["acceptance_store"]["criteria"] if "back_to_back" in c}
    assert store["ragsvc"]["measured"] > 0 and store["ragsvc"]["met"] == (store["ragsvc"]["measured"] <= 1.5)
    # Over gRPC and in process, ragsvc retrieves the same five (by the fused order: not always the exact top 5).
    assert measured["checks"]["ragsvc"] == measured["checks"]["ragsvc_inprocess"]
    assert "throughput" in measured
    in_process = measured["rounds"][0]["variants"]["ragsvc_inprocess"]
    assert ragsvc["prompts_as_exact_top5"] == in_process["prompts_as_exact_top5"]
    assert in_process["n"] == 3
    for variant in (ragsvc, in_process):
        assert variant["store"]["p50_ms"] > 0 and variant["overhead_excl_store"]["n"] == 3
        assert variant["overhead_excl_store"]["p50_ms"] < variant["overhead"]["p50_ms"]
        # The job's answer quotes its first passage with one marker: at least a text delta, its citation, the Answer.
        assert variant["messages"] >= 3
    assert summary["sizes"]["60"]["ragsvc"]["messages_per_askstream"] == round(ragsvc["messages"], 2)
    criteria = result(tmp_path, "peers")["summary"]["acceptance"]["criteria"]
    [grpc_overhead] = [c for c in criteria if c["variant"] == "ragsvc"]
    assert grpc_overhead["measured_ms"] > 0, "the acceptance block's criteria need the peers, but for this one"


@pytest.mark.timeout(300)
def test_side_by_side_measures_every_variant_every_round(tmp_path: Path) -> None:
    variants = ["grpc:src", "grpc-threaded:src", "inprocess:src"]
    run("bench.peers.side_by_side", *variants, "--passages", "60", "--queries", "3", "--rounds", "2", "--warmup", "1",
        results=tmp_path)  # fmt: skip
    measured = result(tmp_path, "side-by-side")["per_round_p50_ms"]
    assert list(measured) == variants
    for name in variants:
        assert all(len(values) == 2 for values in measured[name].values())
        assert all(ms > 0 for ms in measured[name]["overhead_excl_store"] + measured[name]["ragsvc_cpu"])
        stages = zip(measured[name]["store"], measured[name]["overhead"], strict=True)
        assert all(0 < store < overhead for store, overhead in stages), "the store stage is part of the overhead"
        for tail in ("overhead", "ttft_overhead"):
            assert all(p99 >= p50 for p50, p99 in zip(measured[name][tail], measured[name][f"{tail}_p99"], strict=True))
    assert measured["inprocess:src"]["caller_cpu"] == [0.0, 0.0], "in process there is no gRPC caller"
    assert all(ms > 0 for ms in measured["grpc:src"]["caller_cpu"])
    assert all(count >= 3 for name in variants for count in measured[name]["messages"]), "text, citation, Answer"


@pytest.mark.timeout(300)
def test_side_by_side_interleaved_pairs_every_question_with_the_first_variant(tmp_path: Path) -> None:
    variants = ["grpc:src", "inprocess:src"]
    run("bench.peers.side_by_side", *variants, "--passages", "60", "--queries", "4", "--rounds", "1", "--warmup", "1",
        "--interleave", results=tmp_path)  # fmt: skip
    measured = result(tmp_path, "side-by-side")
    assert all(len(values) == 1 for values in measured["per_round_p50_ms"]["inprocess:src"].values())
    difference = measured["paired_median_difference_ms"]
    assert list(difference) == ["inprocess:src"], "each variant but the first, against the first"
    # In process there is no gRPC hop: less time outside the pipeline, question by question.
    assert difference["inprocess:src"]["outside_pipeline"] < 0


@pytest.mark.timeout(300)
def test_eval_asks_and_scores_on_a_few_committed_pages(tmp_path: Path) -> None:
    pages = two_pages(tmp_path)
    completed = run(
        "bench.quality.run",
        "--corpus",
        "pgdocs",
        "--pages",
        str(pages),
        "--ids",
        "a061,a062,u001",
        "--no-write",
        results=tmp_path / "results",
    )
    assert "asking 3 questions" in completed.stdout
    kept = json.loads((ROOT / ".bench" / "quality-last.json").read_text())
    assert kept["selection"]["questions"] == 3 and list(kept["corpora"]) == ["pgdocs"]
    pgdocs = kept["corpora"]["pgdocs"]
    assert len(pgdocs["outcomes"]) == 3 and pgdocs["corpus"]["pages"] == 2
    assert pgdocs["cache"] == {"setting": "RAG_CACHE_MAX_ENTRIES=0", "hits": 0, "misses": 3}
    assert pgdocs["questions_file"]["path"] == "bench/quality/corpora/pgdocs/questions.jsonl"
    assert len(pgdocs["questions_file"]["commit"]) == 40


@pytest.mark.timeout(300)
def test_ingest_counts_every_chunk_on_both_paths(tmp_path: Path) -> None:
    run("bench.ingest", "--corpus", "pgdocs", "--pages-dir", str(two_pages(tmp_path)), "--rounds", "1", results=tmp_path)
    measured = result(tmp_path, "ingest")["corpora"]["pgdocs"]
    [over_grpc], [in_process] = measured["grpc"]["rounds"], measured["in_process"]["rounds"]
    assert over_grpc["documents"] == in_process["documents"] == 2
    assert over_grpc["chunks"] == in_process["chunks"] == measured["stages"]["chunks"] > 2
    assert over_grpc["errors"] == in_process["errors"] == 0
    assert measured["in_process"]["chunks_per_s"]["median"] > 0


@pytest.mark.timeout(300)
def test_audit_erasure_erases_every_row_it_wrote(tmp_path: Path) -> None:
    run("bench.audit_erasure", "--rows", "300", "--callers", "3", results=tmp_path)
    measured = result(tmp_path, "audit_erasure")
    for backend in ("sqlite", "postgresql_fsync_off"):
        counts = {case: measured[backend][case]["rows"] for case in measured[backend]}
        assert counts == {"erase_caller": 100, "purge_text_in_batches": 200, "purge_text_one_statement": 300}, backend


@pytest.mark.timeout(300)
def test_hostile_inputs_measures_every_input_and_the_asks_during_an_ingest(tmp_path: Path) -> None:
    run("bench.hostile_inputs", "--scale", "0.002", "--latency-bytes", "3000", "--baseline-asks", "3",
        results=tmp_path)  # fmt: skip
    measured = result(tmp_path, "hostile_inputs")
    rows = {row["input"]: row for row in measured["inputs_phase"]["inputs"]}
    assert len(rows) == 13 and all(row["server_peak_rss_mb"] > 0 for row in rows.values())
    assert rows['tenant_id "../x"']["status"] == "INVALID_ARGUMENT"
    assert rows["PNG bytes as text/markdown"]["message"] == "content looks like a PNG image, not text/markdown"
    assert rows["PDF stream inflating to 64 MB"]["limit"] == "RAG_INGEST_MAX_DECOMPRESSED_BYTES"
    latency = measured["latency_phase"]
    assert latency["ask_alone"]["n"] == 3 and latency["ask_alone"]["p50_ms"] > 0
    assert latency["ingest"]["chunks"] > 0 and not latency["ingest"]["failure"]


def test_ingest_operations_measures_each_input_through_an_operation(tmp_path: Path) -> None:
    options = ["--text-mb", "0.02", "--pdf-pages", "4", "--operation-bytes", "1000", "--work", str(tmp_path / "work")]
    run("bench.ingest_operations", *options, results=tmp_path)
    runs = {r["input"]: r for r in result(tmp_path, "ingest-operations")["runs"]}
    assert runs.keys() == {"text", "pdf"} and runs["pdf"]["pages"] == 4
    for measured in runs.values():
        assert measured["state"] == "OPERATION_STATE_SUCCEEDED" and measured["operation"].startswith("operations/")
        assert measured["cli_exit_status"] == 0 and not measured["error"]
        assert measured["chunks"] > 0 and measured["chunks_progress_final"] == [measured["chunks"]] * 2
        assert measured["chunks_per_second"] > 0 and measured["operation_seconds"] > 0
        assert measured["server_peak_rss_mb"] >= measured["server_rss_serving_mb"] > 0
