"""ragsvc in process, without gRPC: a worker of the peer benchmark (`common`'s protocol, in ragsvc's own venv)
that opens the components `ragsvc serve` opens for the job (`open_components` with the job's environment and the
token-hashing embedder), ingests the corpus through the indexer, one document per passage as IndexService does,
and drives AnsweringService's stream the way the AskStream servicer does, minus the wire: no proto conversion,
no interceptors, no transport. It times what the gRPC variant's caller times (end to end, first token) and
reports the answer's stage timings (embedding, store), so that the gRPC variant minus this one is the hop.

Besides ``ask`` it answers ``{"op": "context_ids", "queries": [...]}`` with the passages packed into each prompt
(an untimed explained answer), as `RagsvcServer.context_ids` does over gRPC, and ``{"op": "raw_engine"}`` with the
`raw_engine` row: the qdrant-edge QueryRequests ragsvc sent to its shard during the latest ``ask`` (recorded as
they were sent: `RecordingShard`), each sent again to the same shard and timed bare, the shard's calls alone
(`raw_engine`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.peers.common import Passage, WorkerConfig, corpus, rss_mib, send, serve_commands, start_worker, versions
from bench.peers.ragsvc_server import HashingEmbedderAdapter
from bench.peers.ragsvc_variant import STAGES, job_environment, timed_result
from ragsvc.answering.context import CallContext
from ragsvc.config import Settings
from ragsvc.domain import Answer, Question, RefusalReason, SourceDocument, TextDelta
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.server.components import Components, open_components

ASK_TIMEOUT_S = 30.0  # the deadline the gRPC variant's caller sets
# The answer's Timings field of each of STAGES.
_TIMING_FIELDS = {"retrieval": "retrieval_ms", "embedding": "embedding_ms", "store": "store_ms", "budget": "budget_ms",
                  "generation": "generation_ms", "time_to_first_token": "first_token_ms",
                  "validation": "validation_ms", "total": "total_ms"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Sent:
    """The arguments of one call to the shard."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def to(self, method: Callable[..., Any]) -> Any:
        return method(*self.args, **self.kwargs)


class RecordingShard:
    """The engine's qdrant-edge shard with every read a question makes (`query`, `query_batch`, `retrieve`) kept on
    its way in, unchanged, with when it was sent, per question (`sent`: a list per `question()`, of method,
    arguments and perf_counter time): what ragsvc sends, exactly, for the `raw_engine` row to send again.
    Everything else passes straight through."""

    def __init__(self, shard: Any) -> None:
        self.shard = shard
        self.sent: list[list[tuple[str, Sent, float]]] = []

    def question(self) -> None:
        """What is sent from now on is the next question's."""
        self.sent.append([])

    def query(self, request: Any) -> Any:
        return self._recorded("query", Sent((request,)))

    def query_batch(self, request: Any) -> Any:
        return self._recorded("query_batch", Sent((request,)))

    def retrieve(self, *args: Any, **kwargs: Any) -> Any:
        return self._recorded("retrieve", Sent(args, kwargs))

    def _recorded(self, method: str, sent: Sent) -> Any:
        if self.sent:
            self.sent[-1].append((method, sent, time.perf_counter()))
        return sent.to(getattr(self.shard, method))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.shard, name)


def recording(components: Components) -> RecordingShard:
    """Puts a `RecordingShard` between ragsvc's embedded engine and its shard (the job's engine: no background
    index build swaps the shard at its sizes)."""
    engine = components.engine
    if not isinstance(engine, EdgeEngine):
        raise RuntimeError("the raw_engine row needs the embedded qdrant-edge engine")
    shard = RecordingShard(engine._shard)
    engine._shard = shard
    return shard


def raw_engine(recorded: RecordingShard) -> dict[str, Any]:
    """Each question's requests recorded since the previous call, sent again to the same shard and timed alone
    (`EdgeShard.query` / `query_batch` / `retrieve`: the engine's search and its results as Python objects), a question's time
    the sum of its requests', twice over:

    - `raw_ms`: at the pace ragsvc sent them (each one as long after the previous one as in ragsvc's run, the time
      of a question): between questions the engine's search thread goes to sleep and the caches cool, for ragsvc's
      calls and these alike;
    - `back_to_back_ms`: one right after the other (the engine kept warm: the least a call can cost).

    `points`: how many results each question's requests returned."""
    questions, recorded.sent = recorded.sent, []
    spaced, back_to_back, points = [], [], []
    previous: tuple[float, float] | None = None  # when the previous request was sent in ragsvc's run, and its time
    for sent in questions:
        took, returned = 0.0, 0
        for method, arguments, at in sent:
            if previous is not None:
                time.sleep(max(at - previous[0] - previous[1], 0.0))
            started = time.perf_counter()
            found = arguments.to(getattr(recorded.shard, method))
            elapsed = time.perf_counter() - started
            previous = (at, elapsed)
            took += elapsed * 1000
            returned += sum(len(part) for part in found) if method == "query_batch" else len(found)
        spaced.append(took)
        points.append(returned)
    for sent in questions:
        started = time.perf_counter()
        for method, arguments, _ in sent:
            arguments.to(getattr(recorded.shard, method))
        back_to_back.append((time.perf_counter() - started) * 1000)
    return {"raw_ms": spaced, "back_to_back_ms": back_to_back, "points": points}


@contextlib.asynccontextmanager
async def open_ragsvc(config: WorkerConfig, passages: Sequence[Passage]) -> AsyncIterator[Components]:
    """ragsvc's components for the job, in a temporary data directory, with `passages` ingested."""
    with tempfile.TemporaryDirectory(prefix="ragsvc-inprocess-") as data_dir:
        settings = Settings.from_env(job_environment(config, data_dir))
        async with open_components(settings, embedder=HashingEmbedderAdapter()) as components:
            for passage in passages:
                document = SourceDocument(
                    document_id=passage.id, name=passage.name, content=passage.text.encode(), tenant_id=passage.tenant
                )
                result = await components.indexer.ingest(document)
                if result.chunks_indexed != 1:
                    raise RuntimeError(f"a passage did not become one chunk: {result}")
            yield components


async def timed_ask(components: Components, query: str, tenant: str, *, explain: bool = False) -> tuple[dict[str, Any], Answer]:
    """One question through AnsweringService's event stream, timed like the gRPC variant's AskStream."""
    loop = asyncio.get_running_loop()
    window = [time.monotonic()]
    started = time.perf_counter()
    request_id = uuid.uuid4().hex
    question = Question(query=query, tenant_id=tenant, request_id=request_id, explain=explain)
    call = CallContext(request_id, deadline=loop.time() + ASK_TIMEOUT_S, peer="in-process")
    first_token = None
    text = []
    answer = None
    messages = 0  # the events an AskStream would send, one message each
    async with contextlib.aclosing(components.answering.answer(question, call)) as events:
        async for event in events:
            messages += 1
            if isinstance(event, TextDelta):
                if first_token is None:
                    first_token = time.perf_counter()
                text.append(event.text)
            elif isinstance(event, Answer):
                answer = event
    ended = time.perf_counter()
    window.append(time.monotonic())
    if answer is None:
        raise RuntimeError("the stream ended without its final answer")
    timings = {name: getattr(answer.timings, _TIMING_FIELDS[name]) for name in STAGES}
    result = timed_result(started, first_token, ended, "".join(text), timings, answer.grounded, answer.flags.cache_hit)
    return result | {"window": window, "refused": answer.refusal is not RefusalReason.NONE, "messages": messages}, answer


async def ask_all(components: Components, queries: Sequence[Sequence[str]], shard: RecordingShard) -> list[dict[str, Any]]:
    """`timed_ask` each query in turn on one running event loop, so that the work an answer leaves to background
    tasks (the audit log's writes) runs as it does in a server: between and during the questions, timed or not.
    `shard` records what each question sends the engine."""
    results = []
    for query, tenant in queries:
        shard.question()
        result, _ = await timed_ask(components, query, tenant)
        results.append(result | {"rss_mib": rss_mib()})
        await asyncio.sleep(0)  # as a server's loop does between a response and the next request
    return results


async def packed_ids(components: Components, queries: Sequence[Sequence[str]]) -> list[list[str]]:
    """The passages packed into each prompt, in marker order (an explained answer each)."""
    ids = []
    for query, tenant in queries:
        explained = (await timed_ask(components, query, tenant, explain=True))[1].explanation
        ids.append([s.chunk.source_id.removesuffix(":0") for s in explained.packed] if explained else [])
    return ids


def main() -> None:
    out, config = start_worker()
    # As `ragsvc serve` logs (the gRPC variant's server logs at INFO to a discarded stderr).
    with open(os.devnull, "w") as discarded, asyncio.Runner() as runner:
        logging.basicConfig(level=logging.INFO, stream=discarded)
        started = time.perf_counter()
        opened = open_ragsvc(config, corpus(config.corpus_size, config.seed))
        components = runner.run(opened.__aenter__())
        shard = recording(components)
        try:
            send(out, {"ready": True, "index_s": time.perf_counter() - started, "rss_mib": rss_mib(),
                       "versions": versions("ragsvc", "qdrant-edge-py")})  # fmt: skip

            def answer(command: dict[str, Any]) -> dict[str, Any]:
                if command["op"] == "context_ids":
                    return {"ids": runner.run(packed_ids(components, command["queries"]))}
                if command["op"] == "raw_engine":
                    return raw_engine(shard)
                shard.sent = []  # what the ask sends, and only that
                return {"results": runner.run(ask_all(components, command["queries"], shard))}

            serve_commands(out, answer)
        finally:
            runner.run(opened.__aexit__(None, None, None))


if __name__ == "__main__":
    main()
