"""What the tests' database servers (PostgreSQL, Valkey) share: a process on a free loopback port, its files in a
temporary directory, started by `with` and removed, files and all, on leaving (also when the start fails)."""

from __future__ import annotations

import abc
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Self


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalServer(abc.ABC):
    """`start` runs the server (again after a `stop`, on the same port); `close` stops it and deletes its files."""

    def __init__(self, *, prefix: str, log_name: str, start_timeout_s: float) -> None:
        self.port = free_port()
        self.startup_s = 0.0  # the last start, from spawning the server to its answering
        self._start_timeout_s = start_timeout_s
        self._root = Path(tempfile.mkdtemp(prefix=prefix))
        self._log = self._root / log_name
        self._process: subprocess.Popen[bytes] | None = None

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the server cleanly (subclasses take a `mode` too) and wait for it; its files stay."""

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()  # no __exit__ follows a failed __enter__: nothing may be left behind
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server and delete its files."""
        self.stop()
        shutil.rmtree(self._root, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        text = self._log.read_text(errors="replace") if self._log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])
