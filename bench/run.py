"""`make bench`: every benchmark in bench/, one after the other (not part of `make test`; tests/bench/test_entry_points.py
runs each on a tiny setting). About 20 minutes on 2 cores."""

import sys

from bench import ask_latency, filters, generation, ingest, retrieval, shared_state, soak

if __name__ == "__main__":
    ask_latency.main([])
    # Embedded defaults against PostgreSQL + Redis, side by side (about a minute).
    shared_state.main()
    generation.main([])
    # Ingest with the bundled embedder: 40 of the PostgreSQL pages of make eval (~400 chunks) and the demo corpus,
    # over gRPC and in process (about 4 minutes on 2 cores).
    ingest.main(["--pages", "40"])
    # Bounded: 10k and 100k chunks on both engines plus recall on real embeddings (about 9.5 minutes on 2 cores).
    retrieval.main([])
    # Metadata filter expressions on the embedded engine at 10k chunks (about 10 s).
    filters.main([])
    # Bounded: 200 concurrent AskStream clients, 60 s per profile (about 2.5 minutes); exit 1 on unexpected errors.
    sys.exit(soak.main([]))
