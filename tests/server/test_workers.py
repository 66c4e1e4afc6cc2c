"""`ragsvc serve` with RAG_WORKERS=2 as real processes: two workers on one port under a supervising parent.

Which worker served a call is read from the call's `ragsvc-worker` response metadata (`<index>:<pid>`). The
kernel spreads connections, not calls, over the workers (SO_REUSEPORT), so each call here goes over a channel of
its own (a local subchannel pool: grpc would otherwise share one connection between the channels of a process).
The data directory starts as a copy of the demo corpus's embedded index (`demo_index`): over the embedded engine
the workers serve read-only copies of it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from ragsvc.errors import InvalidRequest
from ragsvc.server.app import RagServer
from ragsvc.server.worker_slot import WORKER_KEY
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc
from tests.support.cli import run_cli
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.polling import eventually
from tests.support.rpc_details import details_of
from tests.support.servers import connected, running_server, serve_process, server_settings

QUESTION = "What happens on SIGTERM?"
WORKERS = {"RAG_WORKERS": "2", "RAG_GRACE_PERIOD_SECONDS": "10"}
DELTAS = (*(f"word{i} " for i in range(20)), "[#1]")
TOKEN_DELAY_S = 0.1  # a stream takes ~2 s: long enough to be in flight when SIGTERM arrives


async def worker_of_new_connection(address: str) -> tuple[str, pb.AskResponse]:
    """Ask once over a connection of its own: (the worker that answered, its answer)."""
    async with connected(address, options=[("grpc.use_local_subchannel_pool", 1)]) as stubs:
        call = stubs.rag.Ask(pb.AskRequest(query=QUESTION), timeout=30)
        response = await call
        return dict(await call.initial_metadata())[WORKER_KEY], response


async def workers_seen(address: str, *, calls: int = 40, until: int = 2) -> set[str]:
    """The workers that answered, over up to `calls` new connections (stopping once `until` were seen)."""
    seen: set[str] = set()
    for _ in range(calls):
        worker, response = await worker_of_new_connection(address)
        assert response.answer.grounded, "every worker answers from its copy of the index"
        seen.add(worker)
        if len(seen) >= until:
            break
    return seen


def pid_of(worker: str) -> int:
    return int(worker.split(":")[1])


async def test_calls_land_on_both_workers_and_index_writes_are_refused(
    tmp_path: Path, demo_index: Callable[[Path], Path]
) -> None:
    async with serve_process(demo_index(tmp_path), WORKERS) as served:
        seen = await workers_seen(served.address)
        assert {w.split(":")[0] for w in seen} == {"0", "1"}, seen
        assert served.process.pid not in {pid_of(w) for w in seen}, "the parent serves nothing itself"

        async with connected(served.address) as stubs:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stubs.index.IngestDocuments(
                    index_pb.IngestDocumentsRequest(documents=[index_pb.Document(document_id="new", content=b"hi")]),
                    timeout=10,
                )
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert details_of(caught.value).reason == "READ_ONLY_INDEX"
            assert "RAG_QDRANT_URL" in (caught.value.details() or "")
            listed = await stubs.index.ListDocuments(index_pb.ListDocumentsRequest(), timeout=10)
            assert len(listed.documents) > 0, "reads are served from the copy"
        served.process.send_signal(signal.SIGTERM)
        assert await served.exited(30) == 0


async def test_a_worker_killed_with_sigkill_is_replaced_and_none_outlives_the_parent(
    tmp_path: Path, demo_index: Callable[[Path], Path]
) -> None:
    async with serve_process(demo_index(tmp_path), WORKERS) as served:
        before = {w.split(":")[0]: pid_of(w) for w in await workers_seen(served.address)}
        assert set(before) == {"0", "1"}
        os.kill(before["1"], signal.SIGKILL)

        replaced = None
        deadline = time.monotonic() + 90  # a new worker starts (imports, embedder, its copy) in ~10-25 s here
        while replaced is None and time.monotonic() < deadline:
            try:
                worker, _ = await worker_of_new_connection(served.address)  # the survivor answers meanwhile
            except grpc.aio.AioRpcError as error:
                # A connection the kernel had queued on the killed worker's socket is reset: a client retries.
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                continue
            if worker.startswith("1:"):
                replaced = pid_of(worker)
            await asyncio.sleep(0.2)
        assert replaced is not None, "worker 1 was not replaced within 90 s"
        assert replaced != before["1"]

        served.process.kill()  # the parent itself: its workers must not outlive it
        await served.exited(10)
        workers = (before["0"], replaced)
        # Each notices within 0.5 s, then drains (nothing is in flight).
        await eventually(lambda: not any(running(pid) for pid in workers), within_s=30, every_s=0.1)


def running(pid: int) -> bool:
    """Whether `pid` is a live process (an exited one not yet reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_sigterm_drains_the_streams_in_flight_on_every_worker_and_exits_0(
    tmp_path: Path, demo_index: Callable[[Path], Path]
) -> None:
    async with ScriptedOpenAIServer(deltas=DELTAS, token_delay_s=TOKEN_DELAY_S) as llm:
        env = {**WORKERS, "RAG_GENERATOR": "openai", "OPENAI_BASE_URL": llm.base_url}
        async with serve_process(demo_index(tmp_path), env) as served:
            streams: dict[str, grpc.aio.UnaryStreamCall[pb.AskStreamRequest, pb.AskStreamResponse]] = {}
            channels = []
            try:
                for _ in range(40):  # a stream in flight on each worker, each over a connection of its own
                    channel = grpc.aio.insecure_channel(served.address, options=[("grpc.use_local_subchannel_pool", 1)])
                    channels.append(channel)
                    request = pb.AskStreamRequest(query=QUESTION)
                    stream = rag_service_pb2_grpc.RagServiceStub(channel).AskStream(request, timeout=60)
                    worker = dict(await stream.initial_metadata())[WORKER_KEY]
                    if worker in streams:
                        stream.cancel()
                        continue
                    assert (await stream.read()).WhichOneof("event") == "text_delta"
                    streams[worker] = stream
                    if len(streams) == 2:
                        break
                assert len(streams) == 2, streams.keys()

                served.process.send_signal(signal.SIGTERM)
                for worker, stream in streams.items():
                    messages = []
                    while (message := await stream.read()) is not grpc.aio.EOF:
                        messages.append(message)
                    assert messages[-1].answer.text == "".join(DELTAS), f"{worker} finished its stream"
                    assert await stream.code() == grpc.StatusCode.OK
                assert await served.exited(30) == 0
            finally:
                await asyncio.gather(*(channel.close() for channel in channels))


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({}, "holds none: index with RAG_WORKERS=1 first, or set RAG_QDRANT_URL"),
        ({"RAG_METRICS_PORT": "9464"}, "RAG_METRICS_PORT is set"),
    ],
)
async def test_bad_combinations_are_refused_at_start_in_one_line(tmp_path: Path, env: dict[str, str], says: str) -> None:
    code, _, err = await run_cli(
        "serve", env={"RAG_WORKERS": "2", "RAG_DATA_DIR": str(tmp_path), "RAG_GRPC_ADDRESS": "127.0.0.1:0", **env}
    )
    assert code == 2
    assert err.splitlines() == [err.strip()] and err.startswith("error: RAG_WORKERS: 2 processes cannot be started")
    assert says in err


async def test_one_server_binds_its_port_alone(tmp_path: Path) -> None:
    """Without RAG_WORKERS a port in use is refused (grpc would otherwise share it with SO_REUSEPORT)."""
    async with running_server(tmp_path / "first", demo_corpus=False) as first:
        second = server_settings(tmp_path / "second", demo_corpus=False)
        second = second.model_copy(update={"server": second.server.model_copy(update={"grpc_address": first.address})})
        with pytest.raises(InvalidRequest) as caught:
            await RagServer.start(second)
        assert caught.value.violations[0].field == "RAG_GRPC_ADDRESS"
