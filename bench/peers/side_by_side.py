"""ragsvc's variants of the peer benchmark side by side, each on a checkout's code of your choice: what a change
buys, in one run. Not part of `make bench-peers`.

    python -m bench.peers.side_by_side --passages 2000 --queries 60 --rounds 3 [--interleave] \\
        grpc:/tmp/main/src grpc:src inprocess:/tmp/main/src inprocess:src

A variant is KIND:SRC, SRC a src/ directory put first on the child's PYTHONPATH (`git archive main src | tar -x
-C /tmp/main` gives main's), optionally followed by settings of its own, `+NAME=VALUE` each
(`inprocess:src+RAG_AUDIT_BEFORE_ANSWER=false`). KIND: `grpc` (a server process, the caller on `CALLER_OPTIONS`),
`grpc-threaded` (the same with grpc's default channel, whose channel thread hands every message over to the
caller) or `inprocess`.
Every variant gets the same warm-up, then `--rounds` rounds of the same `--queries` questions, the variants in a new
order each round. Per variant and round, over the questions answered (one the reader refuses calls no LLM): the p50
of the store stage (the engine's query call), of the overhead and first-token overhead, with and without the store
(as bench-peers computes them; with the store, their p99 too), of the time outside the pipeline's clock, of the
retrieval stage without embedding and store (the stage's own work around the engine's query call), of validation,
the mean number of messages an AskStream sent (in process: of the events the answering service yielded, one message
each over gRPC), and per question the CPU time of ragsvc's process (from /proc) and of this process (the gRPC
caller; nothing for in process). With `--interleave` the variants take turns question by question instead (each
question asked of every variant, in a new order each time): the machine's load, which moves these medians by a
millisecond from one round to the next on a shared machine, then weighs on every variant alike, and the result adds,
per variant, the median over the questions of its difference from the first variant's
(`paired_median_difference_ms`): what a change of a tenth of a millisecond is measured by. The server process counts
too: the same code in two servers differs by up to ±0.4 ms, question by question (docs/profile/README.md), so give
each code two servers in a balanced order (A B B A: `+NAME=VALUE` with a default value tells two servers of one code
apart). Results:
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
from bench.stats import percentile, run_record, write_result

KINDS = ("grpc", "grpc-threaded", "inprocess")
PER_QUESTION = (
    "store",
    "overhead",
    "ttft_overhead",
    "overhead_excl_store",
    "ttft_overhead_excl_store",
    "outside_pipeline",
    "retrieval_excl_store",
    "validation",
    "messages",
)
# Measures whose p99 is kept besides their p50 (as `<measure>_p99`).
TAILS = ("overhead", "ttft_overhead")
MEASURES = (*PER_QUESTION, *(f"{m}_p99" for m in TAILS), "ragsvc_cpu", "caller_cpu")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variants", nargs="+", help="KIND:SRC, KIND one of " + ", ".join(KINDS))
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--label", default="run")
    parser.add_argument("--interleave", action="store_true", help="the variants take turns question by question")
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
        paired: dict[str, dict[str, list[float]]] = {name: {m: [] for m in PER_QUESTION} for name in variants}
        for number in range(args.rounds):
            asked = queries(reference.passages, args.queries, seed=100 + number)
            if args.interleave:
                interleaved_round(variants, asked, llm, measured, paired, random.Random(number))
                continue
            for name in random.Random(number).sample(list(variants), len(variants)):
                asked_round(variants[name], asked, llm, measured[name])
    finally:
        for variant in variants.values():
            variant.close()
        llm.close()
    result = {
        **run_record("bench.peers.side_by_side", load_before, vars(args), argv),
        "per_round_p50_ms": measured,
        "median_over_rounds_ms": {name: {m: statistics.median(v) for m, v in ms.items()} for name, ms in measured.items()},
    }
    if args.interleave:
        first = args.variants[0]
        result["paired_median_difference_ms"] = {
            name: {m: statistics.median(b - a for a, b in zip(paired[first][m], v, strict=True)) for m, v in ms.items()}
            for name, ms in paired.items()
            if name != first
        }
    write_result(f"side-by-side-{args.label}", result)
    for name, ms in measured.items():
        print(f"{name}: " + ", ".join(f"{m} {statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]" for m, v in ms.items()),
              file=sys.stderr)  # fmt: skip
    for name, ms in result.get("paired_median_difference_ms", {}).items():
        print(f"{name} - {args.variants[0]}, paired: " + ", ".join(f"{m} {v:+.3f}" for m, v in ms.items()), file=sys.stderr)


def per_question(result: dict[str, Any], served: dict[str, Any]) -> dict[str, float]:
    """PER_QUESTION's measures of one answered question (`served`: its LLM call, as the scripted LLM logged it)."""
    server, store = result["server"], result["store_ms"]
    return {
        "store": store,
        "overhead": result["total_ms"] - result["embed_ms"] - served["server_ms"],
        "ttft_overhead": result["ttft_ms"] - served["first_token_ms"],
        "overhead_excl_store": result["total_ms"] - result["embed_ms"] - store - served["server_ms"],
        "ttft_overhead_excl_store": result["ttft_ms"] - store - served["first_token_ms"],
        "outside_pipeline": result["total_ms"] - server["total"],
        "retrieval_excl_store": server["retrieval"] - result["embed_ms"] - store,
        "validation": server["validation"],
        "messages": result["messages"],
    }


def answered(results: list[dict[str, Any]], served: list[dict[str, Any]]) -> list[dict[str, float]]:
    """PER_QUESTION's measures of each question answered (one the reader refuses makes no LLM call)."""
    results = [r for r in results if not r["refused"]]
    if len(served) != len(results):
        raise RuntimeError(f"{len(results)} questions answered but {len(served)} LLM calls")
    return [per_question(r, s) for r, s in zip(results, served, strict=True)]


def append_round(
    out: dict[str, list[float]], values: list[dict[str, float]], ragsvc_cpu: float, caller_cpu: float, asked: int
) -> None:
    """Appends a round's p50 of each measure (of `messages`, the mean), the p99 of TAILS', and its CPU seconds per
    question (in ms), to `out`."""
    for measure in PER_QUESTION:
        average = statistics.mean if measure == "messages" else statistics.median
        out[measure].append(average(v[measure] for v in values))
    for measure in TAILS:
        out[f"{measure}_p99"].append(percentile([v[measure] for v in values], 0.99) or 0.0)
    out["ragsvc_cpu"].append(ragsvc_cpu * 1000 / asked)
    out["caller_cpu"].append(caller_cpu * 1000 / asked)


def asked_round(
    variant: RagsvcServer | RagsvcInProcess, asked: list[tuple[str, str]], llm: LLMServer, out: dict[str, list[float]]
) -> None:
    """One round of `asked` on `variant`; appends each measure's p50 (CPU: per question) to `out`."""
    ragsvc_before, caller_before = process_s(variant.pid), time.process_time()
    results = variant.ask(asked)
    ragsvc_cpu, caller_cpu = process_s(variant.pid) - ragsvc_before, time.process_time() - caller_before
    caller_cpu = 0.0 if isinstance(variant, RagsvcInProcess) else caller_cpu
    append_round(out, answered(results, llm.drain_log()), ragsvc_cpu, caller_cpu, len(asked))


def interleaved_round(
    variants: dict[str, RagsvcServer | RagsvcInProcess],
    asked: list[tuple[str, str]],
    llm: LLMServer,
    measured: dict[str, dict[str, list[float]]],
    paired: dict[str, dict[str, list[float]]],
    order: random.Random,
) -> None:
    """One round of `asked`, each question asked of every variant in turn (in a new order each time), so that the
    machine's load drifts alike for all; appends each variant's p50s to `measured` and, for the questions every
    variant answered, each question's measures to `paired`."""
    values: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    cpu = {name: [0.0, 0.0] for name in variants}
    for question in asked:
        answers = {}
        for name in order.sample(list(variants), len(variants)):
            variant = variants[name]
            ragsvc_before, caller_before = process_s(variant.pid), time.process_time()
            results = variant.ask([question])
            cpu[name][0] += process_s(variant.pid) - ragsvc_before
            cpu[name][1] += 0.0 if isinstance(variant, RagsvcInProcess) else time.process_time() - caller_before
            answers[name] = answered(results, llm.drain_log())
            values[name] += answers[name]
        if all(answers.values()):
            for name, (value,) in answers.items():
                for measure in PER_QUESTION:
                    paired[name][measure].append(value[measure])
    for name, (ragsvc_cpu, caller_cpu) in cpu.items():
        append_round(measured[name], values[name], ragsvc_cpu, caller_cpu, len(asked))


if __name__ == "__main__":
    main()
