"""ragsvc side by side with LangChain, LlamaIndex, Haystack and a hand-written baseline, doing the same job on
one machine in one run (`make bench-peers`).

    python -m bench.peers.run [--sizes 2000 10000] [--rounds 3] [--queries 200] [--warmup 20] [--seconds 4]

Per corpus size, every variant answers the same questions through the same scripted LLM: 20 warm-ups, then
`--rounds` rounds of `--queries` sequential questions, the variants interleaved in a different order each
round. Per question: end to end and time to first token at the caller, the embedder's time (the token-hashing
embedder, timed inside each variant), the store's time (each variant's own vector store call: qdrant-client's
query method for the peers, the vector engine's query call for ragsvc) and the LLM server's own times (from its
log). Orchestration overhead is total - embedding - LLM server time; first-token overhead is the caller's first
token - the server's; each is reported again without the store's time (the same-store numbers). ragsvc runs
as a server over gRPC with the peers' job (`ragsvc`: JOB_SETTINGS) and with the production defaults
(`ragsvc_defaults`, then each default feature off in turn: the ablation, left out by `--no-ablation`), all on
copies of one ingest, and in process (`ragsvc_inprocess`: its answering service without gRPC), so that the gRPC
hop is measured apart; the in-process variant's engine requests are then sent again bare to its shard (the
`raw_engine` row, which every ragsvc row's store stage is divided by). Every prompt the LLM received is
checked against the exact top-5 of the query's tenant. Then, with a delayed LLM (first token after 100 ms, 2 ms
between tokens), the first-token overhead again (without the ablation rows); then ragsvc's throughput
against the raw grpc.aio ceilings (`ceilings`) at concurrency 1, 8 and 32, and its Asks/s with RAG_WORKERS=1
and =2 against the echo ceiling in 1 and 2 processes (`throughput --scale-out`); and the CPU the machine spent
meanwhile, ours and others'. Results: bench/results/peers-<date>.json, docs/benchmarks.md, docs/peers.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from bench.peers import report
from bench.peers.common import queries, rss_mib
from bench.peers.cpu import CpuMeter
from bench.peers.ragsvc_variant import (
    DEFAULT_FEATURES,
    DEFAULTS_ENV,
    JOB_SETTINGS,
    RagsvcInProcess,
    RagsvcServer,
    copy_index,
    without,
)
from bench.peers.venvs import python_of
from bench.peers.workers import ROOT, LLMServer, Reference, Worker, job_config
from bench.stats import summary, write_result

# Each peer's worker module; its venv is .bench/venvs/<name>, from bench/peers/requirements/<name>.txt.
PEERS = {
    "baseline": "bench.peers.baseline_peer",
    "langchain": "bench.peers.langchain_peer",
    "llamaindex": "bench.peers.llamaindex_peer",
    "haystack": "bench.peers.haystack_peer",
}
VARIANTS = ("ragsvc", "ragsvc_defaults", "ragsvc_inprocess", *PEERS)
# ragsvc over gRPC, by variant: its settings on top of the job's (JOB_SETTINGS). `ragsvc` is the job's settings,
# `ragsvc_defaults` the production defaults (the features the job turns off, on), and each ablation row the
# defaults without one feature (`--ablation`).
SERVERS: dict[str, dict[str, str | None]] = {"ragsvc": {}, "ragsvc_defaults": DEFAULTS_ENV}
ABLATION = {f"ragsvc_defaults_no_{feature}": feature for feature in DEFAULT_FEATURES}
DELAYED = {"first_token_delay_ms": 100.0, "token_interval_ms": 2.0}


class Variant(Protocol):
    pid: int

    def ask(self, queries: Sequence[tuple[str, str]]) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--delayed-queries", type=int, default=40, help="questions per round with the delayed LLM")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of one throughput measurement")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument(
        "--no-ablation",
        dest="ablation",
        action="store_false",
        help="without the ablation rows of ragsvc_defaults (each default feature off in turn)",
    )
    parser.add_argument("--no-docs", action="store_true", help="write the results file only, not docs/")
    parser.add_argument("--label", default="", help="results file bench/results/peers-LABEL-<date>.json")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    pythons = {name: python_of(name) for name in args.variants if name in PEERS}
    llm = LLMServer()
    result: dict[str, Any] = {
        "benchmark": "peers",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "make bench-peers  # python -m bench.peers.run " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_at_start": os.getloadavg(),
        },
        "settings": {**vars(args), "ragsvc_job_settings": JOB_SETTINGS, "delayed_llm": DELAYED},
        "sizes": {},
    }
    try:
        for size in args.sizes:
            last = size == args.sizes[-1]
            result["sizes"][str(size)] = run_size(size, args, pythons, llm, result, throughput=last)
    finally:
        llm.close()
    result["elapsed_s"] = round(time.perf_counter() - started, 1)
    result["summary"] = report.summarize(result)
    path = write_result(f"peers-{args.label}" if args.label else "peers", result)
    print(report.acceptance_text(result["summary"]), file=sys.stderr, flush=True)
    if not args.no_docs:
        report.write_docs(result, path)


def run_size(
    size: int,
    args: argparse.Namespace,
    pythons: dict[str, str],
    llm: LLMServer,
    result: dict[str, Any],
    *,
    throughput: bool,
) -> dict[str, Any]:
    print(f"--- {size} passages", file=sys.stderr, flush=True)
    config = job_config(size, llm.base_url)
    reference = Reference(config)
    variants: dict[str, Variant] = {}
    setup: dict[str, Any] = {}
    servers = {name: env for name, env in SERVERS.items() if name in args.variants}
    if args.ablation and "ragsvc_defaults" in args.variants:
        servers |= {name: without(feature) for name, feature in ABLATION.items()}
    with tempfile.TemporaryDirectory(prefix="ragsvc-peers-") as scratch:
        index = Path(scratch) / "index"
        try:
            if servers:  # one ingest over gRPC, then every server on a copy of its data directory
                indexing = RagsvcServer(config, data_dir=index)
                try:
                    setup["ragsvc_index"] = {
                        "cold_start_s": indexing.cold_start_s,
                        "index_s": indexing.ingest(reference.passages),
                    }
                finally:
                    indexing.close()
                for name, env in servers.items():
                    copy_index(index, Path(scratch) / name)
                    server = RagsvcServer(config, data_dir=Path(scratch) / name, env=env)
                    variants[name] = server
                    setup[name] = {"start_s": server.cold_start_s}
            if "ragsvc_inprocess" in args.variants:
                in_process = RagsvcInProcess(config)
                variants["ragsvc_inprocess"] = in_process
                setup["ragsvc_inprocess"] = {"open_and_index_s": in_process.ready["index_s"]}
            for name, python in pythons.items():
                worker = Worker(python, PEERS[name], config)
                variants[name] = worker
                setup[name] = {"index_s": worker.ready["index_s"]}
                result.setdefault("versions", {})[name] = worker.ready["versions"]
            for name, variant in variants.items():
                setup[name]["rss_mib_after_index"] = rss_mib(variant.pid)
            llm.drain_log()
            out: dict[str, Any] = {"setup": setup}
            out["checks"] = check_ids(variants, reference, queries(reference.passages, 20, seed=99))
            out["rounds"] = run_rounds(variants, reference, llm, args, args.queries, seed=size)
            for name, variant in variants.items():
                setup[name]["rss_mib_after_run"] = rss_mib(variant.pid)
            if size == args.sizes[0] and args.delayed_queries:
                main_rows = {name: variant for name, variant in variants.items() if name not in ABLATION}
                llm.script(24, **DELAYED)
                try:
                    out["delayed_llm_rounds"] = run_rounds(main_rows, reference, llm, args, args.delayed_queries, seed=7)
                finally:
                    llm.script(24)
            if throughput and "ragsvc" in variants:
                out["throughput"] = measure_throughput(variants["ragsvc"], llm, size, args, index if servers else None)
            return out
        finally:
            for variant in variants.values():
                variant.close()


def measure_throughput(
    server: RagsvcServer, llm: LLMServer, size: int, args: argparse.Namespace, index: Path | None
) -> dict[str, Any]:
    """`bench.peers.throughput` in a process of its own: this one holds synchronous gRPC channels, whose
    background threads would take the GIL from an asyncio load generator. `index`: the job's ingested data
    directory, for its scale-out servers to copy instead of ingesting the corpus again."""
    command = [
        sys.executable,
        "-m",
        "bench.peers.throughput",
        str(size),
        "--rag",
        server.address,
        "--llm",
        llm.base_url,
        "--scale-out",
        "--rounds",
        str(args.rounds),
        "--seconds",
        str(args.seconds),
        "--pids",
        str(server.pid),
        str(llm.pid),
        *(["--index", str(index)] if index is not None else []),
    ]
    measured = json.loads(subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout)
    measured["ragsvc_rss_mib_after"] = rss_mib(server.pid)
    return measured


def check_ids(variants: dict[str, Variant], reference: Reference, asked: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Untimed: how many of `asked` got exactly the exact search's top-5, in order, from each variant."""
    exact = [reference.top_ids(q, t) for q, t in asked]
    checks = {}
    for name, variant in variants.items():
        if isinstance(variant, RagsvcServer | RagsvcInProcess):
            got = variant.context_ids(asked)
        else:
            got = [r["ids"] for r in variant.ask(asked)]
        checks[name] = {"same_top5_as_exact": sum(g == e for g, e in zip(got, exact, strict=True)), "of": len(asked)}
    return checks


def run_rounds(
    variants: dict[str, Variant],
    reference: Reference,
    llm: LLMServer,
    args: argparse.Namespace,
    count: int,
    seed: int,
) -> list[dict[str, Any]]:
    """`args.rounds` rounds of `count` questions, each round a new order of the variants (the first round in
    VARIANTS order, then reversed, then shuffled); warm-ups first, untimed."""
    warmup = queries(reference.passages, args.warmup, seed=seed - 1)
    for variant in variants.values():
        variant.ask(warmup)
    llm.drain_log()
    orders = [list(variants), list(reversed(variants))]
    shuffler = random.Random(seed)
    rounds = []
    for number in range(args.rounds):
        order = orders[number] if number < len(orders) else shuffler.sample(list(variants), len(variants))
        asked = queries(reference.passages, count, seed=seed * 100 + number)
        expected = [reference.messages_sha256(q, reference.top_ids(q, t)) for q, t in asked]
        measured = {}
        for name in order:
            variant = variants[name]
            meter = CpuMeter([v.pid for v in variants.values()] + [llm.pid])
            results = variant.ask(asked)
            cpu = meter.stop()
            served = llm.drain_log()
            measured[name] = per_variant(results, served, expected, cpu.as_dict())
            if isinstance(variant, RagsvcInProcess):  # the same requests, sent again to the same shard, bare
                measured[name]["raw_engine"] = raw_engine_row(variant.raw_engine(), len(asked))
        digests = {name: m.pop("digests") for name, m in measured.items()}
        for name, m in measured.items():
            m["prompts_same_as_baseline"] = sum(
                a == b for a, b in zip(digests[name], digests.get("baseline", digests[name]), strict=True)
            )
        rounds.append({"order": order, "variants": measured})
        print(
            f"round {number + 1}: " + ", ".join(f"{n} {m['overhead']['p50_ms']:.2f} ms" for n, m in measured.items()),
            file=sys.stderr,
            flush=True,
        )
    return rounds


def raw_engine_row(raw: dict[str, Any], questions: int) -> dict[str, Any]:
    """The `raw_engine` row of one round (`ragsvc_inprocess.raw_engine`): the engine's time for ragsvc's own
    requests, at ragsvc's pace (`spaced`, the one store stages are compared with) and back to back."""
    if len(raw["raw_ms"]) != questions:
        raise RuntimeError(f"{questions} questions but {len(raw['raw_ms'])} engine queries")
    return {"spaced": summary(raw["raw_ms"]), "back_to_back": summary(raw["back_to_back_ms"]),
            "points_returned": sorted(set(raw["points"]))}  # fmt: skip


def attribute(results: list[dict[str, Any]], served: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The LLM calls of each question: those the LLM server received (its log's `received_at`) between the
    question's start and its end at the caller (its `window`, on the same monotonic clock). Without the times, one
    call per question in order."""
    if not all("window" in r for r in results) or not all("received_at" in s for s in served):
        if len(served) != len(results):
            raise RuntimeError(f"{len(results)} questions but {len(served)} LLM calls")
        return [[call] for call in served]
    calls: list[list[dict[str, Any]]] = [[] for _ in results]
    for call in served:
        owner = next((i for i, r in enumerate(results) if r["window"][0] <= call["received_at"] <= r["window"][1]), None)
        if owner is None:
            raise RuntimeError(f"an LLM call ({call.get('purpose')}) outside every question's time")
        calls[owner].append(call)
    return calls


def per_variant(
    results: list[dict[str, Any]], served: list[dict[str, Any]], expected: list[str], cpu: dict[str, float]
) -> dict[str, Any]:
    """One variant's round: the overheads of the questions the LLM answered (a refusal makes no answer call; it is
    counted), and the calls besides the answer's (ragsvc's auxiliary calls: their number by purpose and the LLM
    server's time in them, which the overhead includes)."""
    calls = attribute(results, served)
    answers: list[dict[str, Any] | None] = []
    for result, mine in zip(results, calls, strict=True):
        found = [call for call in mine if call.get("purpose", "answer") == "answer"]
        if len(found) > 1 or (not found and not result.get("refused")):
            raise RuntimeError(f"{len(found)} answer calls for a question {'refused' if result.get('refused') else ''}")
        answers.append(found[0] if found else None)
    done = [i for i, answer in enumerate(answers) if answer is not None]
    pairs = [(result, answer) for result, answer in zip(results, answers, strict=True) if answer is not None]
    overhead = [r["total_ms"] - r["embed_ms"] - s["server_ms"] for r, s in pairs]
    ttft = [r["ttft_ms"] - s["first_token_ms"] for r, s in pairs]
    side = [[call for call in calls[i] if call.get("purpose", "answer") != "answer"] for i in done]
    measured: dict[str, Any] = {
        "total": summary([r["total_ms"] for r, _ in pairs]),
        "overhead": summary(overhead),
        "ttft_overhead": summary(ttft),
        "embedding": summary([r["embed_ms"] for r, _ in pairs]),
        "llm_server": summary([s["server_ms"] for _, s in pairs]),
        "prompts_as_exact_top5": sum(
            answer is not None and answer["messages_sha256"] == sha for answer, sha in zip(answers, expected, strict=True)
        ),
        "answers_whole": sum(r["answer"].endswith("[#1].") for r, _ in pairs),
        "n": len(done),
        "refused": len(results) - len(done),
        "llm_calls": dict(sorted(Counter(call.get("purpose", "answer") for mine in calls for call in mine).items())),
        "cpu": cpu,
        "digests": [answer["messages_sha256"] if answer is not None else None for answer in answers],
        **same_store(pairs),
    }
    if "messages" in results[0]:  # ragsvc: the messages of each AskStream (in process: the events, one message each)
        measured["messages"] = statistics.mean(r["messages"] for r, _ in pairs)
    if any(side):
        measured["side_calls_llm_server"] = summary([sum(c["server_ms"] or 0.0 for c in mine) for mine in side])
    if "server" in results[0]:  # ragsvc: its own stage timings split the overhead exactly
        hits = sum(r["cache_hit"] for r in results)
        measured["cache"] = {"hits": hits, "misses": len(results) - hits}
        stages = {
            # The caller's time outside the pipeline's own clock: admission, the audit record and the service
            # around the pipeline; over gRPC also the client, the transport and the interceptors.
            "outside_pipeline": [r["total_ms"] - r["server"]["total"] for r, _ in pairs],
            "retrieval_engine": [r["server"]["retrieval"] - r["server"]["embedding"] for r, _ in pairs],
            "store": [r["server"]["store"] for r, _ in pairs],  # part of retrieval_engine
            "budget_and_prompt": [r["server"]["budget"] for r, _ in pairs],
            "llm_client": [r["server"]["generation"] - s["server_ms"] for r, s in pairs],
            "validation": [r["server"]["validation"] for r, _ in pairs],
            "server_overhead": [r["server"]["total"] - r["embed_ms"] - s["server_ms"] for r, s in pairs],
        }
        stages["rest"] = [
            o
            - sum(stages[k][i] for k in ("outside_pipeline", "retrieval_engine", "budget_and_prompt", "llm_client", "validation"))
            for i, o in enumerate(overhead)
        ]
        measured["stages"] = {name: summary(values) for name, values in stages.items()}
    return measured


def same_store(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """The overheads without the variant's own store call (its `store_ms`), and that call's time and count, over
    (result, its answer call) pairs."""
    calls = sorted({r["store_calls"] for r, _ in pairs if "store_calls" in r})
    return {
        "store": summary([r["store_ms"] for r, _ in pairs]),
        "overhead_excl_store": summary([r["total_ms"] - r["embed_ms"] - r["store_ms"] - s["server_ms"] for r, s in pairs]),
        "ttft_overhead_excl_store": summary([r["ttft_ms"] - r["store_ms"] - s["first_token_ms"] for r, s in pairs]),
        **({"store_calls_per_question": calls} if calls else {}),
    }


if __name__ == "__main__":
    main()
