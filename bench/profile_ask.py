"""Where an answer's time goes, to the function: the peer benchmark's job (`bench.peers`: the token-hashing
embedder, the scripted instant LLM, top 5, one LLM call per question) served by a real ragsvc server process,
`--passages` passages ingested, then questions asked over gRPC (AskStream) in two phases:

- timed: `--questions` questions, nothing attached; per stage p50 as `make bench-peers` splits the overhead
  (gRPC and client, retrieval engine, budget and prompt, LLM client, validation), from the server's own stage
  timings and the LLM server's log. Every prompt the LLM received is checked against the exact top 5.
- profiled: `--questions` more while py-spy (attached to the server process by pid, sampling at `--rate` Hz,
  idle threads left out) records it. From its stacks: a flame graph (SVG) and the top ten functions by own
  time and by total time.

With `--in-process` the same job runs through the answering service without gRPC (bench-peers' in-process
variant, `bench.peers.ragsvc_inprocess`, in a worker process of its own, which py-spy samples instead), so that
the two profiles side by side show where the gRPC hop's time goes.

    python -m bench.profile_ask --name before [--passages 10000] [--questions 300] [--warmup 30] [--rate 200]
        [--in-process]

Writes docs/profile/<name>.svg, docs/profile/<name>.md (the stage table and the top tens) and
docs/profile/<name>.json (all of it, with the machine and the settings).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.peers.common import corpus, queries
from bench.peers.ragsvc_variant import JOB_SETTINGS, RagsvcInProcess, RagsvcServer
from bench.peers.run import per_variant
from bench.peers.workers import ROOT, LLMServer, Reference, job_config
from bench.stats import machine
from ragsvc.v1 import rag_service_pb2 as pb

OUT = ROOT / "docs" / "profile"
# The server's event loop runs in the main thread: every stage of an answer runs there.
MAIN_THREAD = "MainThread"
TOP = 10
ANSWER_END = "[#1]."  # how the scripted LLM ends every answer (bench/peers/llm_server.py)
# A py-spy frame with --function: "name (path/to/file.py:first_line)".
RAGSVC_FILE = re.compile(r"\(ragsvc/[^)]*\)$")
_FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", required=True, help="the profile's name: docs/profile/<name>.{svg,md,json}")
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=300, help="per phase (timed, then profiled)")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--in-process", action="store_true", help="the answering service without gRPC")
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    load_before = os.getloadavg()
    llm = LLMServer()
    server: RagsvcServer | RagsvcInProcess | None = None
    try:
        config = job_config(args.passages, llm.base_url)
        reference = Reference(config, corpus(args.passages, config.seed))
        if args.in_process:
            server = RagsvcInProcess(config)
            index_s = server.ready["index_s"]
        else:
            server = RagsvcServer(config)
            index_s = server.ingest(reference.passages)
        server.ask(queries(reference.passages, args.warmup, seed=1))
        llm.drain_log()

        asked = queries(reference.passages, args.questions, seed=2)
        expected = [reference.messages_sha256(q, reference.top_ids(q, t)) for q, t in asked]
        results = server.ask(asked)
        # A question the answerability gate refuses makes no LLM call: the stages are over the answered ones.
        answered = [i for i, r in enumerate(results) if r["answer"].endswith(ANSWER_END)]
        timed = per_variant([results[i] for i in answered], llm.drain_log(), [expected[i] for i in answered], cpu={})
        timed.pop("digests")
        timed["refused"] = len(results) - len(answered)
        if isinstance(server, RagsvcServer):
            timed["answer_bytes"] = answer_bytes(server, asked[:20])

        with tempfile.TemporaryDirectory(prefix="profile-ask-") as scratch:
            raw = Path(scratch) / "stacks.txt"
            stacks = record(spy, server, raw, args.rate, queries(reference.passages, args.questions, seed=3))
        llm.drain_log()
    finally:
        if server is not None:
            server.close()
        llm.close()
    loop_stacks, others = by_thread(stacks)
    profile = Profile.of(loop_stacks)
    result = {
        "benchmark": "profile_ask",
        "command": "python -m bench.profile_ask " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(load_before),
        "settings": {**vars(args), "ragsvc_job_settings": JOB_SETTINGS, "py_spy": "--function, no --idle"},
        "index_s": round(index_s, 1),
        "timed": timed,
        "profile": {
            "thread": MAIN_THREAD,
            "samples": profile.samples,
            "top_own": profile.top("own"),
            "top_total": profile.top("total"),
            "other_threads": others,
        },
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (OUT / f"{args.name}.md").write_text(markdown(args.name, result))
    (OUT / f"{args.name}.svg").write_text(flame_graph(loop_stacks, f"ragsvc AskStream, {args.passages} passages: {args.name}"))
    print(markdown(args.name, result))
    print(f"written to {OUT}/{args.name}.{{svg,md,json}}")


def answer_bytes(server: RagsvcServer, asked: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """What the final answer message weighs on the wire (median over `asked`, untimed Asks), and how much of it
    is its citations' full texts (Citation.text)."""
    sizes, texts = [], []
    for query, tenant in asked:
        answer = server.rag.Ask(pb.AskRequest(query=query, tenant_id=tenant), timeout=30).answer
        sizes.append(answer.ByteSize())
        texts.append(sum(len(c.text.encode()) for c in answer.citations))
    return {"answer_p50": statistics.median(sizes), "citation_text_p50": statistics.median(texts), "n": len(sizes)}


def record(
    spy: str, server: RagsvcServer | RagsvcInProcess, out: Path, rate: int, asked: Sequence[tuple[str, str]]
) -> Counter[str]:
    """Ask `asked` while py-spy records the server; the collapsed stacks it saw, with their sample counts."""
    command = [
        spy,
        "record",
        "--pid",
        str(server.pid),
        "--rate",
        str(rate),
        "--function",
        "--threads",
        "--format",
        "raw",
        "--output",
        str(out),
    ]
    spying = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # py-spy attaches and starts sampling
    if spying.poll() is not None:
        raise RuntimeError(f"py-spy did not start: {spying.stderr.read()}")  # type: ignore[union-attr]
    server.ask(asked)
    spying.send_signal(signal.SIGINT)  # py-spy writes what it recorded on SIGINT
    if spying.wait(60) != 0 or not out.exists():
        raise RuntimeError(f"py-spy failed: {spying.stderr.read()}")  # type: ignore[union-attr]
    stacks: Counter[str] = Counter()
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            stacks[stack] += int(count)
    return stacks


def by_thread(stacks: Counter[str]) -> tuple[Counter[str], dict[str, dict[str, Any]]]:
    """The main thread's stacks (its thread frame dropped), and for every other thread (pool threads by pool)
    its samples and the function it was most often in (a pool waiting for work shows as `_worker`)."""
    loop: Counter[str] = Counter()
    others: dict[str, Counter[str]] = {}
    for stack, count in stacks.items():
        thread, _, rest = stack.partition(";")
        name = re.sub(r"_\d+$", "", thread.partition(": ")[2]) or "unnamed"
        if name == MAIN_THREAD:
            if rest:
                loop[rest] += count
        elif rest:
            others.setdefault(name, Counter())[function(rest.rsplit(";", 1)[-1])] += count
    return loop, {
        name: {"samples": sum(leaves.values()), "most_in": leaves.most_common(1)[0][0]} for name, leaves in sorted(others.items())
    }


@dataclass
class Profile:
    """Samples by function: `own` where the function itself ran (the stack's leaf), `total` where it was on
    the stack (counted once per sample however deep it recurses)."""

    samples: int
    own: Counter[str] = field(default_factory=Counter)
    total: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of(cls, stacks: Counter[str]) -> Profile:
        profile = cls(samples=sum(stacks.values()))
        for stack, count in stacks.items():
            frames = [function(frame) for frame in stack.split(";")]
            profile.own[frames[-1]] += count
            for name in set(frames):
                profile.total[name] += count
        return profile

    def top(self, by: str) -> list[dict[str, Any]]:
        """The TOP functions by `by`; by total time only ragsvc's own (the event loop's frames hold every sample)."""
        counts: Counter[str] = getattr(self, by)
        names = [name for name, _ in counts.most_common() if by == "own" or RAGSVC_FILE.search(name)][:TOP]
        return [
            {"function": name, "own_pct": self.pct(self.own[name]), "total_pct": self.pct(self.total[name])} for name in names
        ]

    def pct(self, count: int) -> float:
        return round(100 * count / max(1, self.samples), 1)


def function(frame: str) -> str:
    """`name (file)` of a py-spy frame: the file relative to site-packages or the repository."""
    found = _FRAME.match(frame)
    if found is None:
        return frame
    path = found["file"]
    for root in ("site-packages/", f"{ROOT}/src/", f"{ROOT}/"):
        path = path.split(root, 1)[-1]
    return f"{found['name']} ({path})"


def markdown(name: str, result: dict[str, Any]) -> str:
    timed = result["timed"]
    where = "in process (no gRPC)" if result["settings"]["in_process"] else "over gRPC (AskStream)"
    lines = [
        f"# Profile `{name}`: where an answer's time goes",
        "",
        f"`{result['command']}`, {where}, {result['machine']['cpus']} CPUs, load {result['machine']['loadavg_1_5_15_before']}"
        f" before. The bench-peers job at {result['settings']['passages']} passages; timed phase"
        f" {timed['n']} answered questions ({timed['refused']} refused by the answerability gate; prompts as the"
        f" exact top 5: {timed['prompts_as_exact_top5']}), then"
        f" {result['profile']['samples']} py-spy samples over {result['settings']['questions']} more.",
        "",
        "| stage (timed phase) | p50 ms | p90 ms |",
        "|---|---|---|",
    ]
    rows = {
        "overhead (end to end - embedding - LLM server)": timed["overhead"],
        "first-token overhead": timed["ttft_overhead"],
        **timed["stages"],
    }
    lines += [f"| {stage} | {s['p50_ms']:.3f} | {s['p90_ms']:.3f} |" for stage, s in rows.items()]
    if "answer_bytes" in timed:
        size = timed["answer_bytes"]
        lines += [
            "",
            f"The final answer message: {size['answer_p50']:.0f} bytes (median of {size['n']} Asks), of"
            f" which {size['citation_text_p50']:.0f} are its citations' full texts.",
        ]
    profile = result["profile"]
    lines += [
        "",
        f"The tables and the flame graph cover the event loop thread of ragsvc's process ({profile['thread']},"
        f" {profile['samples']} samples, idle time left out). Other threads:"
        + "".join(
            f" {name} {t['samples']} samples, mostly in `{t['most_in']}`;" for name, t in profile["other_threads"].items()
        ).rstrip(";")
        + ".",
    ]
    for by, title in (("top_own", "own time"), ("top_total", "total time, ragsvc's functions")):
        lines += ["", f"Top ten by {title} (% of samples):", "", "| function | own % | total % |", "|---|---|---|"]
        lines += [f"| `{r['function']}` | {r['own_pct']} | {r['total_pct']} |" for r in result["profile"][by]]
    return "\n".join(lines) + "\n"


def flame_graph(stacks: Counter[str], title: str, width: int = 1200, row: int = 16) -> str:
    """An SVG flame graph of collapsed `stacks` (root at the bottom); hover a frame for its name and share."""
    tree: dict[str, Any] = {"count": 0, "children": {}}
    for stack, count in stacks.items():
        node = tree
        node["count"] += count
        for frame in stack.split(";"):
            node = node["children"].setdefault(function(frame), {"count": 0, "children": {}})
            node["count"] += count
    depth = _depth(tree)
    height = (depth + 2) * row
    rects: list[str] = []
    scale = width / max(1, tree["count"])

    def draw(node: dict[str, Any], name: str, x: float, level: int) -> None:
        w = node["count"] * scale
        if w < 0.3:
            return
        y = height - (level + 1) * row
        share = 100 * node["count"] / tree["count"]
        hue = 20 + zlib.crc32(name.encode()) % 40  # warm colours, stable per name
        label = html.escape(name)
        text = html.escape(name[: int(w / 7)]) if w > 30 else ""
        rects.append(
            f"<g><title>{label} ({node['count']} samples, {share:.1f}%)</title>"
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" fill="hsl({hue},85%,60%)"/>'
            f'<text x="{x + 3:.1f}" y="{y + row - 4}">{text}</text></g>'
        )
        for child_name, child in sorted(node["children"].items()):
            draw(child, child_name, x, level + 1)
            x += child["count"] * scale

    draw(tree, "all", 0.0, 0)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" '
        f'font-size="11"><text x="4" y="12">{html.escape(title)}</text>' + "".join(rects) + "</svg>\n"
    )


def _depth(node: dict[str, Any]) -> int:
    return 1 + max((_depth(child) for child in node["children"].values()), default=0)


if __name__ == "__main__":
    main()
