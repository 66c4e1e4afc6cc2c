"""The LLM client alone, side by side: what one streamed answer costs ragsvc's client (the generate stage's
`attempt_stream`: model check, request, SSE parsing, merged deltas, deadline) on the src of your choice, beside
the hand-written baseline's loop (bench/peers/baseline_peer.py: sync httpx, `iter_lines`, one `json.loads` per
event). Not part of `make bench`.

    python -m bench.llm_client --generations 300 --rounds 5 baseline /tmp/main/src src

Every variant is a process of its own (a src/ directory put first on its PYTHONPATH; `baseline` needs none),
all talking to bench-peers' scripted LLM (bench/peers/llm_server.py: an instant model, 24 deltas, in its own
process) with the bench job's prompt (~5 passages of 120 words). The variants take turns, in a new order each
round, for `--generations` answers each. Per variant and round: the median CPU time of the variant's process
per answer (process time, so the LLM server and the machine's other load do not count), and the p50 of the
time to the first text and to the end of the stream (wall time, so they move with the load: compare them side
by side only). Results: bench/results/llm-client-<label>-<date>.json, and a table on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

from bench.peers.common import Passage, corpus
from bench.peers.workers import ROOT, LLMServer, job_config, python_path
from bench.stats import run_record, write_result

MEASURES = ("cpu_ms", "first_text_ms", "total_ms")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variants", nargs="+", help="`baseline`, or a src/ directory")
    parser.add_argument("--generations", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--label", default="run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        serve(args.child, args.variants[0])
        return
    load_before = os.getloadavg()
    llm = LLMServer()
    children: dict[str, subprocess.Popen[str]] = {}
    measured: dict[str, dict[str, list[float]]] = {name: {m: [] for m in MEASURES} for name in args.variants}
    try:
        for name in args.variants:
            children[name] = subprocess.Popen(
                [sys.executable, "-m", "bench.llm_client", "--child", llm.base_url, name],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": python_path(None if name == "baseline" else name)},
            )
        for child in children.values():
            ask(child, args.warmup)
        for number in range(args.rounds):
            for name in random.Random(number).sample(list(children), len(children)):
                answers = ask(children[name], args.generations)
                for measure in MEASURES:
                    measured[name][measure].append(statistics.median(answer[measure] for answer in answers))
    finally:
        for child in children.values():
            child.kill()
            child.wait()
        llm.close()
    medians = {name: {m: statistics.median(v) for m, v in ms.items()} for name, ms in measured.items()}
    result = {
        **run_record("bench.llm_client", load_before, vars(args), argv),
        "per_round_median_ms": measured,
        "median_over_rounds_ms": medians,
    }
    write_result(f"llm-client-{args.label}", result)
    print(f"{'variant':40} " + " ".join(f"{m:>22}" for m in MEASURES), file=sys.stderr)
    for name, values in measured.items():
        cells = [f"{statistics.median(v):7.3f} [{min(v):.3f}-{max(v):.3f}]" for v in values.values()]
        print(f"{name:40} " + " ".join(f"{c:>22}" for c in cells), file=sys.stderr)


def ask(child: subprocess.Popen[str], generations: int) -> list[dict[str, float]]:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(f"{generations}\n")
    child.stdin.flush()
    answers: list[dict[str, float]] = json.loads(child.stdout.readline())
    return answers


def serve(base_url: str, variant: str) -> None:
    """A variant's process: for each count read from stdin, that many answers, their measures as a JSON line."""
    prompts = list(_prompts())
    stream = _baseline(base_url) if variant == "baseline" else _ragsvc(base_url)
    for line in sys.stdin:
        answers = []
        for number in range(int(line)):
            system, user = prompts[number % len(prompts)]
            cpu, started = time.process_time(), time.perf_counter()
            first = stream(system, user)
            ended = time.perf_counter()
            answers.append(
                {
                    "cpu_ms": (time.process_time() - cpu) * 1000,
                    "first_text_ms": (first - started) * 1000,
                    "total_ms": (ended - started) * 1000,
                }
            )
        print(json.dumps(answers), flush=True)


# Streams one answer to (system, user) and returns when its first text arrived (time.perf_counter).
Stream = Callable[[str, str], float]


def _prompts() -> Iterator[tuple[str, str]]:
    """The bench job's messages for a few questions: its system prompt, and 5 passages in its user template."""
    config = job_config(100, "")
    passages: list[Passage] = corpus(100, config.seed)
    for start in range(0, 50, 5):
        blocks = [config.passage_text(n, p.id, p.name, p.text) for n, p in enumerate(passages[start : start + 5], 1)]
        yield config.system, config.user_message(f"what about {passages[start].name}?", blocks)


def _baseline(base_url: str) -> Stream:
    """The hand-written baseline's LLM loop, as in bench/peers/baseline_peer.py."""
    import httpx

    http = httpx.Client(base_url=base_url, timeout=30)

    def stream(system: str, user: str) -> float:
        first = 0.0
        body = {
            "model": "bench-llm",
            "temperature": 0.1,
            "stream": True,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        with http.stream("POST", "/chat/completions", json=body) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choices = json.loads(line[6:]).get("choices") or [{}]
                if choices[0].get("delta", {}).get("content"):
                    first = first or time.perf_counter()
        return first

    return stream


def _ragsvc(base_url: str) -> Stream:
    """ragsvc's generate stage streaming one attempt (`GenerateStage.attempt_stream`) on an event loop."""
    import asyncio

    from ragsvc.answering.deadlines import StageDeadline
    from ragsvc.answering.generate import GenerateStage
    from ragsvc.domain import ChatMessage, GenerationRequest, Role
    from ragsvc.generation.fallback import Attempt
    from ragsvc.generation.openai_compat import OpenAICompatGenerator
    from ragsvc.generation.repetition import RepetitionGuard

    loop = asyncio.new_event_loop()
    generator = OpenAICompatGenerator(base_url, model="bench-llm")
    attempt = Attempt(generator, "bench-llm", degraded=False)

    async def first_text(system: str, user: str) -> float:
        messages = (ChatMessage(Role.SYSTEM, system), ChatMessage(Role.USER, user))
        request = GenerationRequest(messages=messages, query=user, context=(), model="bench-llm", max_tokens=512, temperature=0.1)
        deadline = StageDeadline("generation", loop.time() + 30, "the bench's 30 s")
        first = 0.0
        async for delta in GenerateStage.attempt_stream(attempt, request, deadline, RepetitionGuard()):
            if delta.text:
                first = first or time.perf_counter()
        return first

    def stream(system: str, user: str) -> float:
        return loop.run_until_complete(first_text(system, user))

    return stream


if __name__ == "__main__":
    main()
