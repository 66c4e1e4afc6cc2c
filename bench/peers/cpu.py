"""The machine's CPU use while a variant runs, from /proc: all of it, the part of the benchmark's own processes,
and so the part of everything else on the machine (other load that would skew the numbers)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")


def _machine_busy_s() -> float:
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / _TICKS


def process_s(pid: int) -> float:
    """CPU seconds (user and system) a process has used so far; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


@dataclass(frozen=True, slots=True)
class CpuUse:
    """Average cores busy over the interval."""

    machine: float
    ours: float

    @property
    def others(self) -> float:
        return max(0.0, self.machine - self.ours)

    def as_dict(self) -> dict[str, float]:
        return {"machine_cores": round(self.machine, 2), "ours_cores": round(self.ours, 2), "others_cores": round(self.others, 2)}


class CpuMeter:
    """Started with the benchmark's processes; `stop` tells the cores used since."""

    def __init__(self, pids: Iterable[int]) -> None:
        self._pids = [os.getpid(), *pids]
        self._started = time.perf_counter()
        self._machine = _machine_busy_s()
        self._ours = sum(process_s(pid) for pid in self._pids)

    def stop(self) -> CpuUse:
        elapsed = time.perf_counter() - self._started
        machine = (_machine_busy_s() - self._machine) / elapsed
        ours = (sum(process_s(pid) for pid in self._pids) - self._ours) / elapsed
        return CpuUse(machine, ours)
