"""Documents uploaded in pieces (IndexService.UploadDocument): what arrived of each unfinished upload waits on disk,
by tenant and document id, so that a later stream can resume it after a broken one, a restart included.

One file per upload under the staging directory, named by a hash of (tenant, document id), and beside it the
access tags of the document being uploaded (so that only keys whose tags show the document see and resume the
upload: `Upload.tags`). One stream at a time writes an upload (a second gets AlreadyExists); uploads left
unfinished for `max_age_s` are removed when the next upload starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

from ragsvc.errors import AlreadyExists, FieldViolation, InvalidRequest

DAY_S = 24 * 3600.0


class Upload:
    """The content received so far of one document's upload, and the tags of the document (None: not recorded, for
    an upload begun before tags were)."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self._path = path
        self._max_bytes = max_bytes
        self.size = path.stat().st_size if path.exists() else 0
        self.tags = _tags_of(path) if self.size else None

    def begin(self, tags: tuple[str, ...]) -> None:
        """Starts the upload over, of a document tagged `tags`."""
        self.discard()
        _tags_path(self._path).write_text(json.dumps(sorted(tags)))
        self.tags = tuple(sorted(tags))

    async def append(self, data: bytes) -> None:
        """Adds the next piece. Raises InvalidRequest (and discards the upload) past the size limit."""
        if self.size + len(data) > self._max_bytes:
            self.discard()
            violation = f"the document is larger than RAG_MAX_DOCUMENT_BYTES ({self._max_bytes} bytes)"
            raise InvalidRequest([FieldViolation("data", violation)])
        if data:
            await asyncio.to_thread(self._write, data)
            self.size += len(data)

    async def content(self) -> bytes:
        return await asyncio.to_thread(self._path.read_bytes) if self.size else b""

    def discard(self) -> None:
        """Drops what was received (the upload starts over, or is done)."""
        self._path.unlink(missing_ok=True)
        _tags_path(self._path).unlink(missing_ok=True)
        self.size = 0
        self.tags = None

    def _write(self, data: bytes) -> None:
        with self._path.open("ab") as file:
            file.write(data)


class UploadStaging:
    """The unfinished uploads, in `directory` (created when first needed)."""

    def __init__(self, directory: Path, *, max_bytes: int, max_age_s: float = DAY_S) -> None:
        self._directory = directory
        self._max_bytes = max_bytes
        self._max_age_s = max_age_s
        self._streaming: set[Path] = set()

    @property
    def max_bytes(self) -> int:
        """The most one upload may hold."""
        return self._max_bytes

    def committed(self, tenant_id: str, document_id: str) -> tuple[int, tuple[str, ...] | None]:
        """The bytes held of the document's unfinished upload (0 when there is none), and its document's tags."""
        path = self._path(tenant_id, document_id)
        size = path.stat().st_size if path.exists() else 0
        return size, _tags_of(path) if size else None

    @contextlib.asynccontextmanager
    async def writing(self, tenant_id: str, document_id: str) -> AsyncIterator[Upload]:
        """The document's upload, for one stream to write. Raises AlreadyExists while another stream writes it."""
        path = self._path(tenant_id, document_id)
        if path in self._streaming:
            raise AlreadyExists(f"an upload of document {document_id!r} is streaming already")
        self._streaming.add(path)
        try:
            await asyncio.to_thread(self._prepare)
            yield Upload(path, self._max_bytes)
        finally:
            self._streaming.discard(path)

    def _prepare(self) -> None:
        """Creates the directory; removes the uploads nobody streamed to for `max_age_s`."""
        self._directory.mkdir(parents=True, exist_ok=True)
        cutoff = time.time() - self._max_age_s
        for stale in self._directory.glob("*.part"):
            with contextlib.suppress(FileNotFoundError):
                if stale not in self._streaming and stale.stat().st_mtime < cutoff:
                    stale.unlink()
                    _tags_path(stale).unlink(missing_ok=True)

    def _path(self, tenant_id: str, document_id: str) -> Path:
        key = hashlib.sha256(f"{tenant_id}\0{document_id}".encode()).hexdigest()[:32]
        return self._directory / f"{key}.part"


def _tags_path(part: Path) -> Path:
    return part.with_suffix(".tags")


def _tags_of(part: Path) -> tuple[str, ...] | None:
    try:
        return tuple(json.loads(_tags_path(part).read_text()))
    except (OSError, ValueError):
        return None
