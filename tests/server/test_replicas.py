"""Two replicas that share one state: two `ragsvc serve` processes on one real PostgreSQL (the records) and one real
Redis-protocol server (cache, replays, rate limit, change feed), reached through one client channel that balances
round robin over both addresses, as a mesh or a client-side balancer would.

Each replica holds its own copy of the same embedded index (no Qdrant server installs here; in production the
replicas share one through RAG_QDRANT_URL), so an ingest reaches the index of the replica it went through only:
what these tests check about it is the cache, which is shared.

Which replica served a call is read from each replica's own /metrics (rag_grpc_requests_total), so that "the
session continued on the other replica" and "both replicas refused" are observed, not assumed. The numbers the
issue asks for are printed (run with -s to see them).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.local_server import free_port
from tests.support.polling import eventually
from tests.support.postgres_server import PostgresServer
from tests.support.redis_server import RedisServer
from tests.support.servers import Stubs, connected, serve_process

RATE_LIMIT = 20  # per minute per client, for all replicas together
QUESTION = "What happens on SIGTERM?"
USER_PROMPT = "Runbook question:\n{query}\n\nRunbook pages:\n{context}"
PROPAGATION_S = 1.0  # the issue: a template or weight change on one replica applies on all within one second


@dataclass
class Replica:
    address: str
    metrics_port: int
    stubs: Stubs

    def requests(self, method: str, code: str) -> float:
        """rag_grpc_requests_total{method, code} as this replica's /metrics reports it now."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as response:
            text = response.read().decode()
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "rag_grpc_requests_total" and sample.labels == {"method": method, "code": code}
        )


@dataclass
class Replicas:
    a: Replica
    b: Replica
    balanced: Stubs  # round robin over both

    @property
    def both(self) -> tuple[Replica, Replica]:
        return self.a, self.b

    def served(self, method: str = "Ask", code: str = "OK") -> tuple[float, float]:
        return self.a.requests(method, code), self.b.requests(method, code)

    async def counted(self, calls: int, before: tuple[float, float], method: str = "Ask", code: str = "OK") -> None:
        """Returns once both replicas together count `calls` more than `before`: a call is counted after its status
        went out (the metrics interceptor's `finished`), so the caller can see its answer first."""
        await eventually(lambda: sum(self.served(method, code)) - sum(before) >= calls, within_s=5.0)


def caller(name: str) -> tuple[tuple[str, str], ...]:
    """Metadata naming a client: without authentication its bearer token is what the rate limit counts by, so
    each test (and each polling attempt) spends a budget of its own, and only the rate-limit test runs out."""
    return (("authorization", f"Bearer {name}"),)


@pytest.fixture(scope="module")
async def replicas(
    tmp_path_factory: pytest.TempPathFactory,
    postgres_server: PostgresServer,
    redis_server: RedisServer,
    demo_index: Callable[[Path], Path],
) -> AsyncIterator[Replicas]:
    postgres_server.start()
    redis_server.start()
    redis_server.flush()
    postgres_url = postgres_server.create_schema("replicas")
    env = {
        "RAG_DATABASE_URL": postgres_url,
        "RAG_REDIS_URL": redis_server.url,
        "RAG_API_RATE_LIMIT": str(RATE_LIMIT),
        "RAG_HEALTH_PROBE_INTERVAL_SECONDS": "0.5",
        "RAG_GRACE_PERIOD_SECONDS": "2",
    }
    ports = [free_port(), free_port()]
    data_dirs = [demo_index(tmp_path_factory.mktemp(f"replica-{n}")) for n in range(2)]
    async with (
        serve_process(data_dirs[0], {**env, "RAG_METRICS_PORT": str(ports[0])}) as first,
        serve_process(data_dirs[1], {**env, "RAG_METRICS_PORT": str(ports[1])}) as second,
        connected(first.address) as a,
        connected(second.address) as b,
        connected(f"ipv4:{first.address},{second.address}", options=[("grpc.lb_policy_name", "round_robin")]) as rr,
    ):
        yield Replicas(Replica(first.address, ports[0], a), Replica(second.address, ports[1], b), rr)
    postgres_server.drop_schema("replicas")


async def ask(stubs: Stubs, client: str, query: str = QUESTION, **fields: object) -> pb.Answer:
    return (await stubs.rag.Ask(pb.AskRequest(query=query, **fields), metadata=caller(client), timeout=30)).answer


async def test_a_session_continues_on_whichever_replica_serves_its_next_turn(replicas: Replicas) -> None:
    session = str(uuid.uuid4())
    turns = ["What happens on SIGTERM?", "How are documents chunked?", "What is the confidence score?",
             "Which status code does a rate-limited call get?"]  # fmt: skip
    before = replicas.served()
    answers = []
    for turn in turns:
        answers.append(await ask(replicas.balanced, "session", turn, session_id=session, explain=True))
    await replicas.counted(len(turns), before)
    after = replicas.served()
    per_replica = [int(after[n] - before[n]) for n in range(2)]
    print(f"\nsession turns served per replica (round robin): {per_replica}")
    assert sum(per_replica) == len(turns) and all(per_replica), "both replicas served turns of the session"
    for n, answer in enumerate(answers):
        history = [m.content for m in answer.explanation.prompt][1:-1]  # between the system and the new question
        earlier = [text for turn, answer in zip(turns[:n], answers[:n], strict=True) for text in (turn, answer.text)]
        assert history == earlier, f"turn {n + 1} saw the whole session, whichever replica stored it"


async def test_a_template_created_on_one_replica_answers_on_the_other(replicas: Replicas) -> None:
    template = admin_pb.PromptTemplate(display_name="Runbook", user_prompt=USER_PROMPT)
    await replicas.a.stubs.admin.CreatePromptTemplate(
        admin_pb.CreatePromptTemplateRequest(prompt_template_id="runbook", prompt_template=template),
        metadata=caller("template"), timeout=10,
    )  # fmt: skip
    created = time.monotonic()
    await until_status(
        lambda attempt: template_status(replicas.b.stubs, f"template-{attempt}", "runbook"),
        grpc.StatusCode.OK, since=created, failure="the other replica never learnt of the template",
    )  # fmt: skip
    elapsed = time.monotonic() - created
    print(f"\ntemplate created on A answered on B after {elapsed * 1000:.0f} ms")
    answer = await ask(replicas.b.stubs, "template", generation=pb.GenerationOptions(template_id="runbook"))
    assert answer.prompt_template_version == "runbook"

    await replicas.b.stubs.admin.DeletePromptTemplate(
        admin_pb.DeletePromptTemplateRequest(name="promptTemplates/runbook"), metadata=caller("template"), timeout=10
    )
    await until_status(
        lambda attempt: template_status(replicas.a.stubs, f"deleted-{attempt}", "runbook"),
        grpc.StatusCode.NOT_FOUND, since=time.monotonic(), failure="a deletion on one replica never reached the other",
    )  # fmt: skip


async def until_status(
    attempt_status: Callable[[int], Awaitable[grpc.StatusCode]], wanted: grpc.StatusCode, *, since: float, failure: str
) -> None:
    """Tries `attempt_status(attempt)` until it gives `wanted` (the other answer is the one of before the change:
    OK for NOT_FOUND and back). An attempt that did not see the change fails the test when it was sent
    PROPAGATION_S or more after `since`: a slow Ask on a loaded machine is not a slow propagation."""
    before = grpc.StatusCode.NOT_FOUND if wanted == grpc.StatusCode.OK else grpc.StatusCode.OK
    for attempt in itertools.count():
        sent = time.monotonic()
        code = await attempt_status(attempt)
        if code == wanted:
            return
        assert code == before, f"{failure}: {code.name}"
        assert sent - since < PROPAGATION_S, f"{failure}: still {code.name} {sent - since:.2f} s after the change"
        await asyncio.sleep(0.02)


async def template_status(stubs: Stubs, client: str, template_id: str) -> grpc.StatusCode:
    """The status of an Ask with `template_id`: OK, or NOT_FOUND while the replica does not know the template."""
    request = pb.AskRequest(query=QUESTION, generation=pb.GenerationOptions(template_id=template_id))
    return await status(stubs.rag.Ask(request, metadata=caller(client), timeout=30))


async def status(call: Awaitable[object]) -> grpc.StatusCode:
    """The status code a call ended with."""
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def test_ranking_weights_set_on_one_replica_apply_on_the_other(replicas: Replicas) -> None:
    weights = admin_pb.RankingWeights(similarity_weight=0.6, recency_weight=0.1, trust_weight=0.3)
    await replicas.b.stubs.admin.UpdateRankingWeights(
        admin_pb.UpdateRankingWeightsRequest(ranking_weights=weights), metadata=caller("weights"), timeout=10
    )
    changed = time.monotonic()
    for attempt in itertools.count():
        sent = time.monotonic()
        seen = await replicas.a.stubs.admin.GetRankingWeights(
            admin_pb.GetRankingWeightsRequest(), metadata=caller(f"weights-{attempt}"), timeout=10
        )
        current = seen.ranking_weights
        if (current.similarity_weight, current.recency_weight, current.trust_weight) == (0.6, 0.1, 0.3):
            break
        assert sent - changed < PROPAGATION_S, "the other replica still ranks with the old weights"
        await asyncio.sleep(0.02)
    print(f"\nweights set on B in force on A after {(time.monotonic() - changed) * 1000:.0f} ms")


async def test_the_rate_limit_holds_for_both_replicas_together(replicas: Replicas) -> None:
    before = replicas.served("Ask", "RESOURCE_EXHAUSTED")
    started = time.monotonic()
    codes = [await status(replicas.balanced.rag.Ask(pb.AskRequest(query=QUESTION), metadata=caller("rate-limited"),
                                                     timeout=30)) for _ in range(3 * RATE_LIMIT)]  # fmt: skip
    elapsed = time.monotonic() - started
    allowed, refused = codes.count(grpc.StatusCode.OK), codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
    refill = int(elapsed * RATE_LIMIT / 60)  # tokens that came back while the calls ran
    expected = RATE_LIMIT + refill
    await replicas.counted(refused, before, "Ask", "RESOURCE_EXHAUSTED")
    after = replicas.served("Ask", "RESOURCE_EXHAUSTED")
    print(f"\nrate limit {RATE_LIMIT}/min over 2 replicas: {allowed} allowed of {3 * RATE_LIMIT} calls in "
          f"{elapsed:.1f} s (expected {expected}; per replica it would have been {2 * RATE_LIMIT + 2 * refill}); "
          f"refusals per replica: {[int(after[n] - before[n]) for n in range(2)]}")  # fmt: skip
    assert RATE_LIMIT <= allowed <= expected and refused == 3 * RATE_LIMIT - allowed, codes
    assert all(after[n] > before[n] for n in range(2)), "both replicas refused: they count together"


async def test_an_ingest_through_one_replica_empties_the_cache_on_both(replicas: Replicas) -> None:
    questions = ("How are documents chunked?", "What is the confidence score?")
    for query in questions:  # cached by A, served from the cache by B: the cache is shared
        assert not (await ask(replicas.a.stubs, "cache", query)).flags.cache_hit
        assert (await ask(replicas.b.stubs, "cache", query)).flags.cache_hit
        assert (await ask(replicas.a.stubs, "cache", query)).flags.cache_hit

    note = index_pb.Document(document_id="parking", content=b"Visitors park for free in the north garage.")
    await replicas.a.stubs.index.IngestDocuments(
        index_pb.IngestDocumentsRequest(documents=[note]), metadata=caller("cache"), timeout=30
    )
    assert not (await ask(replicas.b.stubs, "cache", questions[0])).flags.cache_hit, "B's next answer is fresh"
    assert not (await ask(replicas.a.stubs, "cache", questions[1])).flags.cache_hit, "and so is A's"


async def test_a_replica_with_another_cite_level_answers_for_itself_from_the_shared_cache(
    replicas: Replicas,
    tmp_path: Path,
    postgres_server: PostgresServer,
    redis_server: RedisServer,
    demo_index: Callable[[Path], Path],
) -> None:
    query = "How long is the grace period?"
    assert not (await ask(replicas.a.stubs, "levels", query)).flags.cache_hit
    assert (await ask(replicas.b.stubs, "levels", query)).flags.cache_hit, "the same settings share the entry"
    env = {
        "RAG_DATABASE_URL": postgres_server.create_schema("replicas_levels"),
        "RAG_REDIS_URL": redis_server.url,
        "RAG_CONFIDENCE_THRESHOLD": "50",  # a rolling change of the CITE level: the action cached is not this one's
    }
    try:
        async with serve_process(demo_index(tmp_path), env) as other, connected(other.address) as stubs:
            first = await ask(stubs, "levels", query)
            again = await ask(stubs, "levels", query)
    finally:
        postgres_server.drop_schema("replicas_levels")
    assert not first.flags.cache_hit, "another CITE level writes its own answer"
    assert again.flags.cache_hit, "which it caches for itself"
