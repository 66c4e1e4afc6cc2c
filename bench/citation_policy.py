"""Which citation policy should be the default (RAG_CITATION_POLICY)? Measured with the local LLM (`make llm`:
llama.cpp and SmolLM2-135M) on the demo corpus's questions (bench/demo_questions.py).

Two `ragsvc serve` run side by side with `make serve-llm`'s settings, one per policy (RAG_CITATION_POLICY), over
one llama.cpp. Every question is asked of both, one after the other (which goes first alternates, so that
neither always finds the other's prompt in llama.cpp's prompt cache), once per round; round r asks with seed r
and the server's temperature. The same prompt and seed mostly give the same draft, not always (a prompt found in
llama.cpp's cache is computed along another path, and a 135M model's sampling follows small differences), so the
comparison is of the two policies over the same questions at the same moments, not draft by draft. A proxy
(bench/llm_timing.py) counts the LLM calls each answer took (the draft, and any strict re-run). Per policy:

- refusals, by reason (a refusal shows the refusal sentence, not the model's text);
- answers shown (grounded), of which wrong: the text does not say what the question's `expect` says (a rule, not
  a judge: see bench/demo_questions.py), and those whose invalid citations were dropped;
- latency of Ask, p50 and p95, and the LLM calls per answer (re-runs).

    python -m bench.citation_policy [--llm http://127.0.0.1:8080/v1] [--threads 1] [--rounds 3] [--questions 16]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from typing import Any

import grpc

from bench.demo_questions import QUESTIONS, DemoQuestion
from bench.llm_timing import TimingProxy, local_llm_server, props, ragsvc_server, serve_env
from bench.stats import machine, percentile, write_result
from ragsvc import local_llm
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

POLICIES = ("strict", "drop_invalid")
CALL_TIMEOUT_S = 300.0


async def ask(
    stub: rag_service_pb2_grpc.RagServiceStub, proxy: TimingProxy, question: DemoQuestion, seed: int
) -> dict[str, Any]:
    started = time.perf_counter()
    request = pb.AskRequest(query=question.query, generation=pb.GenerationOptions(seed=seed))
    row: dict[str, Any] = {"query": question.query, "seed": seed}
    try:
        answer = (await stub.Ask(request, timeout=CALL_TIMEOUT_S)).answer
    except grpc.aio.AioRpcError as exc:
        row["error"] = f"{exc.code().name}: {exc.details()}"
    else:
        grounded = answer.grounded
        row |= {
            "refusal": "" if grounded else pb.RefusalReason.Name(answer.refusal_reason),
            "shown": grounded,
            "right": grounded and question.right(answer.text),
            "citations_dropped": answer.flags.citations_dropped,
            "hallucination_detected": answer.flags.hallucination_detected,
            "text": answer.text,
        }
    row["ms"] = round((time.perf_counter() - started) * 1000, 3)
    await asyncio.sleep(0.05)  # the proxy's thread has read the last response
    row["llm_answer_calls"] = sum(call.answers for call in proxy.since(started))
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answered = [row for row in rows if "error" not in row]
    refusals: dict[str, int] = {}
    for row in answered:
        if row["refusal"]:
            refusals[row["refusal"]] = refusals.get(row["refusal"], 0) + 1
    shown = [row for row in answered if row["shown"]]
    latencies = [row["ms"] for row in answered]
    return {
        "asked": len(rows),
        "failed": len(rows) - len(answered),
        "refused": sum(refusals.values()),
        "refusals": refusals,
        "shown": len(shown),
        "shown_right": sum(row["right"] for row in shown),
        "shown_wrong": sum(not row["right"] for row in shown),
        "shown_with_citations_dropped": sum(row["citations_dropped"] for row in shown),
        "drafts_with_invalid_citations": sum(row["hallucination_detected"] for row in answered),
        "latency_ms": {"p50": percentile(latencies, 0.5), "p95": percentile(latencies, 0.95), "n": len(latencies)},
        "llm_answer_calls": {"total": sum(row["llm_answer_calls"] for row in rows),
                             "re_runs": sum(max(0, row["llm_answer_calls"] - 1) for row in rows)},
        "answers": rows,
    }


async def run_side_by_side(
    addresses: dict[str, str], proxy: TimingProxy, rounds: int, questions: tuple[DemoQuestion, ...]
) -> dict[str, list[dict[str, Any]]]:
    """Every question of every round asked of each policy's server in turn, the order alternating."""
    channels = {policy: grpc.aio.insecure_channel(address) for policy, address in addresses.items()}
    stubs = {policy: rag_service_pb2_grpc.RagServiceStub(channel) for policy, channel in channels.items()}
    rows: dict[str, list[dict[str, Any]]] = {policy: [] for policy in addresses}
    try:
        turn = 0
        for seed in range(1, rounds + 1):
            for question in questions:
                order = list(addresses) if turn % 2 == 0 else list(reversed(addresses))
                turn += 1
                for policy in order:
                    row = await ask(stubs[policy], proxy, question, seed)
                    print(f"  {policy:12} seed {seed} {row['ms']:8.0f} ms {row.get('error') or row['refusal'] or 'shown'} "
                          f"{'right' if row.get('right') else ''} {question.query}", flush=True)
                    rows[policy].append(row)
    finally:
        for channel in channels.values():
            await channel.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm", default="", help="a running `make llm` (its /v1 URL); default: start one here")
    parser.add_argument("--threads", type=int, default=local_llm.default_threads(), help="`ragsvc llm --threads`")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the questions, seed 1, 2, ...")
    parser.add_argument("--questions", type=int, default=len(QUESTIONS), help="the first this many demo questions")
    args = parser.parse_args()
    load_before = os.getloadavg()
    results: dict[str, Any] = {}
    with (
        local_llm_server(args.llm, args.threads) as root,
        TimingProxy(root) as proxy,
        contextlib.ExitStack() as servers,
    ):
        results["llm"] = {**props(root), "threads": args.threads if not args.llm else "as started"}
        addresses = {
            policy: servers.enter_context(
                ragsvc_server({**serve_env(proxy.base_url, "serve-llm"), "RAG_CITATION_POLICY": policy})
            )
            for policy in POLICIES
        }
        questions = QUESTIONS[: args.questions]
        rows = asyncio.run(run_side_by_side(addresses, proxy, args.rounds, questions))
        results["policies"] = {policy: summarise(rows[policy]) for policy in POLICIES}
    results["settings"] = {**serve_env("<proxy>", "serve-llm"), "RAG_CITATION_POLICY": "each policy in turn"}
    results["machine"] = machine(load_before)
    results["how"] = (
        f"{args.questions} demo questions x {args.rounds} seeds, each asked of both policies' `ragsvc serve` in turn "
        "(make serve-llm's settings, one llama.cpp); wrong = shown (grounded) but not matching the question's expected "
        "fact"
    )
    write_result("citation_policy", results)


if __name__ == "__main__":
    main()
