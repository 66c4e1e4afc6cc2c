"""The small-tenant slice: each corpus's questions asked of tenants of a handful of its pages, as a new user's first
hour looks (the demo corpus's 5 documents, a few markdown files), not of the whole 1,000-2,000-chunk corpus.

    python -m bench.quality.small [--corpus NAME ...] [--folds DIR | --no-folds] [--full QUALITY.json] [--out FILE]

For each corpus, a tenant per chunk budget of BUDGETS, of at most DOCUMENTS pages (`tenants`, deterministic): each
holds RICH pages that the corpus's questions ask about most (dealt round robin, so the tenants share none of them)
and is filled with other pages of the corpus chosen by a hash, so that retrieval has near-topic pages to confuse.
A tenant is asked the answerable questions and follow-ups whose expected pages it holds, and the near-topic
unanswerables whose nearest page (provenance.page) it holds: their subject is in no page of the whole corpus
(bench/quality/README.md), so in none of a tenant's. Injection probes are left out (their planted page is not in
any tenant). Pages of more than MAX_PAGE_CHUNKS chunks are never chosen: ingest costs ~70 ms a chunk.

A corpus's tenants are ingested over gRPC by a real `ragsvc serve` into one data dir (cached in
.bench/small-tenants/, keyed like the benchmark's index: pages, tenants and ingestion code) and asked through a
server of their own with the corpus's leave-one-out reader (bench/quality/folds/without-<corpus>.npz), scored by
bench/quality/metrics.py. bench/demo_questions.py's questions (README's first example among them) are asked of the
bundled demo corpus (5 documents) with the shipped model.

Writes bench/results/quality-small-DATE.json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc

from bench import demo_questions
from bench.quality import corpus, metrics, questions
from bench.quality.corpus import ROOT, Page
from bench.quality.run import FOLDS, ask_all, git_commit, reader_model
from bench.quality.server import ServerProcess, base_env, cached_index, index_key, ingest
from bench.stats import RESULTS
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

CACHE = ROOT / ".bench" / "small-tenants"
# Each tenant's chunks at most (its pages are added while they fit): tenants of a few pages, from about the bundled
# demo corpus's size (5 documents, 24 chunks) to a handful of manual pages.
BUDGETS = (90, 90, 90, 40, 40, 40)
RICH = 3  # pages per tenant chosen for the questions asked of them
DOCUMENTS = 8  # pages per tenant at most
MAX_PAGE_CHUNKS = 30
README_QUESTION = "What happens on SIGTERM?"  # README's first example, one of demo_questions.QUESTIONS


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str  # the tenant id
    pages: tuple[Page, ...]
    questions: tuple[questions.Question, ...]


def _home(question: questions.Question, documents: dict[str, str]) -> frozenset[str]:
    """The documents a question needs in its tenant: its expected ones, or an unanswerable's nearest page."""
    if question.kind == "unanswerable":
        page = question.provenance.get("page")
        return frozenset([documents[page]] if page in documents else ())
    return frozenset(question.expected_documents)


def tenants(name: str, pages: Sequence[Page], chunks: dict[str, int], asked: Sequence[questions.Question]) -> list[Tenant]:
    """The small tenants of corpus `name` (its `pages`, `chunks` per document in the full index, its questions
    `asked`)."""
    documents = {p.name: p.document_id for p in pages}
    by_id = {p.document_id: p for p in pages}
    usable = [q for q in asked if q.kind in ("answerable", "followup") or (q.kind == "unanswerable" and q.near_topic)]
    homes = {q.id: _home(q, documents) for q in usable}
    small = {d for d, n in chunks.items() if 0 < n <= MAX_PAGE_CHUNKS and d in by_id}
    asked_of = Counter(d for q in usable if len(homes[q.id]) == 1 for d in homes[q.id] if d in small)
    ranked = sorted(asked_of, key=lambda d: (-asked_of[d], d))
    dealt = len(BUDGETS) * RICH
    result = []
    for i, budget in enumerate(BUDGETS):
        tenant = f"{name}-small{i + 1}"
        fill = sorted(small - set(ranked[:dealt]), key=lambda d: hashlib.sha256(f"{tenant}/{d}".encode()).digest())
        chosen: list[str] = []
        total = 0
        for d in ranked[i : dealt : len(BUDGETS)] + fill:
            if len(chosen) >= DOCUMENTS:
                break
            if total + chunks[d] <= budget:
                chosen.append(d)
                total += chunks[d]
        held = set(chosen)
        mine = tuple(q for q in usable if homes[q.id] and homes[q.id] <= held)
        if any(q.kind == "answerable" for q in mine):
            result.append(Tenant(tenant, tuple(by_id[d] for d in sorted(held)), mine))
    return result


def corpus_tenants(name: str) -> list[Tenant]:
    """Corpus `name`'s small tenants, from its pages and its full index's chunk counts (the benchmark's cache)."""
    spec = corpus.get(name)
    pages = corpus.load_pages(spec, corpus.fetch(spec).html_dir)
    _, manifest = asyncio.run(cached_index(pages, spec.tenant))
    chunks = {d: r["chunks"] for d, r in manifest["documents"].items()}
    return tenants(name, [p for p in pages if not p.planted], chunks, questions.load(spec.questions_file))


async def ingested(name: str, groups: Sequence[Tenant]) -> Path:
    """A data dir holding every tenant of `groups` (cached in CACHE, ingested over gRPC when missing)."""
    env = base_env(Path("."), {"RAG_READER": "rules"})
    digest = hashlib.sha256(index_key([p for g in groups for p in g.pages], env).encode())
    for group in groups:
        digest.update(f"{group.name}:{','.join(p.document_id for p in group.pages)}\n".encode())
    cached = CACHE / f"{name}-{digest.hexdigest()[:16]}"
    if not (cached / "manifest.json").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=CACHE))
        with ServerProcess(base_env(building / "data", {"RAG_READER": "rules"})) as server:
            manifests = [await ingest(server.address, g.pages, g.name) for g in groups]
        (building / "manifest.json").write_text(json.dumps(manifests, indent=1))
        building.rename(cached)
    return cached / "data"


def data_dir(name: str, groups: Sequence[Tenant]) -> Path:
    """`ingested`, from outside an event loop (what training reads its evidence from)."""
    return asyncio.run(ingested(name, groups))


async def ask_corpus(name: str, groups: Sequence[Tenant], folds: Path | None) -> dict[str, Any]:
    spec = corpus.get(name)
    source = await ingested(name, groups)
    run_dir = Path(tempfile.mkdtemp(prefix="ragsvc-small-"))
    shutil.copytree(source, run_dir / "data")
    reader_env, reader = reader_model(spec, folds)
    outcomes = []
    try:
        with ServerProcess(base_env(run_dir / "data", reader_env), log=ROOT / ".bench" / "quality-server.log") as server:
            for group in groups:
                print(f"== {group.name}: {len(group.pages)} pages, {len(group.questions)} questions", flush=True)
                outcomes += [
                    {**o, "tenant": group.name}
                    for o in await ask_all(server.address, list(group.questions), "history", group.name)
                ]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    manifests = json.loads((source.parent / "manifest.json").read_text())
    return {
        "reader_model": reader,
        "tenants": [
            {"tenant": g.name, "pages": [p.document_id for p in g.pages], "chunks": m["chunks"], "questions": len(g.questions)}
            for g, m in zip(groups, manifests, strict=True)
        ],
        "metrics": metrics.split_metrics(outcomes),
        "outcomes": outcomes,
    }


async def demo_corpus() -> dict[str, Any]:
    """bench/demo_questions.py's questions (README's first example among them) on the bundled demo corpus, a tenant
    of 5 documents no model was trained on, served with the shipped model."""
    run_dir = Path(tempfile.mkdtemp(prefix="ragsvc-demo-"))
    asked = []
    try:
        with ServerProcess(base_env(run_dir / "data", {"RAG_DEMO_CORPUS": "true"})) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = rag_service_pb2_grpc.RagServiceStub(channel)
                for question in demo_questions.QUESTIONS:
                    answer = (await stub.Ask(pb.AskRequest(query=question.query), timeout=120)).answer
                    asked.append({
                        "question": question.query,
                        "confidence": round(answer.confidence.overall, 3),
                        "action": pb.Action.Name(answer.action),
                        "grounded": answer.grounded,
                        "right": answer.grounded and question.right(answer.text),
                    })  # fmt: skip
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    cited = [a for a in asked if a["action"] == "ACTION_CITE"]
    return {
        "readme_example": next(a for a in asked if a["question"] == README_QUESTION),
        "n": len(asked),
        "right": sum(a["right"] for a in asked),
        "cite_answers": len(cited),
        "cite_right": sum(a["right"] for a in cited),
        "auroc": metrics.auroc([a["confidence"] for a in asked], [a["right"] for a in asked]),
        "asked": asked,
    }


def row(m: dict[str, Any]) -> dict[str, Any]:
    """The figures the slice compares small and full tenants on."""
    return {
        "answered_and_right": m["answerable"]["answered_and_right"],
        "auroc": m["auroc_confidence"],
        "cite_answers": m["cite_answers"],
        "cite_precision": m["cite_precision"],
        "coverage": m["coverage"],
        "unanswerable_n": m["unanswerable"]["n"],
        "unanswerable_refused": m["unanswerable"]["refused"],
        "unanswerable_cite": m["unanswerable"]["answered_with_cite"],
        "followup_right": m["followup"]["answered_and_right"],
        "n": m["n"],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", choices=list(corpus.CORPORA), help="default: every corpus")
    parser.add_argument("--folds", type=Path, default=FOLDS)
    parser.add_argument("--no-folds", action="store_true", help="serve every corpus with the shipped model")
    parser.add_argument("--full", type=Path, help="a make eval results file to print the full-size figures from")
    parser.add_argument("--out", type=Path, help="the results file (default bench/results/quality-small-DATE.json)")
    args = parser.parse_args(argv)
    names = args.corpus or list(corpus.CORPORA)
    result: dict[str, Any] = {
        "benchmark": "quality-small",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "tenants": {"chunk_budgets": BUDGETS, "rich": RICH, "documents": DOCUMENTS, "max_page_chunks": MAX_PAGE_CHUNKS},
        "corpora": {},
    }
    for name in names:
        groups = corpus_tenants(name)
        result["corpora"][name] = asyncio.run(ask_corpus(name, groups, None if args.no_folds else args.folds))
    result["demo_corpus"] = asyncio.run(demo_corpus())
    full = json.loads(args.full.read_text())["corpora"] if args.full else {}
    print(f"{'corpus':12s} {'size':5s} " + " ".join(f"{k:>10s}" for k in row(result["corpora"][names[0]]["metrics"])))
    for name in names:
        for size, m in (
            ("small", result["corpora"][name]["metrics"]),
            ("full", full.get(name, {}).get("metrics", {}).get("all")),
        ):
            if m:
                print(f"{name:12s} {size:5s} " + " ".join(f"{v if v is not None else '-':>10}" for v in row(m).values()))
    demo = result["demo_corpus"]
    print("demo corpus:", {k: v for k, v in demo.items() if k != "asked"})
    out = args.out or RESULTS / f"quality-small-{datetime.now(UTC):%Y-%m-%d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
