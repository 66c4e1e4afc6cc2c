"""ragsvc's throughput with the instant LLM against the raw grpc.aio ceilings (`ceilings`), at concurrency 1, 8
and 32. Run by `bench.peers.run`, in a process of its own; prints its results as JSON.

    python -m bench.peers.throughput SIZE [--rag ADDRESS --llm LLM_BASE_URL] [--scale-out] [--rounds 3] [--seconds 4]

With `--rag` (a ragsvc server already serving the job's corpus of SIZE passages through the scripted LLM at
`--llm`): Asks per second against echo unaries per second, and streamed tokens per second (AskStream with a
200-token answer) against raw stream messages per second, over one channel. Each point alternates ragsvc and
the ceiling `--rounds` times.

With `--scale-out`: Asks per second of ragsvc with RAG_WORKERS=1 and with RAG_WORKERS=2 (its own servers over a
copy of one index of the corpus: the two workers serve read-only copies of the embedded engine's shard) against
the raw echo ceiling in one process and in two processes sharing a port with SO_REUSEPORT, as the workers do. The
kernel spreads connections, not calls, over the processes, so every target gets `concurrency` connections and
the calls go round them. Each round runs the four targets in turn, the order reversed every other round. Without
`--llm` it starts the scripted LLM itself, so this part runs alone:

    python -m bench.peers.throughput 2000 --scale-out --rounds 2 --seconds 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc

from bench.peers.ceilings import ECHO, STREAM, Load, closed_loop
from bench.peers.common import corpus, queries
from bench.peers.cpu import CpuMeter
from bench.peers.ragsvc_variant import RagsvcServer, copy_index
from bench.peers.workers import ROOT, LLMControl, LLMServer, job_config
from ragsvc.server.worker_slot import WORKER_KEY
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

STREAM_TOKENS = 200
CONCURRENCY = (1, 8, 32)
WORKERS = (1, 2)  # RAG_WORKERS of the scale-out servers, and processes of its ceilings

Call = Callable[[int], Awaitable[int]]


class Ceilings:
    """`processes` raw ceiling servers on one port: the first picks it, the others share it (SO_REUSEPORT)."""

    def __init__(self, processes: int = 1) -> None:
        self._processes: list[subprocess.Popen[str]] = []
        self.address = self._start(0)
        for _ in range(processes - 1):
            self._start(int(self.address.rsplit(":", 1)[1]))

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self._processes]

    def close(self) -> None:
        for process in self._processes:
            process.terminate()
            process.wait(10)

    def _start(self, port: int) -> str:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.peers.ceilings", "--messages", str(STREAM_TOKENS), "--port", str(port)],
            stdout=subprocess.PIPE, cwd=ROOT, text=True,
        )  # fmt: skip
        self._processes.append(process)
        return process.stdout.readline().strip()  # type: ignore[union-attr]


def ask_requests(size: int) -> list[pb.AskRequest]:
    return [pb.AskRequest(query=q, tenant_id=t) for q, t in queries(corpus(size), 1000, seed=5)]


async def measure(rag_address: str, llm: LLMControl, size: int, rounds: int, seconds: float, pids: list[int]) -> dict[str, Any]:
    ceiling = Ceilings()
    asks = ask_requests(size)
    streams = [pb.AskStreamRequest(query=a.query, tenant_id=a.tenant_id) for a in asks]
    payload = asks[0].SerializeToString()
    out: dict[str, Any] = {"unary": [], "stream": [], "stream_tokens": STREAM_TOKENS}
    try:
        async with (
            grpc.aio.insecure_channel(rag_address) as rag_channel,
            grpc.aio.insecure_channel(ceiling.address) as raw_channel,
        ):
            rag = rag_service_pb2_grpc.RagServiceStub(rag_channel)
            echo = raw_channel.unary_unary(ECHO)
            raw_stream = raw_channel.unary_stream(STREAM)

            async def ask(n: int) -> int:
                await rag.Ask(asks[n % len(asks)], timeout=30)
                return 1

            messages = {"calls": 0, "text_deltas": 0}

            async def ask_stream(n: int) -> int:
                """The LLM's STREAM_TOKENS tokens when the whole answer arrived, however ragsvc grouped them into
                messages (what arrived in one network read is one delta: `ragsvc.generation.transport`)."""
                text = []
                async for event in rag.AskStream(streams[n % len(streams)], timeout=30):
                    if event.HasField("text_delta"):
                        text.append(event.text_delta)
                messages["calls"] += 1
                messages["text_deltas"] += len(text)
                return STREAM_TOKENS if "".join(text).endswith("[#1].") else 0

            async def echo_once(n: int) -> int:
                await echo(payload, timeout=30)
                return 1

            async def stream_once(n: int) -> int:
                return len([m async for m in raw_stream(payload, timeout=30)])

            measured = [*ceiling.pids, *pids]
            for concurrency in CONCURRENCY:
                out["unary"].append(await _alternate(ask, echo_once, concurrency, rounds, seconds, measured, llm))
            llm.script(STREAM_TOKENS)
            try:
                for concurrency in CONCURRENCY:
                    out["stream"].append(await _alternate(ask_stream, stream_once, concurrency, rounds, seconds, measured, llm))
            finally:
                llm.script()
            out["ragsvc_text_deltas_per_stream"] = round(messages["text_deltas"] / max(1, messages["calls"]), 1)
    finally:
        ceiling.close()
    return out


async def scale_out(
    llm: LLMControl, size: int, rounds: int, seconds: float, pids: list[int], index: Path | None = None
) -> dict[str, Any]:
    """Asks/s of ragsvc with RAG_WORKERS 1 and 2 against the echo ceiling in 1 and 2 processes (module docstring).
    `index`: a closed data directory holding the job's corpus, copied instead of ingesting it again."""
    config = job_config(size, llm.base_url)
    asks = ask_requests(size)
    payload = asks[0].SerializeToString()
    out: dict[str, Any] = {"connections": "one per caller", "workers": list(WORKERS), "points": []}
    with tempfile.TemporaryDirectory(prefix="ragsvc-scale-out-") as root, contextlib.ExitStack() as stack:
        data_dirs = {workers: Path(root) / f"workers-{workers}" for workers in WORKERS}
        if index is not None:
            copy_index(index, data_dirs[1])
        else:
            indexing = RagsvcServer(config, data_dir=data_dirs[1])
            try:
                out["index_s"] = round(indexing.ingest(corpus(size)), 1)
            finally:
                indexing.close()  # the shard is flushed and closed: a whole copy can be taken
        for workers in WORKERS[1:]:
            copy_index(data_dirs[1], data_dirs[workers])
        targets: dict[str, tuple[str, list[int]]] = {}
        for workers in WORKERS:
            server = stack.enter_context(contextlib.closing(RagsvcServer(config, data_dir=data_dirs[workers], workers=workers)))
            targets[f"ragsvc_workers_{workers}"] = (server.address, process_tree(server.pid))
        for processes in WORKERS:
            ceilings = stack.enter_context(contextlib.closing(Ceilings(processes)))
            targets[f"ceiling_{processes}_processes"] = (ceilings.address, ceilings.pids)
        measured = [pid for _, tree in targets.values() for pid in tree] + pids
        for concurrency in CONCURRENCY:
            async with _calls(targets, concurrency, asks, payload) as (calls, spread):
                point, runs = await _interleaved(calls, concurrency, rounds, seconds, measured, llm)
            point["connections_per_worker"] = spread
            point["ratios_median"] = {
                f"{ours}/{raw}": round(statistics.median(_ratios(runs[ours], runs[raw])), 3)
                for ours in targets
                if ours.startswith("ragsvc")
                for raw in targets
                if raw.startswith("ceiling")
            }
            print(f"scale-out c={concurrency}: {point['ratios_median']}", file=sys.stderr, flush=True)
            out["points"].append(point)
    return out


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (a ragsvc parent and its worker processes), from /proc."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(child) for child in (task / "children").read_text().split()]
    return [pid, *(descendant for child in children for descendant in process_tree(child))]


@contextlib.asynccontextmanager
async def _calls(
    targets: Mapping[str, tuple[str, list[int]]], concurrency: int, asks: list[pb.AskRequest], payload: bytes
) -> AsyncIterator[tuple[dict[str, Call], dict[str, dict[str, int]]]]:
    """Per target, a call over `concurrency` connections of its own, taken in turn: an Ask of ragsvc, an echo of
    a ceiling; and how the kernel spread each ragsvc target's connections over its workers (by the
    `ragsvc-worker` metadata of a first Ask on each; a single server sends none)."""
    calls: dict[str, Call] = {}
    spread: dict[str, dict[str, int]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for name, (address, _) in targets.items():
            channels = [
                await stack.enter_async_context(
                    grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
                )
                for _ in range(concurrency)
            ]
            if name.startswith("ragsvc"):
                stubs = [rag_service_pb2_grpc.RagServiceStub(channel) for channel in channels]
                calls[name] = _ask_over(stubs, asks)
                for stub in stubs:
                    first = stub.Ask(asks[0], timeout=30)
                    worker = dict(await first.initial_metadata()).get(WORKER_KEY, "single process")
                    spread.setdefault(name, {}).setdefault(str(worker), 0)
                    spread[name][str(worker)] += 1
                    await first
            else:
                calls[name] = _echo_over([channel.unary_unary(ECHO) for channel in channels], payload)
        yield calls, spread


def _ask_over(stubs: list[rag_service_pb2_grpc.RagServiceStub], asks: list[pb.AskRequest]) -> Call:
    async def ask(n: int) -> int:
        await stubs[n % len(stubs)].Ask(asks[n % len(asks)], timeout=30)
        return 1

    return ask


def _echo_over(echoes: list[grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]], payload: bytes) -> Call:
    async def echo(n: int) -> int:
        await echoes[n % len(echoes)](payload, timeout=30)
        return 1

    return echo


async def _alternate(
    ours: Call, raw: Call, concurrency: int, rounds: int, seconds: float, pids: list[int], llm: LLMControl
) -> dict[str, Any]:
    point, runs = await _interleaved({"ragsvc": ours, "ceiling": raw}, concurrency, rounds, seconds, pids, llm)
    ratios = _ratios(runs["ragsvc"], runs["ceiling"])
    point["ratio_per_round"] = [round(r, 3) for r in ratios]
    point["ratio_median"] = round(statistics.median(ratios), 3)
    print(f"throughput c={concurrency}: ratio {point['ratio_median']}", file=sys.stderr, flush=True)
    return point


def _ratios(ours: list[Load], raw: list[Load]) -> list[float]:
    """Units per second of `ours` over `raw`, round by round."""
    return [a.units_per_s / b.units_per_s for a, b in zip(ours, raw, strict=True)]


async def _interleaved(
    calls: Mapping[str, Call], concurrency: int, rounds: int, seconds: float, pids: list[int], llm: LLMControl
) -> tuple[dict[str, Any], dict[str, list[Load]]]:
    """`rounds` closed loops of each call in turn (the order reversed every other round), after a warm-up each;
    the point (per call: calls and units per second, errors, CPU) and the loads."""
    for call in calls.values():
        await closed_loop(call, concurrency, 0.5)  # warm-up
    runs: dict[str, list[Load]] = {name: [] for name in calls}
    cpu: dict[str, list[dict[str, float]]] = {name: [] for name in calls}
    for number in range(rounds):
        for name in list(calls) if number % 2 == 0 else list(reversed(calls)):
            meter = CpuMeter(pids)
            runs[name].append(await closed_loop(calls[name], concurrency, seconds))
            cpu[name].append(meter.stop().as_dict())
        llm.drain_log()
    point: dict[str, Any] = {"concurrency": concurrency}
    for name, loads in runs.items():
        point[name] = {
            "calls_per_s": [round(load.calls_per_s, 1) for load in loads],
            "units_per_s": [round(load.units_per_s, 1) for load in loads],
            "errors": sum(load.errors for load in loads),
            "cpu": cpu[name],
        }
    return point, runs


@contextlib.contextmanager
def _llm(base_url: str | None) -> Iterator[tuple[LLMControl, list[int]]]:
    """The scripted LLM at `base_url`, or one started here (and its pid, whose CPU counts as ours)."""
    if base_url:
        yield LLMControl(base_url), []
        return
    server = LLMServer()
    try:
        yield server, [server.pid]
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("size", type=int, help="passages of the job's corpus")
    parser.add_argument("--rag", help="a running ragsvc serving the corpus: its Ask and AskStream against the ceilings")
    parser.add_argument("--llm", help="the scripted LLM's base URL (default with --scale-out only: start one)")
    parser.add_argument("--scale-out", action="store_true", help="RAG_WORKERS 1 and 2 against 1- and 2-process ceilings")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--pids", type=int, nargs="*", default=[], help="processes whose CPU counts as ours")
    parser.add_argument("--index", type=Path, help="with --scale-out: a closed data directory of the corpus to copy")
    args = parser.parse_args()
    if args.rag and not args.llm:
        parser.error("--rag needs --llm, the LLM that server answers with")
    result: dict[str, Any] = {}
    with _llm(args.llm) as (llm, started):
        if args.rag:
            result = asyncio.run(measure(args.rag, llm, args.size, args.rounds, args.seconds, args.pids))
        if args.scale_out:
            pids = args.pids + started
            result["scale_out"] = asyncio.run(scale_out(llm, args.size, args.rounds, args.seconds, pids, args.index))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
