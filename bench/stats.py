"""What every benchmark reports the same way: percentiles, latency summaries, and its results file."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


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


def write_result(name: str, result: dict[str, Any], *, dated: bool = True) -> Path:
    """Write `result` to bench/results/<name>-<date>.json (or <name>.json), print it, return the path."""
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / (f"{name}-{datetime.now(UTC):%Y-%m-%d}.json" if dated else f"{name}.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written to {out}")
    return out


def machine(load_before: tuple[float, float, float]) -> dict[str, Any]:
    """What a result ran on: cores, platform, Python, and the load averages before the run (given) and now."""
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "loadavg_1_5_15_before": load_before, "loadavg_1_5_15_after": os.getloadavg()}  # fmt: skip
