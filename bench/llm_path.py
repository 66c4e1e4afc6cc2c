"""The LLM path with the local LLM (`make llm`: llama.cpp and SmolLM2-135M): how much time ragsvc adds to the
model's own, and whether every call completes.

For each stream policy (raw, validated) and each settings (ragsvc's defaults; `make serve-llm`'s, which turn the
side calls off), the demo questions (bench/demo_questions.py) go to a `ragsvc serve` over the demo corpus as
AskStream calls, one at a time. Between ragsvc and llama.cpp a proxy (bench/llm_timing.py) records each LLM call
and llama.cpp's own timings. Per call:

- first visible text: from the call to its first non-empty text delta (the client renders it);
- total: from the call to the final answer;
- the LLM's own first token: llama.cpp's `prompt_ms` for the answer's request (the first token is sampled when the
  prompt is processed); also the first token as the proxy saw it come back, `llm_wire_first_token`;
- ragsvc's added time: first visible text less the LLM's own first token (raw policy: what ragsvc adds before the
  first token reaches the client; validated: also the wait for the first complete cited sentence). What llama.cpp
  spends outside `prompt_ms` (tokenizing, looking up its prompt cache, sending) counts in it; so the difference
  to the first token as the proxy saw it is reported too (`added_over_wire`: ragsvc's own time before and after
  the LLM, the proxy's hop included);
- before the LLM: from the call to its answer request reaching the proxy.

llama.cpp keeps processed prompts (its prompt cache): a question asked again costs it only the new tokens
(`cache_n` in the row), so later rounds of the same questions see a shorter own first token.

A call that ends in an error counts as failed (with its status); a refusal is not a failure. The answer cache and
the rate limit are off (every call runs the whole pipeline). The first settings x policy round is the live check of
issue 29: `--check-calls` (50) calls with default settings, raw policy, no failure allowed.

    python -m bench.llm_path [--llm http://127.0.0.1:8080/v1] [--threads 1] [--calls 16] [--check-calls 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any

import grpc

from bench.demo_questions import QUESTIONS
from bench.llm_timing import LLMCall, TimingProxy, local_llm_server, props, ragsvc_server, serve_env
from bench.stats import machine, percentile, write_result
from ragsvc import local_llm
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

POLICIES = {"raw": pb.STREAM_POLICY_RAW, "validated": pb.STREAM_POLICY_VALIDATED}
SETTINGS = ("defaults", "serve-llm")
CALL_TIMEOUT_S = 300.0


@dataclass
class Call:
    """One AskStream call: its times (ms from its start) and outcome, and the LLM calls made for it."""

    query: str
    total_ms: float = 0.0
    first_text_ms: float | None = None
    error: str = ""
    refusal: str = ""
    llm_calls: tuple[LLMCall, ...] = ()
    started: float = 0.0

    @property
    def answer_call(self) -> LLMCall | None:
        return next((call for call in self.llm_calls if call.answers), None)

    def row(self) -> dict[str, Any]:
        answer = self.answer_call
        own = answer.own_first_token_ms if answer is not None else None
        wire = None
        before = None
        if answer is not None:
            before = (answer.sent_at - self.started) * 1000
            if answer.first_content_at is not None:
                wire = (answer.first_content_at - answer.sent_at) * 1000
        return {
            "query": self.query,
            "error": self.error,
            "refusal": self.refusal,
            "first_text_ms": _ms(self.first_text_ms),
            "total_ms": _ms(self.total_ms),
            "llm_own_first_token_ms": _ms(own),
            "llm_wire_first_token_ms": _ms(wire),
            "before_llm_ms": _ms(before),
            "added_ms": _ms(self.first_text_ms - own) if self.first_text_ms is not None and own is not None else None,
            "added_over_wire_ms": (
                _ms(self.first_text_ms - wire) if self.first_text_ms is not None and wire is not None else None
            ),
            "llm_calls": [{"answers": c.answers, "own_first_token_ms": c.own_first_token_ms,
                           "prompt_n": c.timings.get("prompt_n"), "cache_n": c.timings.get("cache_n"),
                           "predicted_n": c.timings.get("predicted_n")}
                          for c in self.llm_calls],
        }


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


async def ask(stub: rag_service_pb2_grpc.RagServiceStub, proxy: TimingProxy, query: str, policy: int) -> Call:
    call = Call(query, started=time.perf_counter())
    try:
        async for message in stub.AskStream(pb.AskStreamRequest(query=query, stream_policy=policy),  # type: ignore[arg-type]
                                            timeout=CALL_TIMEOUT_S):
            if message.HasField("text_delta") and message.text_delta and call.first_text_ms is None:
                call.first_text_ms = (time.perf_counter() - call.started) * 1000
            if message.HasField("answer"):
                reason = message.answer.refusal_reason
                call.refusal = "" if reason == pb.REFUSAL_REASON_NONE else pb.RefusalReason.Name(reason)
    except grpc.aio.AioRpcError as exc:
        call.error = f"{exc.code().name}: {exc.details()}"
    call.total_ms = (time.perf_counter() - call.started) * 1000
    await asyncio.sleep(0.05)  # the proxy's thread has read the last response
    call.llm_calls = tuple(proxy.since(call.started))
    return call


def summarise(calls: list[Call]) -> dict[str, Any]:
    rows = [call.row() for call in calls]

    def stat(key: str) -> dict[str, Any]:
        values = [row[key] for row in rows if row[key] is not None and not row["error"]]
        return {"p50": percentile(values, 0.5), "p95": percentile(values, 0.95), "n": len(values)}

    refusals: dict[str, int] = {}
    for call in calls:
        if call.refusal:
            refusals[call.refusal] = refusals.get(call.refusal, 0) + 1
    return {
        "calls": len(calls),
        "failed": sum(bool(call.error) for call in calls),
        "errors": sorted({call.error for call in calls if call.error}),
        "refusals": refusals,
        "without_llm_call": sum(call.answer_call is None for call in calls),
        "first_visible_text_ms": stat("first_text_ms"),
        "total_ms": stat("total_ms"),
        "llm_own_first_token_ms": stat("llm_own_first_token_ms"),
        "llm_wire_first_token_ms": stat("llm_wire_first_token_ms"),
        "before_llm_ms": stat("before_llm_ms"),
        "added_ms": stat("added_ms"),
        "added_over_wire_ms": stat("added_over_wire_ms"),
        "calls_detail": rows,
    }


async def run_round(address: str, proxy: TimingProxy, policy: str, queries: list[str]) -> list[Call]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = rag_service_pb2_grpc.RagServiceStub(channel)
        calls = []
        for number, query in enumerate(queries, start=1):
            call = await ask(stub, proxy, query, POLICIES[policy])
            print(f"  {policy} {number}/{len(queries)} {call.total_ms:8.0f} ms  {call.error or call.refusal or 'answered'}",
                  flush=True)
            calls.append(call)
        return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm", default="", help="a running `make llm` (its /v1 URL); default: start one here")
    parser.add_argument("--threads", type=int, default=local_llm.default_threads(), help="`ragsvc llm --threads`")
    parser.add_argument("--calls", type=int, default=len(QUESTIONS), help="calls per settings and policy")
    parser.add_argument("--check-calls", type=int, default=50, help="calls of the live check (defaults, raw)")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    parser.add_argument("--label", default="", help="a name for the results file (llm_path-LABEL-DATE.json)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    queries = [question.query for question in QUESTIONS]
    results: dict[str, Any] = {"rows": {}}
    with local_llm_server(args.llm, args.threads) as root, TimingProxy(root) as proxy:
        results["llm"] = {**props(root), "threads": args.threads if not args.llm else "as started", "url": root}
        for settings in args.settings:
            with ragsvc_server(serve_env(proxy.base_url, settings)) as address:
                for policy in args.policies:
                    count = args.check_calls if (settings, policy) == ("defaults", "raw") else args.calls
                    print(f"{settings} / {policy}: {count} calls", flush=True)
                    calls = asyncio.run(run_round(address, proxy, policy, [queries[i % len(queries)] for i in range(count)]))
                    results["rows"][f"{settings}/{policy}"] = summarise(calls)
    results["settings"] = {name: serve_env("<proxy>", name) for name in args.settings}
    results["machine"] = machine(load_before)
    results["how"] = (
        "AskStream calls one at a time against `ragsvc serve` (demo corpus) with the local LLM behind a timing proxy; "
        "added_ms = first visible text - llama.cpp's own prompt_ms of the answer's request"
    )
    write_result("llm_path" + (f"-{args.label}" if args.label else ""), results)


if __name__ == "__main__":
    main()
