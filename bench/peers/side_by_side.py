"""ragsvc's variants of the peer benchmark side by side, each on a checkout's code of your choice: what a change
buys, in one run. Not part of `make bench-peers`.

    python -m bench.peers.side_by_side --passages 2000 --queries 60 --rounds 3 \\
        grpc:/tmp/main/src grpc:src inprocess:/tmp/main/src inprocess:src

A variant is KIND:SRC, SRC a src/ directory put first on the child's PYTHONPATH (`git archive main src | tar -x
-C /tmp/main` gives main's), optionally followed by settings of its own, `+NAME=VALUE` each
(`inprocess:src+RAG_AUDIT_BEFORE_ANSWER=false`). KIND: `grpc` (a server process, the caller on `CALLER_OPTIONS`),
`grpc-threaded` (the same with grpc's default channel, whose channel thread hands every message over to the
caller) or `inprocess`.
Every variant gets the same warm-up, then `--rounds` rounds of the same `--queries` questions, the variants in a
new order each round. Per variant and round, over the questions answered (one the reader refuses calls no LLM): the
p50 of the overhead and first-token overhead, with and without the store (as bench-peers computes them), of the
time outside the pipeline's clock, of the retrieval stage without embedding and store (the stage's own work around
the engine's query call), of validation, and per question the CPU time of ragsvc's process (from /proc) and of
this process (the gRPC caller; nothing for in process). Results:
bench/results/side-by-side-<label>-<date>.json, and a table on stderr.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from typing import Any

from bench.peers.common import queries
from bench.peers.cpu import process_s
from bench.peers.ragsvc_variant import CALLER_OPTIONS, RagsvcInProcess, RagsvcServer
from bench.peers.workers import LLMServer, Reference, job_config
from bench.stats import run_record, write_result

KINDS = ("grpc", "grpc-threaded", "inprocess")
MEASURES = (
    "overhead",
    "ttft_overhead",
    "overhead_excl_store",
    "ttft_overhead_excl_store",
    "outside_pipeline",
    "retrieval_excl_store",
    "validation",
    "ragsvc_cpu",
    "caller_cpu",
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variants", nargs="+", help="KIND:SRC, KIND one of " + ", ".join(KINDS))
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--label", default="run")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    llm = LLMServer()
    variants: dict[str, RagsvcServer | RagsvcInProcess] = {}
    try:
        config = job_config(args.passages, llm.base_url)
        reference = Reference(config)
        for name in args.variants:
            kind, _, spec = name.partition(":")
            src, *settings = spec.split("+")
            env = dict(setting.split("=", 1) for setting in settings)
            if kind == "inprocess":
                variants[name] = RagsvcInProcess(config, src=src, env=env)
            elif kind in ("grpc", "grpc-threaded"):
                caller = () if kind == "grpc-threaded" else CALLER_OPTIONS
                server = RagsvcServer(config, src=src, env=env, caller_options=caller)
                server.ingest(reference.passages)
                variants[name] = server
            else:
                parser.error(f"unknown kind {kind!r} in {name!r}")
        for variant in variants.values():
            variant.ask(queries(reference.passages, args.warmup, seed=1))
        llm.drain_log()
        measured: dict[str, dict[str, list[float]]] = {name: {m: [] for m in MEASURES} for name in variants}
        for number in range(args.rounds):
            asked = queries(reference.passages, args.queries, seed=100 + number)
            for name in random.Random(number).sample(list(variants), len(variants)):
                round_of(variants[name], asked, llm, measured[name])
    finally:
        for variant in variants.values():
            variant.close()
        llm.close()
    result = {
        **run_record("bench.peers.side_by_side", load_before, vars(args), argv),
        "per_round_p50_ms": measured,
        "median_over_rounds_ms": {name: {m: statistics.median(v) for m, v in ms.items()} for name, ms in measured.items()},
    }
    write_result(f"side-by-side-{args.label}", result)
    for name, ms in measured.items():
        print(f"{name}: " + ", ".join(f"{m} {statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]" for m, v in ms.items()),
              file=sys.stderr)  # fmt: skip


def round_of(
    variant: RagsvcServer | RagsvcInProcess, asked: list[tuple[str, str]], llm: LLMServer, out: dict[str, list[float]]
) -> None:
    """One round of `asked` on `variant`; appends each measure's p50 (CPU: per question) to `out`."""
    ragsvc_before, caller_before = process_s(variant.pid), time.process_time()
    results = variant.ask(asked)
    ragsvc_cpu, caller_cpu = process_s(variant.pid) - ragsvc_before, time.process_time() - caller_before
    served = llm.drain_log()
    results = [r for r in results if not r["refused"]]  # a question the reader refuses makes no LLM call
    if len(served) != len(results):
        raise RuntimeError(f"{len(results)} questions answered but {len(served)} LLM calls")
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = list(zip(results, served, strict=True))
    out["overhead"].append(statistics.median(r["total_ms"] - r["embed_ms"] - s["server_ms"] for r, s in pairs))
    out["ttft_overhead"].append(statistics.median(r["ttft_ms"] - s["first_token_ms"] for r, s in pairs))
    out["overhead_excl_store"].append(
        statistics.median(r["total_ms"] - r["embed_ms"] - r["store_ms"] - s["server_ms"] for r, s in pairs)
    )
    out["ttft_overhead_excl_store"].append(
        statistics.median(r["ttft_ms"] - r["store_ms"] - s["first_token_ms"] for r, s in pairs)
    )
    out["outside_pipeline"].append(statistics.median(r["total_ms"] - r["server"]["total"] for r, _ in pairs))
    around_store = (r["server"]["retrieval"] - r["embed_ms"] - r["store_ms"] for r in results)
    out["retrieval_excl_store"].append(statistics.median(around_store))
    out["validation"].append(statistics.median(r["server"]["validation"] for r in results))
    out["ragsvc_cpu"].append(ragsvc_cpu * 1000 / len(asked))
    out["caller_cpu"].append(0.0 if isinstance(variant, RagsvcInProcess) else caller_cpu * 1000 / len(asked))


if __name__ == "__main__":
    main()
