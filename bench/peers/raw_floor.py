"""The latency floor of a call that does no work: bench-peers' caller (grpc's sync client, single-threaded
unary-stream: `CALLER_OPTIONS`) against the ceiling server (`bench.peers.ceilings`, raw bytes, no protobuf), one
call at a time. A unary echo, and streams of as many messages as an answer sends (AskStream in the bench job:
~7 text deltas, then the answer): what any Python pipeline behind grpc.aio pays before its own work.

    python -m bench.peers.raw_floor [--messages 1 8 9] [--calls 1500] [--warmup 200]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable

import grpc

from bench.peers.ceilings import ECHO, STREAM
from bench.peers.ragsvc_variant import CALLER_OPTIONS
from bench.stats import summary

REQUEST = b"\n" + b"x" * 120  # about an AskStreamRequest of the job's questions


def timed(call: Callable[[], object], calls: int) -> list[float]:
    """The time of each of `calls` sequential calls, in ms."""
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, nargs="+", default=[1, 8, 9], help="messages per stream")
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args(argv)
    for messages in args.messages:
        server = subprocess.Popen(
            [sys.executable, "-m", "bench.peers.ceilings", "--messages", str(messages)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert server.stdout is not None
            measure(server.stdout.readline().strip(), messages, args.calls, args.warmup)
        finally:
            server.terminate()
            server.wait()


def measure(address: str, messages: int, calls: int, warmup: int) -> None:
    """Print the p50 and p90 of a unary echo and of a stream of `messages` from the ceiling server at `address`."""
    with grpc.insecure_channel(address, options=CALLER_OPTIONS) as channel:
        echo = channel.unary_unary(ECHO)
        stream = channel.unary_stream(STREAM)
        kinds: dict[str, Callable[[], object]] = {
            "unary echo": lambda: echo(REQUEST),
            f"stream of {messages}": lambda: list(stream(REQUEST)),
        }
        for call in kinds.values():
            for _ in range(warmup):
                call()
        for name, call in kinds.items():
            times = summary(timed(call, calls), (0.5, 0.9))
            print(f"{name}: p50 {times['p50_ms']:.3f} ms, p90 {times['p90_ms']:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
