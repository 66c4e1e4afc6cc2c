"""Child process of a background index build: `python -m ragsvc.retrieval.edge_optimize SHARD_DIR`.

Builds the HNSW (and sparse) indexes of a copy of a qdrant-edge shard. `EdgeShard.optimize()` holds the GIL for
its whole duration, so the serving process runs it here, at low priority, and swaps the result in (see edge.py).
"""

from __future__ import annotations

import os
import sys
import time

import qdrant_edge as qe


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m ragsvc.retrieval.edge_optimize SHARD_DIR", file=sys.stderr)
        return 2
    if hasattr(os, "nice"):
        os.nice(10)  # serving queries comes first
    started = time.perf_counter()
    shard = qe.EdgeShard.load(argv[0])
    try:
        shard.optimize()
        shard.flush()
    finally:
        shard.close()
    print(f"optimized {argv[0]} in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
