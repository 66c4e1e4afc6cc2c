"""One worker's place among several server processes (RAG_WORKERS > 1, see `workers`): its number, its copy of
the embedded index, and the interceptors that tell the caller which worker served it and keep a read-only copy
read-only."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

from ragsvc.errors import ReadOnlyIndex
from ragsvc.server.interceptors import INDEX_PREFIX, CallInput, Interceptor

WORKER_KEY = "ragsvc-worker"  # response metadata: which worker served the call, "<index>:<pid>"
INDEX_WRITES = frozenset(INDEX_PREFIX + name for name in ("IngestDocuments", "SubmitIngest", "DeleteDocument", "UploadDocument"))


@dataclass(frozen=True, slots=True)
class WorkerSlot:
    """One worker's place: its number, and the directory of its read-only copy of the embedded engine's shards
    (None when the vectors are on a Qdrant server, which every worker reads and writes)."""

    index: int
    snapshot: Path | None

    def interceptors(self) -> list[Interceptor]:
        tag = WorkerTagInterceptor(self.index)
        return [tag, ReadOnlyIndexInterceptor()] if self.snapshot is not None else [tag]


class WorkerTagInterceptor(Interceptor):
    """Tells the caller which worker served the call (response metadata `ragsvc-worker: <index>:<pid>`)."""

    def __init__(self, index: int) -> None:
        self._value = f"{index}:{os.getpid()}"

    @contextlib.asynccontextmanager
    async def intercept(self, call: CallInput) -> AsyncIterator[None]:
        call.state.response_metadata.append((WORKER_KEY, self._value))
        yield


class ReadOnlyIndexInterceptor(Interceptor):
    """Refuses IndexService's writes with FAILED_PRECONDITION READ_ONLY_INDEX: this worker serves a copy."""

    def intercept(self, call: CallInput) -> AbstractAsyncContextManager[None]:
        if call.method in INDEX_WRITES:
            raise ReadOnlyIndex(
                "this server runs several processes (RAG_WORKERS) over read-only copies of the embedded engine's "
                "index: index with RAG_WORKERS=1, or serve the vectors from a Qdrant server (RAG_QDRANT_URL)"
            )
        return super().intercept(call)
