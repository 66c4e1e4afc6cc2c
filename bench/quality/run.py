"""The answer-quality benchmark: `make eval`, or

    python -m bench.quality.run [--corpus NAME ...] [--split dev|heldout|all] [--limit N] [--slice] [--ids a001,u002]
                                [--followups history|session] [--llm none|openai|local] [--fresh] [--no-write]
                                [--folds DIR | --no-folds] [--questions FILE] [--pages DIR]

For each corpus (every one in bench/quality/corpus.py's registry, or those named by --corpus): fetches its package
(corpus.fetch), starts a real `ragsvc serve` (temporary RAG_DATA_DIR, no demo corpus, no rate limit, no answer
cache), ingests the corpus into its tenant over IndexService (or reuses the index ingested by an earlier run of the
same corpus and ingestion code), asks every question over gRPC `Ask` with explain=true, one at a time, and scores
the answers (metrics.py). One server per corpus. Writes bench/results/quality-DATE.json (quality-<llm>-DATE.json
with an LLM) with every corpus in it and, for full extractive runs, docs/quality.md and its risk-coverage plots.

Reader models (leave-one-corpus-out): when bench/quality/folds/without-<corpus>.npz exists (`make train-reader`
writes it: a model trained on every other corpus), that corpus's server gets RAG_READER_MODEL=<its path>, and
RAG_READER_CROSS_MODEL=<the fold cross-encoder that never saw the corpus> (bench/quality/crossfolds.py);
`--folds DIR` looks in DIR instead, `--no-folds` leaves the server's default reader. The results name the model file
(path and sha256) and cross-encoder that served each corpus.

Follow-ups: the earlier user turns are asked first; then the follow-up is sent with those turns and their answers
as chat_history (`--followups history`, the default) or in the same session_id (`--followups session`).

`--corpus pgdocs --questions bench/quality/corpora/pgdocs/tuning_followups.jsonl` asks a tuning set instead:
conversations written for tuning follow-ups on, outside the benchmark and its splits (see bench/quality/README.md).

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

from bench.quality import corpus, crossfolds, metrics, questions
from bench.quality.corpus import ROOT
from bench.quality.debian import FetchError, sha256_of
from bench.quality.server import ServerProcess, base_env, prepared_data_dir
from bench.stats import RESULTS
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

FOLDS = Path(__file__).resolve().parent / "folds"
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


def select(all_questions: list[questions.Question], spec: corpus.Corpus, args: argparse.Namespace) -> list[questions.Question]:
    chosen = all_questions
    if args.slice:
        ids = [line.split("#")[0].strip() for line in spec.slice_file.read_text().splitlines()]
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


def _request(query: str, history: list[tuple[pb.Role, str]], session_id: str, tenant: str) -> pb.AskRequest:
    return pb.AskRequest(
        query=query,
        tenant_id=tenant,
        explain=True,
        session_id=session_id,
        chat_history=[pb.ChatMessage(role=role, content=content) for role, content in history],
    )


async def ask_one(
    stub: rag_service_pb2_grpc.RagServiceStub, question: questions.Question, followups: str, tenant: str
) -> dict[str, Any]:
    """Asks one question (its earlier turns first) and scores the answer."""
    session_id = str(uuid.uuid4()) if followups == "session" and question.history else ""
    history: list[tuple[pb.Role, str]] = []
    earlier = []
    for turn in question.history:
        started = time.perf_counter()
        request = _request(turn, [] if session_id else history, session_id, tenant)
        previous = (await stub.Ask(request, timeout=ASK_TIMEOUT_S)).answer
        earlier.append(
            {
                "question": turn,
                "grounded": previous.grounded,
                "answer": previous.text,
                "latency_ms": round((time.perf_counter() - started) * 1000, 2),
            }
        )
        history += [(pb.ROLE_USER, turn), (pb.ROLE_ASSISTANT, previous.text or "(no answer)")]
    started = time.perf_counter()
    request = _request(question.question, [] if session_id else history, session_id, tenant)
    answer = (await stub.Ask(request, timeout=ASK_TIMEOUT_S)).answer
    latency_ms = (time.perf_counter() - started) * 1000
    ranked = answer.explanation.packed_chunks if len(answer.explanation.packed_chunks) else answer.candidates
    ranked_documents = [c.document_id for c in ranked]
    right = metrics.is_right(question, answer.grounded, answer.text) if question.should_answer else False
    return {
        **asked(question, earlier),
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


def asked(question: questions.Question, earlier: list[dict[str, Any]]) -> dict[str, Any]:
    """What an outcome records of its question, and of the turns asked before it."""
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
    }


def failed_outcome(question: questions.Question, error: grpc.aio.AioRpcError) -> dict[str, Any]:
    """An Ask that ended in an error status: not grounded, not right, refusal reason ERROR_<code>."""
    return {
        **asked(question, []),
        "grounded": False,
        "refusal_reason": f"ERROR_{error.code().name}",
        "action": "ERROR",
        "confidence": 0.0,
        "confidence_parts": {},
        "answer": "",
        "model": "",
        "citations": [],
        "ranked_list": "none",
        "ranked_documents": [],
        "ranked_relevance": [],
        "rank": None,
        "right": False,
        "safe": True,
        "injection_suspected": False,
        "latency_ms": None,
        "server_total_ms": None,
        "error": f"{error.code().name}: {error.details()}",
    }


def git_commit() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True, text=True)
        return commit + ("+dirty-src" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def file_record(path: Path) -> dict[str, Any]:
    """A file of the repository: its path, the last commit that changed it (`git log -1`), whether it differs from
    that commit (or is not committed), and its sha256. Outside the repository: commit and modified are None."""
    relative = corpus.shown(path)
    if not path.resolve().is_relative_to(ROOT):
        return {"path": relative, "commit": None, "modified": None, "sha256": sha256_of(path)}
    log = subprocess.run(["git", "log", "-1", "--format=%H", "--", relative], cwd=ROOT, capture_output=True, text=True)
    status = subprocess.run(["git", "status", "--porcelain", "--", relative], cwd=ROOT, capture_output=True, text=True)
    return {
        "path": relative,
        "commit": log.stdout.strip() or None,
        "modified": bool(status.stdout.strip()),
        "sha256": sha256_of(path),
    }


def reader_model(spec: corpus.Corpus, folds: Path | None) -> tuple[dict[str, str], dict[str, Any] | None]:
    """The server environment that selects `spec`'s leave-one-out reader (folds/without-<name>.npz), and what to
    report about it; none when `folds` is None or holds no model for this corpus (the server's default reader)."""
    if folds is None:
        return {}, None
    path = (folds / f"without-{spec.name}.npz").resolve()
    if not path.is_file():
        return {}, None
    cross = crossfolds.for_corpus(spec.name, folds).resolve()
    env = {"RAG_READER_MODEL": str(path), "RAG_READER_CROSS_MODEL": str(cross)}
    shown = {"path": corpus.shown(path), "sha256": sha256_of(path), "setting": "RAG_READER_MODEL"}
    return env, {**shown, "cross": {"path": corpus.shown(cross), "sha256": sha256_of(cross), "setting": "RAG_READER_CROSS_MODEL",
                                    "trained_on": crossfolds.training_corpora(cross)}}  # fmt: skip


async def ask_all(address: str, chosen: list[questions.Question], followups: str, tenant: str) -> list[dict[str, Any]]:
    outcomes = []
    async with grpc.aio.insecure_channel(address) as channel:
        stub = rag_service_pb2_grpc.RagServiceStub(channel)
        # Warm-up (not scored): the first call pays for lazy initialisation.
        try:
            await stub.Ask(_request("warm-up question about the server", [], "", tenant), timeout=ASK_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            print(f"warm-up failed: {exc.code().name} {exc.details()}", flush=True)
        for i, question in enumerate(chosen, start=1):
            try:
                outcomes.append(await ask_one(stub, question, followups, tenant))
            except grpc.aio.AioRpcError as exc:  # counted as a failure to answer, never skipped
                outcomes.append(failed_outcome(question, exc))
            if i % 20 == 0 or i == len(chosen):
                print(f"\r  asked {i}/{len(chosen)}", end="", flush=True)
    print()
    return outcomes


async def evaluate_corpus(
    spec: corpus.Corpus,
    chosen: list[questions.Question],
    questions_file: Path,
    args: argparse.Namespace,
    env_extra: dict[str, str],
) -> dict[str, Any]:
    """One corpus: fetch, ingest (or reuse), ask `chosen` in a server of its own, score."""
    started = time.perf_counter()
    print(f"== {spec.name}", flush=True)
    if args.pages:  # a directory of pages instead of the package (the smoke test's few committed pages)
        names = sorted(p.relative_to(args.pages).as_posix() for p in args.pages.rglob("*.html"))
        pages = corpus.load_pages(spec, args.pages, names)
        fetched = None
    else:
        fetched = corpus.fetch(spec)
        pages = corpus.load_pages(spec, fetched.html_dir)
    reader_env, reader = reader_model(spec, None if args.no_folds else args.folds)
    run_dir, manifest = await prepared_data_dir(pages, spec.tenant, env_extra, fresh=args.fresh)
    try:
        with ServerProcess(
            base_env(run_dir / "data", {**env_extra, **reader_env}), log=ROOT / ".bench" / "quality-server.log"
        ) as server:
            print(
                f"server up in {server.start_s:.1f} s at {server.address}; asking {len(chosen)} questions "
                f"(reader: {reader['path'] if reader else 'the default'})",
                flush=True,
            )
            asking = time.perf_counter()
            outcomes = await ask_all(server.address, chosen, args.followups, spec.tenant)
            asking_s = time.perf_counter() - asking
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    splits = {s: [o for o in outcomes if o["split"] == s] for s in questions.SPLITS}
    return {
        "corpus": {
            "name": spec.name,
            "tenant": spec.tenant,
            "package": spec.package,
            "version": fetched.version if fetched else None,
            "deb_sha256": fetched.deb_sha256 if fetched else None,
            "pinned_version": spec.version,
            "pinned_sha256": spec.sha256,
            "pinned": fetched.pinned if fetched else None,
            "pages_from": str(args.pages) if args.pages else f"{spec.package} {spec.doc_root}",
            "license": spec.license,
            "subset": f"{spec.subset.description} ({corpus.shown(spec.pages_file)})",
            "source_url": spec.url_template,
            "pages": sum(not p.planted for p in pages),
            "planted_documents": [p.document_id for p in pages if p.planted],
            "corpus_sha256": corpus.corpus_hash(pages),
            "chunks": manifest["chunks"],
            "documents_with_text": manifest["documents_with_text"],
            "documents_without_text": sorted(d for d, r in manifest["documents"].items() if not r["chunks"]),
            "index_key": manifest["key"],
        },
        "questions_file": file_record(questions_file),
        "reader_model": reader,
        "questions": questions.summary(chosen),
        "cache": {
            "setting": "RAG_CACHE_MAX_ENTRIES=0",
            "hits": sum(bool(o.get("cache_hit")) for o in outcomes),
            "misses": sum(not o.get("cache_hit") for o in outcomes),
        },
        "timings": {
            "ingest_s": None if manifest.get("reused") else manifest["ingest_s"],
            "ingest_s_when_built": manifest["ingest_s"],
            "index_reused": manifest["reused"],
            "asking_s": round(asking_s, 1),
            "total_s": round(time.perf_counter() - started, 1),
        },
        "metrics": {
            "all": metrics.split_metrics(outcomes),
            **{s: metrics.split_metrics(o) for s, o in splits.items() if o},
        },
        "by_style": {s: metrics.by_style(o) for s, o in splits.items() if o},
        "reliability": metrics.reliability(outcomes),
        "outcomes": outcomes,
    }


async def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    local = LocalLlama() if args.llm == "local" else None
    try:
        if local is not None:
            env_extra, generator = local.env(), {"generator": "openai", "model": "smollm2-135m (local llama.cpp)"}
        else:
            env_extra, generator = llm_env(args.llm)
        corpora, skipped = {}, {}
        for name in args.corpus:
            spec = corpus.get(name)
            questions_file = args.questions or spec.questions_file
            if not questions_file.exists():
                skipped[name] = f"no questions file ({corpus.shown(questions_file)})"
            elif args.slice and not spec.slice_file.exists():
                skipped[name] = "no regression slice"
            elif not (chosen := select(questions.load(questions_file), spec, args)):
                skipped[name] = "no question selected"
            else:
                corpora[name] = await evaluate_corpus(spec, chosen, questions_file, args, env_extra)
            if name in skipped:
                print(f"== {name}: skipped, {skipped[name]}", flush=True)
    finally:
        if local:
            local.close()
    return {
        "benchmark": "quality",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "generator": generator,
        "selection": {
            "corpora": list(args.corpus),
            "split": args.split,
            "limit": args.limit,
            "slice": args.slice,
            "ids": args.ids,
            "followups": args.followups,
            "questions": sum(sum(sum(c.values()) for c in r["questions"].values()) for r in corpora.values()),
            "questions_file": str(args.questions) if args.questions else None,
            "folds": None if args.no_folds else str(args.folds),
        },
        "settings": {
            "server_env": {
                k: v for k, v in base_env(Path("<tmp>"), env_extra).items() if k.startswith(("RAG_", "CHAT_", "OPENAI_BASE"))
            },
            "ranked_list": "answer.explanation.packed_chunks (marker order); answer.candidates when the gate refused",
            "right": "grounded and the answer text contains a key fact (normalised: case, punctuation, whitespace; whole words)",
            "coverage": "answerable questions and follow-ups answered with ACTION_CITE and right, of all of them",
        },
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "timings": {"total_s": round(time.perf_counter() - started, 1)},
        "corpora": corpora,
        "skipped": skipped,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--corpus", action="append", choices=list(corpus.CORPORA), help="run this corpus (repeatable; default: every corpus)"
    )
    parser.add_argument("--split", choices=("dev", "heldout", "all"), default="all")
    parser.add_argument("--limit", type=int, default=0, help="ask only the first N selected questions of each corpus")
    parser.add_argument("--slice", action="store_true", help="only the regression slice (corpora/<name>/slice.txt)")
    parser.add_argument("--ids", default="", help="comma-separated question ids")
    parser.add_argument("--followups", choices=("history", "session"), default="history")
    parser.add_argument("--llm", choices=("none", "openai", "local"), default="none")
    parser.add_argument("--fresh", action="store_true", help="ingest again even when a matching index is cached")
    parser.add_argument("--no-write", action="store_true", help="print the metrics; write no files")
    parser.add_argument(
        "--folds",
        type=Path,
        default=FOLDS,
        help="where the leave-one-out reader models without-<corpus>.npz are (default %(default)s)",
    )
    parser.add_argument("--no-folds", action="store_true", help="serve every corpus with the server's default reader")
    parser.add_argument(
        "--pages", type=Path, help="ingest the .html pages of this directory, not the fetched package (one --corpus)"
    )
    parser.add_argument(
        "--questions",
        type=Path,
        help="ask the questions of this file, not the corpus's (one --corpus; "
        "e.g. bench/quality/corpora/pgdocs/tuning_followups.jsonl)",
    )
    args = parser.parse_args(argv)
    full_selection = not args.corpus
    args.corpus = list(dict.fromkeys(args.corpus or corpus.CORPORA))
    if (args.pages or args.questions) and len(args.corpus) != 1:
        parser.error("--pages and --questions need exactly one --corpus")
    try:
        result = asyncio.run(evaluate(args))
    except FetchError as exc:
        raise SystemExit(str(exc)) from None
    from bench.quality import report

    print(report.console_summary(result))
    if args.no_write:
        scratch = ROOT / ".bench" / "quality-last.json"
        scratch.parent.mkdir(exist_ok=True)
        scratch.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        print(f"results of this run kept in {scratch.relative_to(ROOT)} only")
        return
    name = "quality" if args.llm == "none" else f"quality-{args.llm}"
    partial = (args.split != "all", args.limit, args.slice, args.ids, args.questions, args.pages, result["skipped"])
    if not full_selection or any(partial):
        name += "-partial"
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}-{datetime.now(UTC):%Y-%m-%d}.json"
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"written to {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    if name == "quality":
        written = report.write_docs(result, out)
        print("written to " + ", ".join(str(p.relative_to(ROOT)) for p in written))


if __name__ == "__main__":
    main()
