"""The answer-quality benchmark: `make eval`, or

    python -m bench.quality.run [--split dev|heldout|all] [--limit N] [--slice] [--ids a001,u002]
                                [--followups history|session] [--llm none|openai|local] [--fresh] [--no-write]
                                [--questions FILE]

Starts a real `ragsvc serve` (temporary RAG_DATA_DIR, no demo corpus, no rate limit, no answer cache), ingests
the corpus over IndexService (or reuses the index ingested by an earlier run of the same corpus and ingestion
code), asks every question over gRPC `Ask` with explain=true, one at a time, and scores the answers (metrics.py).
Writes bench/results/quality-DATE.json (quality-<llm>-DATE.json with an LLM) and, for full extractive runs,
docs/quality.md and docs/quality.png.

Follow-ups: the earlier user turns are asked first; then the follow-up is sent with those turns and their answers
as chat_history (`--followups history`, the default) or in the same session_id (`--followups session`).

`--questions bench/quality/tuning_followups.jsonl` asks a tuning set instead: conversations written for tuning
follow-ups on, outside the benchmark and its splits (see bench/quality/README.md).

LLM runs (`--llm openai`): EVAL_OPENAI_BASE_URL, EVAL_CHAT_MODEL, EVAL_RAG_MODELS (default
"<model>=8192/512") and EVAL_OPENAI_API_KEY become the server's OPENAI_BASE_URL, CHAT_MODEL, RAG_MODELS and
OPENAI_API_KEY, with RAG_GENERATOR=openai. `--llm local` starts llama.cpp with SmolLM2-135M (the test suite's
model, tests/support/llama_server.py): slow (about 2 s a question) and a weak model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc

from bench.quality import corpus, metrics, questions
from bench.quality.corpus import ROOT
from bench.quality.server import TENANT, ServerProcess, base_env, prepared_data_dir
from bench.stats import RESULTS
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

SLICE = Path(__file__).resolve().parent / "slice.txt"
ASK_TIMEOUT_S = 120.0


def llm_env(mode: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The server environment of an LLM run, and what to report about it."""
    if mode == "none":
        return {"RAG_GENERATOR": "extractive"}, {"generator": "extractive"}
    if mode == "openai":
        base_url = os.environ.get("EVAL_OPENAI_BASE_URL")
        model = os.environ.get("EVAL_CHAT_MODEL")
        if not base_url or not model:
            raise SystemExit("--llm openai needs EVAL_OPENAI_BASE_URL and EVAL_CHAT_MODEL")
        env = {
            "RAG_GENERATOR": "openai",
            "OPENAI_BASE_URL": base_url,
            "CHAT_MODEL": model,
            "RAG_MODELS": os.environ.get("EVAL_RAG_MODELS", f"{model}=8192/512"),
        }
        if os.environ.get("EVAL_OPENAI_API_KEY"):
            env["OPENAI_API_KEY"] = os.environ["EVAL_OPENAI_API_KEY"]
        return env, {"generator": "openai", "model": model, "base_url": base_url}
    raise SystemExit(f"unknown --llm {mode}")


class LocalLlama:
    """llama.cpp (xllamacpp) with SmolLM2-135M, as the test suite runs it, in a child process."""

    def __init__(self) -> None:
        from tests.support.llama_server import MODEL_ALIAS, _free_port

        self.port = _free_port()
        self.alias = MODEL_ALIAS
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.llama_server", str(self.port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import httpx

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.close()
        raise SystemExit("the local llama.cpp server did not start")

    def env(self) -> dict[str, str]:
        return {
            "RAG_GENERATOR": "openai",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{self.port}/v1",
            "CHAT_MODEL": self.alias,
            "RAG_MODELS": f"{self.alias}=2048/128",
            "RAG_MAX_CONTEXT_TOKENS": "700",
            # A 135M model on 2 shared cores: a prompt of a few hundred tokens can take tens of seconds.
            "RAG_TIMEOUT_SECONDS": "300",
            "RAG_TOTAL_TIMEOUT_SECONDS": "300",
            "RAG_LLM_SELF_SCORE": "false",
            "RAG_DEFAULT_FOLLOW_UP_COUNT": "0",
        }

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def select(all_questions: list[questions.Question], args: argparse.Namespace) -> list[questions.Question]:
    chosen = all_questions
    if args.slice:
        ids = [line.split("#")[0].strip() for line in SLICE.read_text().splitlines()]
        wanted = [i for i in ids if i]
        by_id = {q.id: q for q in all_questions}
        chosen = [by_id[i] for i in wanted]
    if args.ids:
        wanted_ids = set(args.ids.split(","))
        chosen = [q for q in chosen if q.id in wanted_ids]
    if args.split != "all":
        chosen = [q for q in chosen if q.split == args.split]
    if args.limit:
        chosen = chosen[: args.limit]
    return chosen


def _request(query: str, history: list[tuple[pb.Role, str]], session_id: str) -> pb.AskRequest:
    return pb.AskRequest(
        query=query,
        tenant_id=TENANT,
        explain=True,
        session_id=session_id,
        chat_history=[pb.ChatMessage(role=role, content=content) for role, content in history],
    )


async def ask_one(
    stub: rag_service_pb2_grpc.RagServiceStub, question: questions.Question, followups: str
) -> dict[str, Any]:
    """Asks one question (its earlier turns first) and scores the answer."""
    session_id = str(uuid.uuid4()) if followups == "session" and question.history else ""
    history: list[tuple[pb.Role, str]] = []
    earlier = []
    for turn in question.history:
        started = time.perf_counter()
        previous = (await stub.Ask(_request(turn, [] if session_id else history, session_id), timeout=ASK_TIMEOUT_S)).answer
        earlier.append({"question": turn, "grounded": previous.grounded, "answer": previous.text,
                        "latency_ms": round((time.perf_counter() - started) * 1000, 2)})
        history += [(pb.ROLE_USER, turn), (pb.ROLE_ASSISTANT, previous.text or "(no answer)")]
    started = time.perf_counter()
    request = _request(question.question, [] if session_id else history, session_id)
    answer = (await stub.Ask(request, timeout=ASK_TIMEOUT_S)).answer
    latency_ms = (time.perf_counter() - started) * 1000
    ranked = answer.explanation.packed_chunks if len(answer.explanation.packed_chunks) else answer.candidates
    ranked_documents = [c.document_id for c in ranked]
    right = metrics.is_right(question, answer.grounded, answer.text) if question.should_answer else False
    return {
        "id": question.id,
        "split": question.split,
        "kind": question.kind,
        "style": question.style,
        "near_topic": question.near_topic,
        "question": question.question,
        "history": list(question.history),
        "earlier_turns": earlier,
        "expected_documents": list(question.expected_documents),
        "key_facts": list(question.key_facts),
        "grounded": answer.grounded,
        "refusal_reason": pb.RefusalReason.Name(answer.refusal_reason),
        "action": pb.Action.Name(answer.action),
        "confidence": round(answer.confidence.overall, 3),
        "confidence_parts": {
            "retrieval": round(answer.confidence.retrieval, 4),
            "coverage": round(answer.confidence.coverage, 4),
            "llm": round(answer.confidence.llm, 4),
        },
        "answer": answer.text,
        "model": answer.model,
        "citations": [
            {
                "document_id": c.document_id,
                "chunk_index": c.chunk_index,
                "section": c.section,
                "relevance": round(c.relevance_score, 4),
                "has_key_fact": any(questions.contains(c.text, f) for f in question.key_facts),
            }
            for c in answer.citations
        ],
        # Whether the answer could have been right: a packed chunk holds a key fact (else retrieval missed it).
        "key_fact_packed": any(
            questions.contains(c.text, f) for c in answer.explanation.packed_chunks for f in question.key_facts
        ),
        "ranked_list": "packed_chunks" if len(answer.explanation.packed_chunks) else "candidates",
        "ranked_documents": ranked_documents,
        "ranked_relevance": [round(c.relevance_score, 4) for c in ranked],
        "rank": metrics.first_rank(ranked_documents, question.expected_documents) if question.expected_documents else None,
        "right": right,
        "safe": metrics.is_safe(question, answer.text),
        "injection_suspected": answer.flags.injection_suspected,
        "cache_hit": answer.flags.cache_hit,
        "latency_ms": round(latency_ms, 2),
        "server_total_ms": round(answer.timings.total.ToNanoseconds() / 1e6, 2),
    }


def failed_outcome(question: questions.Question, error: grpc.aio.AioRpcError) -> dict[str, Any]:
    """An Ask that ended in an error status: not grounded, not right, refusal reason ERROR_<code>."""
    return {
        "id": question.id, "split": question.split, "kind": question.kind, "style": question.style,
        "near_topic": question.near_topic, "question": question.question, "history": list(question.history),
        "earlier_turns": [], "expected_documents": list(question.expected_documents),
        "key_facts": list(question.key_facts), "grounded": False,
        "refusal_reason": f"ERROR_{error.code().name}", "action": "ERROR", "confidence": 0.0,
        "confidence_parts": {}, "answer": "", "model": "", "citations": [], "ranked_list": "none",
        "ranked_documents": [], "ranked_relevance": [], "rank": None, "right": False, "safe": True,
        "injection_suspected": False, "latency_ms": None, "server_total_ms": None,
        "error": f"{error.code().name}: {error.details()}",
    }


def git_commit() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True, text=True)
        return commit + ("+dirty-src" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


async def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    if args.pages:  # a directory of pages instead of the package (the smoke test's few committed pages)
        pages = corpus.load_pages(args.pages, sorted(p.name for p in args.pages.glob("*.html")))
    else:
        pages = corpus.load_pages(corpus.fetch())
    all_questions = questions.load(args.questions)
    chosen = select(all_questions, args)
    local = LocalLlama() if args.llm == "local" else None
    try:
        if local is not None:
            env_extra, generator = local.env(), {"generator": "openai", "model": "smollm2-135m (local llama.cpp)"}
        else:
            env_extra, generator = llm_env(args.llm)
        run_dir, manifest = await prepared_data_dir(pages, {}, fresh=args.fresh)
        log = ROOT / ".bench" / "quality-server.log"
        try:
            with ServerProcess(base_env(run_dir / "data", env_extra), log=log) as server:
                print(f"server up in {server.start_s:.1f} s at {server.address}; asking {len(chosen)} questions", flush=True)
                outcomes = []
                asking = time.perf_counter()
                async with grpc.aio.insecure_channel(server.address) as channel:
                    stub = rag_service_pb2_grpc.RagServiceStub(channel)
                    # Warm-up (not scored): the first call pays for lazy initialisation.
                    try:
                        await stub.Ask(_request("warm-up question about the server", [], ""), timeout=ASK_TIMEOUT_S)
                    except grpc.aio.AioRpcError as exc:
                        print(f"warm-up failed: {exc.code().name} {exc.details()}", flush=True)
                    for i, question in enumerate(chosen, start=1):
                        try:
                            outcomes.append(await ask_one(stub, question, args.followups))
                        except grpc.aio.AioRpcError as exc:  # counted as a failure to answer, never skipped
                            outcomes.append(failed_outcome(question, exc))
                        if i % 20 == 0 or i == len(chosen):
                            print(f"\r  asked {i}/{len(chosen)}", end="", flush=True)
                print()
                asking_s = time.perf_counter() - asking
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        if local:
            local.close()
    splits = {s: [o for o in outcomes if o["split"] == s] for s in questions.SPLITS}
    result: dict[str, Any] = {
        "benchmark": "quality",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "generator": generator,
        "selection": {"split": args.split, "limit": args.limit, "slice": args.slice, "ids": args.ids,
                      "followups": args.followups, "questions": len(chosen),
                      "questions_file": str(args.questions.resolve().relative_to(ROOT))},
        "corpus": {
            "package": corpus.PACKAGE,
            "version": corpus.VERSION,
            "deb_sha256": corpus.SHA256,
            "license": corpus.LICENSE,
            "subset": "Part I (Tutorial) and Part III (Server Administration): pages whose Up links reach "
            "tutorial.html or admin.html (bench/quality/corpus_pages.txt)",
            "pages": len(pages) - 1,
            "planted_documents": [p.document_id for p in pages if p.planted],
            "corpus_sha256": corpus.corpus_hash(pages),
            "chunks": manifest["chunks"],
            "documents_with_text": manifest["documents_with_text"],
            "documents_without_text": sorted(d for d, r in manifest["documents"].items() if not r["chunks"]),
            "index_key": manifest["key"],
        },
        "questions": questions.summary(chosen),
        "settings": {
            "server_env": {
                k: v
                for k, v in base_env(Path("<tmp>"), env_extra).items()
                if k.startswith(("RAG_", "CHAT_", "OPENAI_BASE"))
            },
            "tenant": TENANT,
            "ranked_list": "answer.explanation.packed_chunks (marker order); answer.candidates when the gate refused",
            "right": "grounded and the answer text contains a key fact (normalised: case, punctuation, whitespace; "
            "whole words)",
        },
        "cache": {"setting": "RAG_CACHE_MAX_ENTRIES=0", "hits": sum(bool(o.get("cache_hit")) for o in outcomes),
                  "misses": sum(not o.get("cache_hit") for o in outcomes)},
        "timings": {
            "ingest_s": None if manifest.get("reused") else manifest["ingest_s"],
            "ingest_s_when_built": manifest["ingest_s"],
            "index_reused": manifest["reused"],
            "asking_s": round(asking_s, 1),
            "total_s": round(time.perf_counter() - started, 1),
        },
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "metrics": {
            "all": metrics.split_metrics(outcomes),
            **{s: metrics.split_metrics(o) for s, o in splits.items() if o},
        },
        "by_style": {s: metrics.by_style(o) for s, o in splits.items() if o},
        "reliability": metrics.reliability(outcomes),
        "outcomes": outcomes,
    }
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "heldout", "all"), default="all")
    parser.add_argument("--limit", type=int, default=0, help="ask only the first N selected questions")
    parser.add_argument("--slice", action="store_true", help="only the regression slice (bench/quality/slice.txt)")
    parser.add_argument("--ids", default="", help="comma-separated question ids")
    parser.add_argument("--followups", choices=("history", "session"), default="history")
    parser.add_argument("--llm", choices=("none", "openai", "local"), default="none")
    parser.add_argument("--fresh", action="store_true", help="ingest again even when a matching index is cached")
    parser.add_argument("--no-write", action="store_true", help="print the metrics; write no files")
    parser.add_argument("--pages", type=Path, help="ingest the .html pages of this directory, not the fetched package")
    parser.add_argument("--questions", type=Path, default=questions.QUESTIONS,
                        help="ask the questions of this file (e.g. bench/quality/tuning_followups.jsonl), not the benchmark's")
    args = parser.parse_args(argv)
    result = asyncio.run(evaluate(args))
    from bench.quality import report

    print(report.console_summary(result))
    if args.no_write:
        scratch = ROOT / ".bench" / "quality-last.json"
        scratch.parent.mkdir(exist_ok=True)
        scratch.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        print(f"results of this run kept in {scratch.relative_to(ROOT)} only")
        return
    name = "quality" if args.llm == "none" else f"quality-{args.llm}"
    if args.split != "all" or args.limit or args.slice or args.ids or args.questions != questions.QUESTIONS:
        name += "-partial"
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}-{datetime.now(UTC):%Y-%m-%d}.json"
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"written to {out.relative_to(ROOT)}")
    if name == "quality":
        written = report.write_docs(result, out)
        print("written to " + ", ".join(str(p.relative_to(ROOT)) for p in written))


if __name__ == "__main__":
    main()
