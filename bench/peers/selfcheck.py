"""Checks one peer worker against the reference: same top-k ids as exact search, identical messages to the LLM.

python -m bench.peers.selfcheck --python .bench/venvs/langchain/bin/python --module bench.peers.langchain_peer
"""

from __future__ import annotations

import argparse
import sys

from bench.peers.common import corpus, queries
from bench.peers.workers import LLMServer, Reference, Worker, job_config


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--module", required=True)
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    llm = LLMServer()
    try:
        config = job_config(args.size, llm.base_url)
        reference = Reference(config)
        worker = Worker(args.python, args.module, config)
        try:
            print("ready:", worker.ready)
            asked = queries(corpus(args.size), args.queries, seed=1)
            results = worker.ask(asked)
        finally:
            worker.close()
        log = llm.drain_log()
    finally:
        llm.close()
    failures = 0
    if len(log) != len(asked):
        print(f"FAIL: {len(log)} LLM requests for {len(asked)} queries")
        failures += 1
    for (query, tenant), result, served in zip(asked, results, log, strict=False):
        expected = reference.top_ids(query, tenant)
        if result["ids"] != expected:
            failures += 1
            print(f"FAIL ids {result['ids']} != exact {expected}")
        if served["messages_sha256"] != reference.messages_sha256(query, result["ids"]):
            failures += 1
            print(f"FAIL messages differ from the reference for ids {result['ids']}")
        if not result["answer"].endswith("[#1]."):
            failures += 1
            print(f"FAIL answer not streamed whole: {result['answer'][-40:]!r}")
    total = sorted(r["total_ms"] for r in results)
    print(f"{len(results)} queries, {failures} failures; total p50 {total[len(total) // 2]:.2f} ms; first: {results[0]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
