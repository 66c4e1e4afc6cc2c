"""What every benchmark reports the same way: percentiles, latency summaries, answers served by the cache apart
from the others, and its results file."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# bench/results/, or BENCH_RESULTS_DIR (the smoke tests of make test write there, never over the real results).
RESULTS = Path(os.environ.get("BENCH_RESULTS_DIR") or Path(__file__).parent / "results")


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (nearest rank) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(ms: Sequence[float], quantiles: Sequence[float] = (0.5, 0.9, 0.99)) -> dict[str, Any]:
    """{"p50_ms": ..., "p90_ms": ..., "p99_ms": ..., "n": ...}, in milliseconds rounded to the microsecond."""
    result: dict[str, Any] = {}
    for q in quantiles:
        value = percentile(ms, q)
        result[f"p{round(q * 100)}_ms"] = None if value is None else round(value, 3)
    result["n"] = len(ms)
    return result


def machine(load_before: tuple[float, float, float]) -> dict[str, Any]:
    """What a benchmark ran on, and how busy the machine was before and after (other processes count too)."""
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_1_5_15_before": load_before,
        "loadavg_1_5_15_after": os.getloadavg(),
    }


def run_record(
    benchmark: str, load_before: tuple[float, float, float], settings: dict[str, Any], argv: list[str] | None
) -> dict[str, Any]:
    """How a side-by-side run was made, ahead of its numbers: the benchmark (its module), its command line (`argv`,
    or the process's), the CPUs and the load average at its start and end, its settings."""
    return {
        "benchmark": benchmark.rsplit(".", 1)[-1],
        "command": f"python -m {benchmark} " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {"cpus": os.cpu_count(), "loadavg_at_start": load_before, "loadavg_at_end": os.getloadavg()},
        "settings": settings,
    }


def write_result(name: str, result: dict[str, Any], *, dated: bool = True) -> Path:
    """Write `result` to bench/results/<name>-<date>.json (or <name>.json), print it, return the path."""
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / (f"{name}-{datetime.now(UTC):%Y-%m-%d}.json" if dated else f"{name}.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written to {out}")
    return out


@dataclass
class CacheTally:
    """Answers counted by whether the answer cache served them (`flags.cache_hit`), so that a benchmark never
    reports cache hits as if the pipeline had run."""

    hits: int = 0
    misses: int = 0

    def count(self, answer: Any) -> bool:
        """Counts a final `Answer` message; returns whether it was a cache hit."""
        hit = bool(answer.flags.cache_hit)
        self.hits += hit
        self.misses += not hit
        return hit

    def report(self, setting: str) -> dict[str, Any]:
        return {"setting": setting, "hits": self.hits, "misses": self.misses}
