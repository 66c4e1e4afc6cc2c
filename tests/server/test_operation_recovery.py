"""Operations that outlive the process running them: two `ragsvc serve` replicas on one real PostgreSQL answer for
each other's operations (Get, List, Wait, Cancel), and an operation whose replica was killed, or stopped, is
failed (ABORTED, OPERATION_ABANDONED) by the other replica or by the same server restarted: none stays RUNNING.

The asks run against a scripted OpenAI-compatible LLM that holds its first token for a minute, so that an operation
is running when its replica goes away. Leases are 1 s here (RAG_OPERATION_LEASE_SECONDS; 30 s by default).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import grpc
import pytest
from google.longrunning import operations_pb2_grpc as lro_grpc
from google.longrunning import operations_proto_pb2 as lro
from google.rpc import error_details_pb2

from ragsvc.v1 import operations_pb2 as ops_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.polling import eventually
from tests.support.postgres_server import PostgresServer
from tests.support.servers import ServeProcess, connected, serve_process

QUESTION = "What happens on SIGTERM?"
LEASE_S = 1.0


@pytest.fixture
async def llm() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer(deltas=["On SIGTERM the server drains [#1]."], first_token_delay_s=60.0) as server:
        yield server


def serve_env(llm: ScriptedOpenAIServer, **extra: str) -> dict[str, str]:
    return {
        "RAG_GENERATOR": "openai",
        "OPENAI_BASE_URL": llm.base_url,
        "RAG_LLM_CLASSIFY": "false",
        "RAG_LLM_SELF_SCORE": "false",
        "RAG_LLM_CONDENSE": "false",
        "RAG_DEFAULT_FOLLOW_UP_COUNT": "0",
        "RAG_MAX_RETRIES_ON_HALLUCINATION": "0",
        "RAG_HEALTH_PROBE_INTERVAL_SECONDS": "0.5",
        "RAG_GRACE_PERIOD_SECONDS": "1",
        "RAG_OPERATION_LEASE_SECONDS": str(LEASE_S),
        "RAG_OPERATION_POLL_SECONDS": "0.1",
        "RAG_CACHE_MAX_ENTRIES": "0",  # each submission runs: the cache would answer a repeated question at once
        **extra,
    }


async def submitted(address: str) -> str:
    async with connected(address) as stubs:
        return (await stubs.rag.SubmitAsk(pb.AskRequest(query=QUESTION), timeout=30)).name


async def operation(address: str, name: str) -> lro.Operation:
    async with connected(address) as stubs:
        return await lro_grpc.OperationsStub(stubs.channel).GetOperation(lro.GetOperationRequest(name=name), timeout=10)


def state(op: lro.Operation) -> int:
    metadata = ops_pb.AskOperationMetadata()
    assert op.metadata.Unpack(metadata)
    return metadata.state


def abandoned(op: lro.Operation) -> bool:
    """Done with ABORTED, reason OPERATION_ABANDONED."""
    reasons = set()
    for detail in op.error.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            reasons.add(info.reason)
    return op.done and op.error.code == grpc.StatusCode.ABORTED.value[0] and reasons == {"OPERATION_ABANDONED"}


async def until(address: str, name: str, check: Callable[[lro.Operation], bool], within_s: float) -> float:
    """Seconds until the operation, read from `address`, passes `check`."""
    started = time.monotonic()
    while not check(await operation(address, name)):
        assert time.monotonic() - started < within_s, f"{name} did not change as expected within {within_s} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def killed(server: ServeProcess) -> None:
    server.process.send_signal(signal.SIGKILL)
    await server.exited()


async def test_replicas_on_postgresql_answer_wait_and_cancel_for_each_other_and_fail_a_dead_ones_operations(
    tmp_path_factory: pytest.TempPathFactory,
    postgres_server: PostgresServer,
    demo_index: Callable[[Path], Path],
    llm: ScriptedOpenAIServer,
) -> None:
    postgres_server.start()
    env: Mapping[str, str] = serve_env(llm, RAG_DATABASE_URL=postgres_server.create_schema("operation_replicas"))
    dirs = [demo_index(tmp_path_factory.mktemp(f"ops-replica-{n}")) for n in range(2)]
    async with serve_process(dirs[0], env) as a, serve_process(dirs[1], env) as b:
        # Submitted on A, running there: B reads it, lists it, and cancels it; A stops its LLM call.
        name = await submitted(a.address)
        await eventually(lambda: len(llm.streams) == 1, within_s=10)
        assert state(await operation(b.address, name)) == ops_pb.OPERATION_STATE_RUNNING
        async with connected(b.address) as stubs:
            operations = lro_grpc.OperationsStub(stubs.channel)
            listed = await operations.ListOperations(lro.ListOperationsRequest(filter="done = false"), timeout=10)
            assert name in {o.name for o in listed.operations}
            await operations.CancelOperation(lro.CancelOperationRequest(name=name), timeout=10)
            done = await operations.WaitOperation(lro.WaitOperationRequest(name=name), timeout=10)
        assert done.done and done.error.code == grpc.StatusCode.CANCELLED.value[0]
        await asyncio.wait_for(llm.streams[0].request.connection.closed.wait(), 5)

        # Answered on A, waited for on B.
        llm.first_token_delay_s = 0.0
        name = await submitted(a.address)
        async with connected(b.address) as stubs:
            done = await lro_grpc.OperationsStub(stubs.channel).WaitOperation(lro.WaitOperationRequest(name=name), timeout=20)
        response = pb.AskResponse()
        assert done.done and done.response.Unpack(response) and "drains" in response.answer.text

        # A dies with an operation running: B fails it once A's lease has run out.
        llm.first_token_delay_s = 60.0
        name = await submitted(a.address)
        await until(b.address, name, lambda op: state(op) == ops_pb.OPERATION_STATE_RUNNING, within_s=10)
        await killed(a)
        waited_s = await until(b.address, name, abandoned, within_s=LEASE_S + 5)
        assert state(await operation(b.address, name)) == ops_pb.OPERATION_STATE_FAILED
        print(f"\na killed replica's operation failed by the other after {waited_s:.2f} s (lease {LEASE_S} s)")
    postgres_server.drop_schema("operation_replicas")


async def test_a_restarted_server_fails_the_operations_it_held_whether_killed_or_stopped(
    tmp_path: Path, demo_index: Callable[[Path], Path], llm: ScriptedOpenAIServer
) -> None:
    """One server on SQLite: killed, its operation is failed by the next start once the lease ran out; stopped
    (SIGTERM), it fails its operation itself, within the grace period, before it exits."""
    data_dir = demo_index(tmp_path / "data")
    env = serve_env(llm)
    async with serve_process(data_dir, env) as first:
        killed_name = await submitted(first.address)
        await until(first.address, killed_name, lambda op: state(op) == ops_pb.OPERATION_STATE_RUNNING, within_s=10)
        await killed(first)
    async with serve_process(data_dir, env) as second:
        await until(second.address, killed_name, abandoned, within_s=LEASE_S + 5)
        stopped_name = await submitted(second.address)
        await until(second.address, stopped_name, lambda op: state(op) == ops_pb.OPERATION_STATE_RUNNING, within_s=10)
        second.process.send_signal(signal.SIGTERM)
        assert await second.exited() == 0
    async with serve_process(data_dir, env) as third:
        stopped = await operation(third.address, stopped_name)
        assert abandoned(stopped), "failed by the server that stopped, not left for a lease to run out"
        assert state(stopped) == ops_pb.OPERATION_STATE_FAILED
