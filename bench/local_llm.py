"""Which local model `make llm` should serve: each model of `ragsvc.local_llm.MODELS` answers the demo questions
through ragsvc as `make llm` + `make serve-llm` run it.

For each model: llama.cpp's server (`local_llm.start`, 2 threads, a fixed sampling seed) and a `ragsvc serve`
process with `local_llm.serve_env` (the demo corpus, its own data directory), then every question of QUESTIONS
asked once with Ask (explain on, so that a refused answer's draft comes back), one at a time. Reported per model
and per question: grounded or the refusal reason, how many `[#n]` markers the model wrote (in the answer, or in the
refused draft), the answer's text, the draft, completion tokens and the call's latency; and per model the grounded
rate, the share of answers with a marker, and latency percentiles.

`--attribution on --attribution off` runs one `ragsvc serve` per arm over the same llama.cpp server
(RAG_CITATION_ATTRIBUTION on or off) and asks each question of every arm in turn, so the arms judge drafts
written from the same prompt with the same sampling seed; each arm is reported as its own entry.

    python -m bench.local_llm [--model smollm2 --model gemma3] [--seed 42] [--chat-template chatml --label NAME]
                              [--attribution on --attribution off]

`--chat-template` replaces the models' chat template by one of llama.cpp's built-in ones (Gemma 3 270M's file
carries none: ragsvc uses llama.cpp's "gemma"). Results: bench/results/local-llm[-NAME]-<date>.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from bench.stats import machine, summary, write_result
from ragsvc import local_llm
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc as rag_grpc
from tests.support.local_server import free_port

# Questions about the demo corpus (src/ragsvc/demo_corpus), two per page, each answered by one of its sections.
QUESTIONS = (
    "What happens on SIGTERM?",
    "How is the confidence score computed?",
    "How are documents chunked?",
    "When is an answer routed to a person instead of cited?",
    "Which health names does ragsvc report?",
    "What error does a request with an empty query get?",
    "How do access tags limit what a caller sees?",
    "What are the two RPCs that return answers?",
)
MARKER = re.compile(r"\[#\d{1,3}\]")
ASK_TIMEOUT_S = 300.0


def serve(data_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "ragsvc.cli", "serve"],
        env={**os.environ, **env, "RAG_GRPC_ADDRESS": "127.0.0.1:0", "RAG_DATA_DIR": str(data_dir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not line.startswith("ragsvc serving on "):
        process.kill()
        raise RuntimeError(f"ragsvc serve did not start: {line!r}")
    return process, line.removeprefix("ragsvc serving on ").strip()


def ask(stub: rag_grpc.RagServiceStub, question: str) -> dict[str, Any]:
    """The answer's outcome, or the call's error (a model too slow for RAG_TOTAL_TIMEOUT_SECONDS: DEADLINE_EXCEEDED)."""
    started = time.perf_counter()
    try:
        answer = stub.Ask(pb.AskRequest(query=question, explain=True), timeout=ASK_TIMEOUT_S).answer
    except grpc.RpcError as exc:
        elapsed_ms = (time.perf_counter() - started) * 1000
        return {
            "question": question,
            "grounded": False,
            "outcome": exc.code().name,
            "error": exc.details(),
            "markers_written": 0,
            "completion_tokens": 0,
            "latency_ms": round(elapsed_ms, 1),
        }
    elapsed_ms = (time.perf_counter() - started) * 1000
    written = answer.text if answer.grounded else answer.explanation.draft
    return {
        "question": question,
        "grounded": answer.grounded,
        "outcome": "grounded" if answer.grounded else pb.RefusalReason.Name(answer.refusal_reason),
        "action": pb.Action.Name(answer.action),
        "confidence": round(answer.confidence.overall, 1),
        "markers_written": len(MARKER.findall(written)),
        "citations_attributed": answer.flags.citations_attributed,
        "text": answer.text,
        "draft": answer.explanation.draft,
        "completion_tokens": answer.usage.completion_tokens,
        "latency_ms": round(elapsed_ms, 1),
    }


def run_model(model: str, seed: int, arms: list[str]) -> list[dict[str, Any]]:
    """One entry per arm ("": the server's default; "on"/"off": RAG_CITATION_ATTRIBUTION), the arms asked each
    question in turn over one llama.cpp server."""
    port = free_port()
    started = time.perf_counter()
    llm = local_llm.start(model=model, port=port, threads=2, seed=seed)
    env = local_llm.serve_env("127.0.0.1", port, model)
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix=f"bench-llm-{model}-") as scratch:
        try:
            stubs = {}
            for arm in arms:
                extra = {"RAG_CITATION_ATTRIBUTION": "true" if arm == "on" else "false"} if arm else {}
                process, address = serve(Path(scratch) / (arm or "default"), {**env, **extra})
                processes.append(process)
                stubs[arm] = rag_grpc.RagServiceStub(grpc.insecure_channel(address))
            ready_s = time.perf_counter() - started
            answers: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
            for question in QUESTIONS:
                for arm in arms:
                    answers[arm].append(ask(stubs[arm], question))
                    print(f"{model}{' attribution ' + arm if arm else ''}: {answers[arm][-1]['outcome']}, "
                          f"{answers[arm][-1]['markers_written']} markers, "
                          f"{answers[arm][-1]['latency_ms'] / 1000:.1f} s: {question}", flush=True)  # fmt: skip
        finally:
            for process in processes:
                process.terminate()
                process.wait(30)
    del llm
    return [_entry(model, arm, ready_s, answers[arm]) for arm in arms]


def _entry(model: str, arm: str, ready_s: float, answers: list[dict[str, Any]]) -> dict[str, Any]:
    grounded = sum(a["grounded"] for a in answers)
    return {
        "model": model,
        "title": local_llm.MODELS[model].title,
        **({"attribution": arm} if arm else {}),
        "ready_s": round(ready_s, 1),
        "grounded": f"{grounded} of {len(answers)}",
        "grounded_rate": round(grounded / len(answers), 3),
        "answers_with_a_marker": sum(a["markers_written"] > 0 for a in answers),
        "answers_with_attributed_citations": sum(a.get("citations_attributed", False) for a in answers),
        "latency": summary([a["latency_ms"] for a in answers], (0.5, 0.9)),
        "completion_tokens_mean": round(sum(a["completion_tokens"] for a in answers) / len(answers), 1),
        "answers": answers,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", choices=sorted(local_llm.MODELS), dest="models")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--chat-template", default="", help="llama.cpp's built-in chat template to use instead")
    parser.add_argument("--label", default="", help="names the results file: local-llm-LABEL-<date>.json")
    parser.add_argument("--attribution", action="append", choices=("on", "off"), dest="arms",
                        help="an arm with RAG_CITATION_ATTRIBUTION on or off (repeat for both; default: one arm, "
                        "the server's default)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.chat_template:
        for alias, model in local_llm.MODELS.items():
            local_llm.MODELS[alias] = dataclasses.replace(model, chat_template=args.chat_template)
    load_before = os.getloadavg()
    arms = args.arms or [""]
    results = [entry for model in args.models or sorted(local_llm.MODELS) for entry in run_model(model, args.seed, arms)]
    write_result("-".join(["local-llm", *([args.label] if args.label else [])]), {
        "benchmark": "local_llm",
        "command": "python -m bench.local_llm " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(load_before),
        "seed": args.seed,
        "chat_template": args.chat_template or "the model's own",
        "settings": local_llm.serve_env(),
        "models": results,
    })  # fmt: skip


if __name__ == "__main__":
    main()
