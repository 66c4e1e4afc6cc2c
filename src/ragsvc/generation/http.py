"""What the LLM generators over HTTP (OpenAI-compatible, Ollama) share: the one place where httpx and protocol
failures become ragsvc errors, the streamed POST with its retries (`generation/retry.py`), the model list cached
briefly for availability checks, the server's slots taken in turn (`generation/slots.py`), and the base class
holding them. Each generator adds only its own request body and response format."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import itertools
import json
import logging
import re
import time
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx

from ragsvc.domain import GenerationDelta, GenerationRequest, Usage
from ragsvc.errors import LLMTimeout, LLMUnavailable, ModelUnavailable, RagError
from ragsvc.generation.base import Capabilities
from ragsvc.generation.retry import RetryPolicy, retried
from ragsvc.generation.slots import SlotGate
from ragsvc.generation.transport import StreamTransport

CONNECT_TIMEOUT_S = 5.0
PROBE_TIMEOUT_S = 5.0
USER_AGENT = "ragsvc"
# How long a failed attempt to learn the server's slots stands before the next request asks again.
SLOTS_RETRY_S = 10.0
_log = logging.getLogger(__name__)
# httpx's JSON body encoding (`httpx._content.encode_json`).
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# OpenAI's error code, vLLM's and OpenAI's "The model `x` does not exist", Ollama's `model "x" not found`.
_MODEL_MISSING = re.compile(r"model_not_found|\bmodel\b.*\b(does not exist|not found)", re.IGNORECASE)


class BadResponse(Exception):
    """The server answered, but not as its API specifies."""


class ErrorEvent(BadResponse):
    """The server answered 200, then reported a failure inside the stream (a model runner crashing)."""


@contextlib.contextmanager
def upstream_errors(model: str | None) -> Iterator[None]:
    """Maps httpx and protocol failures to ragsvc errors. `model` names the model of a completion in flight:
    then a 404 means the model is not served and a timeout is the generation's. Without it (listing the
    models) both mean the server cannot serve.

    An LLMUnavailable is `transient` (another model may not share it: see `generation/fallback.py`) when the
    server could not be reached or dropped the connection, answered 5xx or 429, or reported a failure inside
    the stream; not for other 4xx answers or answers that break the protocol."""
    try:
        yield
    except httpx.ConnectTimeout as exc:
        raise LLMUnavailable(f"cannot connect to the LLM server: {exc!r}", transient=True) from exc
    except httpx.TimeoutException as exc:
        if model is None:
            raise LLMUnavailable(f"the LLM server did not answer in time: {exc!r}", transient=True) from exc
        raise LLMTimeout("generation", f"the LLM server went silent: {exc!r}") from exc
    except httpx.HTTPStatusError as exc:
        raise _status_error(exc.response, model) from exc
    except httpx.HTTPError as exc:
        transient = isinstance(exc, httpx.TransportError)
        raise LLMUnavailable(f"the LLM server cannot be reached or failed: {exc!r}", transient=transient) from exc
    except ErrorEvent as exc:
        raise LLMUnavailable(f"the LLM server failed mid-answer: {exc}", transient=True) from exc
    except BadResponse as exc:
        raise LLMUnavailable(f"the LLM server answered badly: {exc}") from exc


def _status_error(response: httpx.Response, model: str | None) -> RagError:
    """The error for a non-2xx answer (its body already read)."""
    message = _error_message(response)
    if model is not None and (response.status_code == 404 or _MODEL_MISSING.search(response.text)):
        return ModelUnavailable(f"model {model!r} is not served: {message}", metadata={"model": model})
    detail = f"the LLM server answered {response.status_code}: {message}"
    transient = response.status_code >= 500 or response.status_code == 429
    retry_after_s = _retry_after_s(response.headers.get("retry-after"))
    return LLMUnavailable(detail, retry_after_s=1.0 if retry_after_s is None else retry_after_s, transient=transient)


def _error_message(response: httpx.Response) -> str:
    """The message of an error body: OpenAI's `{"error": {"message": ...}}` or Ollama's `{"error": "..."}`."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(message := error.get("message"), str):
        return message
    if isinstance(error, str):
        return error
    return response.text[:200] or response.reason_phrase


def _retry_after_s(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header, in delta-seconds or as an HTTP date."""
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def serves(served: Iterable[str], model: str) -> bool:
    """Whether a server listing `served` serves `model`; "x" and "x:latest" name the same model (Ollama)."""
    names = {name.removesuffix(":latest") for name in served}
    return model.removesuffix(":latest") in names


async def lines(response: httpx.Response) -> AsyncIterator[list[bytes]]:
    """The lines of a streamed `response` (server-sent events, NDJSON), a list per network read (the transport's
    block), parsed from bytes: no str per line. CRLF line ends count as LF. A last line without its end comes
    last; empty lines are dropped."""
    pending = b""
    async for block in response.aiter_bytes():
        pending += block
        if b"\r" in pending:
            pending = pending.replace(b"\r\n", b"\n")
        *complete, pending = pending.split(b"\n")
        if complete:
            yield [line for line in complete if line]
    if pending.strip():
        yield [pending]


def transport_for(base_url: str) -> httpx.AsyncBaseTransport:
    """The transport a generator owns: StreamTransport (see `ragsvc.generation.transport`), unless an environment
    proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, not bypassed by NO_PROXY) applies to `base_url`: StreamTransport
    only speaks to the server directly, so then httpx's own goes through the proxy."""
    url = httpx.URL(base_url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if proxy and not urllib.request.proxy_bypass(url.host):
        return httpx.AsyncHTTPTransport(proxy=proxy)
    return StreamTransport()


def _parsed(items: list[bytes], what: str) -> tuple[list[Any], BadResponse | None]:
    """The JSON values of one read's events or lines, in one parse (as one array); when one is not JSON, the
    values before it and the error, so that the text before a broken event still goes out first."""
    try:
        values = json.loads(b"[" + b",".join(items) + b"]")
    except ValueError:
        values = None
    if isinstance(values, list) and len(values) == len(items):  # else an item is not one value: find it
        return values, None
    values = []
    for item in items:
        try:
            values.append(json.loads(item))
        except ValueError:
            return values, BadResponse(f"{what} is not JSON: {item[:80]!r}")
    return values, None


class StreamState(Protocol):
    """What a protocol's stream said besides its text (the usage, once reported), and how it reads one parsed item:
    its text, keeping the rest (raises BadResponse for an item that breaks the protocol)."""

    usage: Usage | None

    def read(self, item: Any, raw: bytes) -> str: ...


def read_delta(items: list[bytes], what: str, stream: StreamState) -> tuple[GenerationDelta | None, BadResponse | None]:
    """The delta of one network read's events or lines: their text, each parsed (`_parsed`) and read by `stream`,
    joined, with the usage when this read reported it (None when the read said neither); and the failure that
    stopped the reading (raised by the caller after the text before it went out)."""
    values, failure = _parsed(items, what)
    usage = stream.usage
    parts: list[str] = []
    try:
        for item, value in zip(items, values, strict=False):
            if text := stream.read(value, item):
                parts.append(text)
    except BadResponse as exc:
        failure = exc
    text = "".join(parts)
    delta = GenerationDelta(text=text, usage=stream.usage) if text or stream.usage is not usage else None
    return delta, failure


class ModelList:
    """The models a server serves, fetched with `fetch` and kept for `ttl_s`. Concurrent callers share one
    fetch; a failed fetch is not kept, so the next caller tries again."""

    def __init__(
        self, fetch: Callable[[], Awaitable[list[str]]], *, ttl_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._fetch = fetch
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = asyncio.Lock()
        self._models: list[str] = []
        self._fetched_at: float | None = None

    async def get(self) -> list[str]:
        """The list, fetched again when older than the TTL."""
        async with self._lock:
            kept = self._fetched_at is not None and self._clock() - self._fetched_at < self._ttl_s
            if not kept:
                self._models = await self._fetch()
                self._fetched_at = self._clock()
            return list(self._models)

    def forget(self) -> None:
        """Drop the kept list (a completion found it stale)."""
        self._fetched_at = None


class HttpGenerator(abc.ABC):
    """A generator over an LLM server's HTTP API rooted at `base_url`.

    `timeout_s` bounds each wait for the server (the response head, then every read of the body); connecting is
    bounded by 5 s. `models_ttl_s` is how long the server's model list is trusted for availability checks. `retry`
    says how transient failures are retried (`generation/retry.py`). Requests go straight to an httpx transport,
    without an httpx client (no cookies, redirects, auth flows or event hooks to go through: the APIs use none):
    `transport` is used as given and left open by `aclose`; by default the generator owns its own
    (`transport_for`).
    """

    kind = "http"
    capabilities = Capabilities(follows_instructions=True)

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        headers: dict[str, str] | None = None,
        timeout_s: float = 30.0,
        models_ttl_s: float = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._urls: dict[str, httpx.URL] = {}
        self._model = model
        self._headers = {"User-Agent": USER_AGENT, **(headers or {})}
        self._built_headers: dict[tuple[str, bool], httpx.Headers] = {}
        self._timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, CONNECT_TIMEOUT_S)).as_dict()
        self._probe_timeout = httpx.Timeout(min(timeout_s, PROBE_TIMEOUT_S)).as_dict()
        self._retry = retry or RetryPolicy()
        self._owns_transport = transport is None
        self._transport = transport if transport is not None else transport_for(self._base_url)
        self._served = ModelList(self.available_models, ttl_s=models_ttl_s)
        self._slots_lock = asyncio.Lock()
        self._slots: int | None = None
        self._slots_asked_at: float | None = None  # when the server last answered the question (or failed to)
        self._slots_known = False
        self._gate: SlotGate | None = None

    @property
    def name(self) -> str:
        return self.model_name(self._model)

    def model_name(self, model: str) -> str:
        return f"{self.kind}:{model}"

    @abc.abstractmethod
    def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]: ...

    @abc.abstractmethod
    async def available_models(self, *, retries: bool = True) -> list[str]:
        """The model names the server lists, asked now (a transient failure tried again unless not `retries`)."""

    async def ensure_available(self, model: str) -> None:
        """Returns when the server serves `model` (by its model list, kept briefly); raises ModelUnavailable
        when it does not, LLMUnavailable when the list cannot be had."""
        served = await self._served.get()
        if not serves(served, model):
            raise self._missing(model, served)

    async def check_health(self) -> None:
        """Returns when the server answers and serves the default model; raises LLMUnavailable when it cannot
        be reached or fails, ModelUnavailable when it does not list the model. A probe is not retried: the next
        probe is its retry, and a retried one would report an outage seconds late."""
        served = await self.available_models(retries=False)
        if not serves(served, self._model):
            raise self._missing(self._model, served)

    async def slots(self) -> int | None:
        """The requests the server decodes at once, as it reports them (`reported_slots`), asked once; None when it
        reports none. A failure to ask is kept SLOTS_RETRY_S, then asked again."""
        now = time.monotonic()
        if self._slots_known or (self._slots_asked_at is not None and now - self._slots_asked_at < SLOTS_RETRY_S):
            return self._slots
        async with self._slots_lock:
            if not self._slots_known and (self._slots_asked_at is None or self._slots_asked_at < now):
                try:
                    self._slots = await self.reported_slots()
                    self._slots_known = True
                    self._gate = SlotGate(self._slots) if self._slots else None
                except RagError as exc:
                    _log.warning("cannot learn the LLM server's slots (asked again in %g s): %s", SLOTS_RETRY_S, exc)
                self._slots_asked_at = time.monotonic()
        return self._slots

    async def reported_slots(self) -> int | None:
        """What the server says of its slots, asked now; None when its API has no such report. Raises
        LLMUnavailable when it cannot be asked."""
        return None

    @contextlib.asynccontextmanager
    async def _turn(self, request: GenerationRequest) -> AsyncIterator[None]:
        """The block holds one of the server's slots, when it reports them (see `generation/slots.py`)."""
        await self.slots()
        if self._gate is None:
            yield
            return
        async with self._gate.held(side_call=request.side_call):
            yield

    async def aclose(self) -> None:
        if self._owns_transport:
            await self._transport.aclose()

    @contextlib.asynccontextmanager
    async def _post_stream(
        self, path: str, payload: dict[str, Any], *, accept: str, deadline: float | None
    ) -> AsyncIterator[httpx.Response]:
        """A streamed POST whose response is open inside the block and closed when it exits, however it exits:
        leaving early (a consumer closing or cancelled) hangs up on the server. Transient failures before the
        response are retried by `deadline` (event loop time; None: the request timeout from now). Use within
        `upstream_errors`."""
        response = await self._sent("POST", path, self._timeout, accept=accept, payload=payload, deadline=deadline)
        try:
            yield response
        finally:
            await response.aclose()

    async def _get_json(self, path: str | httpx.URL, *, retries: bool = True) -> Any:
        """GET a JSON document (a probe: short timeout); errors mapped."""
        with upstream_errors(None):
            response = await self._sent("GET", path, self._probe_timeout, accept="application/json", retries=retries)
            try:
                await response.aread()
            finally:
                await response.aclose()  # after a failure too: its connection is not left open
            try:
                return response.json()
            except ValueError as exc:
                raise BadResponse(f"{path} did not answer JSON: {response.text[:80]!r}") from exc

    async def _sent(
        self,
        method: str,
        path: str | httpx.URL,
        limits: dict[str, float | None],
        *,
        accept: str,
        payload: Any = None,
        deadline: float | None = None,
        retries: bool = True,
    ) -> httpx.Response:
        """The response to a request, its status a success (its body not read yet); an error status is raised as
        httpx.HTTPStatusError with its body read. A transient failure (`generation/retry.py`) is tried again
        (unless not `retries`) after the policy's wait, while that wait ends before `deadline` (None: the read
        timeout from now)."""
        loop = asyncio.get_running_loop()
        if deadline is None:
            deadline = loop.time() + (limits.get("read") or PROBE_TIMEOUT_S)
        for retry in itertools.count():
            try:
                response = await self._send(method, path, limits, accept=accept, payload=payload)
                if response.is_error:
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
                    if response.status_code == 404:
                        self._served.forget()  # the model may be gone since the list was fetched
                    response.raise_for_status()
                return response
            except httpx.HTTPError as exc:
                if not retries or retry >= self._retry.retries or not retried(exc):
                    raise
                retry_after_s = None
                if isinstance(exc, httpx.HTTPStatusError):
                    retry_after_s = _retry_after_s(exc.response.headers.get("retry-after"))
                wait_s = self._retry.wait_s(retry, retry_after_s)
                if wait_s is None or loop.time() + wait_s > deadline:
                    raise
                _log.warning(
                    "the LLM server failed: %r; trying again in %.2f s (retry %d of %d)",
                    exc,
                    wait_s,
                    retry + 1,
                    self._retry.retries,
                )
                await asyncio.sleep(wait_s)
        raise AssertionError("unreachable: the loop returns or raises")

    async def _send(
        self, method: str, path: str | httpx.URL, limits: dict[str, float | None], *, accept: str, payload: Any = None
    ) -> httpx.Response:
        """The response (its body not read yet) to a request for `path`, a JSON `payload` its body; `limits` are
        httpx's timeouts (`Timeout.as_dict()`). The body is the bytes httpx's `json=` would send, encoded here by
        an encoder made once (httpx makes one per request, then wraps the body twice more)."""
        body = None if payload is None else _JSON.encode(payload).encode()
        url = path if isinstance(path, httpx.URL) else self._url(path)
        headers = self._request_headers(accept, json_body=body is not None)
        request = httpx.Request(method, url, content=body, headers=headers, extensions={"timeout": limits})
        response = await self._transport.handle_async_request(request)
        response.request = request  # httpx's own transports leave that to the client
        return response

    def _request_headers(self, accept: str, *, json_body: bool) -> httpx.Headers:
        """The generator's headers with `accept` (and Content-Type for a JSON body), built once per kind: httpx
        copies them into each request as they are, instead of normalising every name again (half its cost)."""
        headers = self._built_headers.get((accept, json_body))
        if headers is None:
            kind = {"Accept": accept, **({"Content-Type": "application/json"} if json_body else {})}
            headers = self._built_headers[accept, json_body] = httpx.Headers({**self._headers, **kind})
        return headers

    def _url(self, path: str) -> httpx.URL:
        """The URL of `path` under the API root, parsed once."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self._base_url + path)
        return url

    def _missing(self, model: str, served: list[str]) -> ModelUnavailable:
        return ModelUnavailable(
            f"model {model!r} is not served at {self._base_url} (it serves: {', '.join(served) or 'none'})",
            metadata={"model": model},
        )
