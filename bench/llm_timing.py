"""What the benchmarks against a real LLM share: the local LLM (`ragsvc llm`, as `make llm` starts it), a proxy
between ragsvc and it that records every LLM call with the server's own timings, and a `ragsvc serve` process.

The proxy relays each request whole and each response as it comes, on its own thread and event loop, and reads
what passes: each request's path and prompt, when it was relayed to the LLM server (`sent_at`), when the first
piece of answer text came back (`first_content_at`), when the response ended, and llama.cpp's `timings` (its own
milliseconds processing the prompt and generating). llama.cpp reports timings in the last event of a stream,
which a stream closed early (ragsvc's repetition guard hanging up on a looping model) never gets; so the proxy adds
`"timings_per_token": true` to every streamed request, and llama.cpp then reports them with every token (nothing
else about the request changes). All times are `time.perf_counter()` readings of this process, so they compare
with the client's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ragsvc import local_llm


@dataclass
class LLMCall:
    """One request ragsvc made to the LLM server, as the proxy saw it."""

    path: str
    prompt: str  # the content of the last message ("" for a request without messages)
    sent_at: float
    first_content_at: float | None = None
    ended_at: float | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def answers(self) -> bool:
        """A request for an answer (a draft or a re-run), not a side call: its user message is a template's."""
        return self.prompt.startswith("[Question]\n")

    @property
    def own_first_token_ms(self) -> float | None:
        """The LLM server's own time to its first token: processing the prompt (llama.cpp's `prompt_ms`; the first
        token is sampled from its last position)."""
        return self.timings.get("prompt_ms")


class _Responses:
    """Reads the responses of one connection as they pass, for the calls awaiting them (in request order)."""

    def __init__(self, pending: deque[LLMCall]) -> None:
        self._pending = pending
        self._buffer = b""
        self._in_body = False
        self._chunked = False
        self._left = 0  # a Content-Length body's bytes still to come, or the current chunk's
        self._events = b""  # decoded body text not yet split into lines

    def feed(self, data: bytes, now: float) -> None:
        self._buffer += data
        while self._pending and self._step(now):
            pass

    def _step(self, now: float) -> bool:
        """Consumes what it can of the buffer; False when it needs more bytes."""
        if not self._in_body:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return False
            head, self._buffer = self._buffer[:end].lower(), self._buffer[end + 4 :]
            self._chunked = b"transfer-encoding: chunked" in head
            length = next((line.split(b":")[1] for line in head.split(b"\r\n") if line.startswith(b"content-length")), b"0")
            self._left = 0 if self._chunked else int(length)
            self._in_body = True
            if not self._chunked and self._left == 0:
                return self._end(now)
            return True
        if not self._chunked:
            taken, self._buffer = self._buffer[: self._left], self._buffer[self._left :]
            self._left -= len(taken)
            self._read(taken, now)
            return self._end(now) if self._left == 0 else False
        if self._left > 0:
            taken, self._buffer = self._buffer[: self._left], self._buffer[self._left :]
            self._left -= len(taken)
            self._read(taken, now)
            if self._left:
                return False
            self._left = -1  # its CRLF next
            return True
        if self._left == -1:
            if len(self._buffer) < 2:
                return False
            self._buffer, self._left = self._buffer[2:], 0
            return True
        end = self._buffer.find(b"\r\n")
        if end < 0:
            return False
        size = int(self._buffer[:end].split(b";")[0], 16)
        if size == 0:
            stop = self._buffer.find(b"\r\n\r\n", end)
            if stop < 0:
                return False
            self._buffer = self._buffer[stop + 4 :]
            return self._end(now)
        self._buffer, self._left = self._buffer[end + 2 :], size
        return True

    def _read(self, body: bytes, now: float) -> None:
        call = self._pending[0]
        self._events += body
        *lines, self._events = self._events.split(b"\n")
        for line in lines:
            if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                continue
            try:
                event = json.loads(line[5:])
            except ValueError:
                continue
            choices = event.get("choices") or [{}]
            if call.first_content_at is None and (choices[0].get("delta") or {}).get("content"):
                call.first_content_at = now
            if isinstance(event.get("timings"), dict):
                call.timings = event["timings"]

    def _end(self, now: float) -> bool:
        self._pending.popleft().ended_at = now
        self._in_body, self._events = False, b""
        return True


class TimingProxy:
    """`with TimingProxy("http://127.0.0.1:8080") as proxy:` ragsvc talks to `proxy.base_url` ("/v1" added);
    `proxy.calls` lists what it asked."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split("/")[0].rsplit(":", 1)
        self._upstream = (host, int(port))
        self.calls: list[LLMCall] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    def __enter__(self) -> TimingProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def since(self, started: float) -> list[LLMCall]:
        """The chat requests (answers and side calls) sent from `started` on; model lists and probes left out."""
        return [call for call in list(self.calls) if call.sent_at >= started and call.path.endswith("/chat/completions")]

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        reader, writer = await asyncio.open_connection(*self._upstream)
        pending: deque[LLMCall] = deque()
        responses = _Responses(pending)

        async def relay_responses() -> None:
            while data := await reader.read(65536):
                client_writer.write(data)
                responses.feed(data, time.perf_counter())
            client_writer.close()

        relaying = asyncio.ensure_future(relay_responses())
        buffer = b""
        try:
            while data := await client_reader.read(65536):
                buffer += data
                while (end := buffer.find(b"\r\n\r\n")) >= 0:
                    head = buffer[:end].decode("latin-1")
                    length = next((int(line.split(":")[1]) for line in head.split("\r\n")
                                   if line.lower().startswith("content-length")), 0)
                    if len(buffer) < end + 4 + length:
                        break
                    body, buffer = buffer[end + 4 : end + 4 + length], buffer[end + 4 + length :]
                    head, body = _with_timings(head, body)
                    writer.write(head.encode("latin-1") + b"\r\n\r\n" + body)
                    call = LLMCall(head.split(" ")[1], _prompt(body), time.perf_counter())
                    pending.append(call)
                    self.calls.append(call)
        except ConnectionError:
            pass
        finally:
            writer.close()
            await asyncio.gather(relaying, return_exceptions=True)
            client_writer.close()


def _with_timings(head: str, body: bytes) -> tuple[str, bytes]:
    """A streamed completion request asking llama.cpp for its timings with every token; any other as it was."""
    try:
        payload = json.loads(body)
    except ValueError:
        return head, body
    if not isinstance(payload, dict) or not payload.get("stream"):
        return head, body
    body = json.dumps({**payload, "timings_per_token": True}).encode()
    lines = [line for line in head.split("\r\n") if not line.lower().startswith("content-length")]
    return "\r\n".join([*lines, f"Content-Length: {len(body)}"]), body


def _prompt(body: bytes) -> str:
    try:
        messages = json.loads(body).get("messages") or []
    except (ValueError, AttributeError):
        return ""
    return str(messages[-1].get("content", "")) if messages else ""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(url: str, timeout_s: float, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the LLM server exited with {process.returncode}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout_s} s")


@contextlib.contextmanager
def local_llm_server(url: str | None, threads: int) -> Iterator[str]:
    """The root URL of an LLM server: `url` when given (a `make llm` already serving), else `ragsvc llm` started
    here as `make llm` starts it, with `threads` threads, stopped at the end."""
    if url:
        root = url.removesuffix("/").removesuffix("/v1")
        _wait_for(root + "/health", 5)
        yield root
        return
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ragsvc.cli", "llm", "--port", str(port), "--threads", str(threads)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        root = f"http://127.0.0.1:{port}"
        _wait_for(root + "/health", 120, process)
        yield root
    finally:
        process.terminate()
        process.wait(10)


def serve_env(llm_base_url: str, settings: str) -> dict[str, str]:
    """`ragsvc serve`'s environment for `settings`: "defaults" (ragsvc's defaults; only how to reach the model, its
    window and answer reserve set, as `make serve-llm` sets them) or "serve-llm" (everything `make serve-llm`
    sets: also no side calls, and 120 s for the slow model). Both: the answer cache and the rate limit off, so that
    every call runs the whole pipeline."""
    env = local_llm.serve_env()
    env["OPENAI_BASE_URL"] = llm_base_url
    if settings == "defaults":
        env = {name: env[name] for name in ("RAG_GENERATOR", "OPENAI_BASE_URL", "CHAT_MODEL", "RAG_MODELS")}
    return {**env, "RAG_CACHE_MAX_ENTRIES": "0", "RAG_API_RATE_LIMIT": "0"}


@contextlib.contextmanager
def ragsvc_server(env: dict[str, str]) -> Iterator[str]:
    """A `ragsvc serve` process over the demo corpus with `env` on top of this process's environment; yields its
    address."""
    data_dir = tempfile.mkdtemp(prefix="ragsvc-llm-bench-")
    process = subprocess.Popen(
        [sys.executable, "-m", "ragsvc.cli", "serve"],
        env={**os.environ, "RAG_GRPC_ADDRESS": "127.0.0.1:0", "RAG_DATA_DIR": data_dir, **env},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        assert process.stdout is not None
        address = process.stdout.readline().removeprefix("ragsvc serving on ").strip()
        if not address:
            raise RuntimeError(f"`ragsvc serve` exited with {process.wait()} before serving")
        yield address
    finally:
        process.terminate()
        process.wait(30)


def props(root: str) -> dict[str, Any]:
    """llama.cpp's `/props`, for the record (slots, context)."""
    with urllib.request.urlopen(root + "/props", timeout=5) as response:
        body = json.load(response)
    return {"total_slots": body.get("total_slots"), "n_ctx": (body.get("default_generation_settings") or {}).get("n_ctx"),
            "model": body.get("model_alias")}
