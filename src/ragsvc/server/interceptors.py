"""Server interceptors as small units, composed into one grpc.aio server interceptor.

Each unit is an `Interceptor` with two hooks that take one dataclass input (`CallInput`: method, metadata, peer,
the request, and the call's mutable `CallState`). `intercept(call)` wraps the call as an async context manager:
code before its ``yield`` runs before the handler (raise a `RagError` to refuse the call: it becomes the call's
status, with its google.rpc details), code after it runs once the call has ended, when ``call.state.code`` holds
the final status code, and before that status is sent. `finished(call)` runs after the status was sent, off the
caller's path: a unit that only observes the call (the request log, metrics) records it there, so the caller
does not wait for it. Units run in the order given, the first outermost::

    server = grpc.aio.server(interceptors=[ServerInterceptor([RequestIdInterceptor(), AuthInterceptor(keys)])])

`ServerInterceptor` adapts the units to grpc.aio: it wraps unary-unary, unary-stream and stream-unary handlers
(every ragsvc RPC; a client stream's first message is the request the units see), leaves health and reflection
untouched (never authenticated, rate limited or counted), sends the
units' response metadata as initial metadata (while the handler starts: the first response waits for it), and
exposes the call's state to the servicer through a
contextvar (`current_call()`), read once by the servicers' boundary (server/boundary.py): that is how the
servicer learns the authenticated principal and the request id, hands them on explicitly, and records the
domain error a call ended with, which the units read (`CallState.error`) instead of parsing status details.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc

from ragsvc import errors
from ragsvc.access import Principal
from ragsvc.answering.context import AnswerReport
from ragsvc.wire.status import code_for, to_status

_log = logging.getLogger(__name__)

if TYPE_CHECKING:
    Context = grpc.aio.ServicerContext[Any, Any]  # every ragsvc handler's context, whatever its messages
else:
    Context = grpc.aio.ServicerContext

# Never intercepted: probes and tooling must work whatever the load, and without credentials.
EXEMPT_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
ASK_METHODS = frozenset({"/ragsvc.v1.RagService/Ask", "/ragsvc.v1.RagService/AskStream"})
INDEX_PREFIX = "/ragsvc.v1.IndexService/"
ADMIN_PREFIX = "/ragsvc.v1.AdminService/"


@dataclass(slots=True)
class CallState:
    """What the units and the servicer learn about one call while it runs (mutable, one per call)."""

    started: float = field(default_factory=time.perf_counter)
    request_id: str = ""
    principal: Principal | None = None
    # Metadata the units want returned to the caller; sent as initial metadata before the handler runs.
    response_metadata: list[tuple[str, str]] = field(default_factory=list)
    # Filled by the answering service: the question as answered, the final answer, cache use.
    report: AnswerReport = field(default_factory=AnswerReport)
    # Set when the call ends: its status code, and the domain error it ended with (None when OK or cancelled).
    code: grpc.StatusCode | None = None
    error: errors.RagError | None = None
    ended: float | None = None  # perf_counter when the call ended (before its status was sent)
    metadata_sent: asyncio.Future[None] | None = None  # the response metadata's send, once started

    @property
    def error_reason(self) -> str:
        return self.error.reason if self.error is not None else ""

    def elapsed_ms(self) -> float:
        """From the call's start to its end (to now while it runs)."""
        return ((self.ended or time.perf_counter()) - self.started) * 1000

    async def metadata_written(self) -> None:
        """Wait until the response metadata is sent, when its send has started: a response, or an abort, sent
        before would carry grpc's empty metadata instead."""
        if self.metadata_sent is not None and not self.metadata_sent.done():
            await self.metadata_sent


@dataclass(frozen=True, slots=True)
class CallInput:
    """The one input of every interceptor hook."""

    method: str  # "/ragsvc.v1.RagService/Ask"
    metadata: Mapping[str, str]  # the caller's metadata (text keys only, lower-case)
    peer: str  # "ipv4:127.0.0.1:51234"
    request: Any  # the deserialized request message
    state: CallState

    @property
    def is_ask(self) -> bool:
        return self.method in ASK_METHODS

    @property
    def is_index(self) -> bool:
        return self.method.startswith(INDEX_PREFIX)

    @property
    def is_admin(self) -> bool:
        return self.method.startswith(ADMIN_PREFIX)


class Interceptor:
    """One concern of call handling. The default passes the call through untouched."""

    def intercept(self, call: CallInput) -> AbstractAsyncContextManager[None]:
        return _passthrough()

    def finished(self, call: CallInput) -> None:
        """Called once the call's status was sent (whatever it was: ``call.state.code``)."""


@contextlib.asynccontextmanager
async def _passthrough() -> AsyncIterator[None]:
    yield


_CURRENT: contextvars.ContextVar[CallState | None] = contextvars.ContextVar("ragsvc_call", default=None)


def current_call() -> CallState | None:
    """The state of the call being handled, or None outside an intercepted call."""
    return _CURRENT.get()


def _end(state: CallState, exc: BaseException | None, context: Context) -> None:
    """Record how the call ended: its domain error (a unit's refusal, or what the servicer's boundary recorded
    before aborting) decides the code; a caller leaving is CANCELLED, or DEADLINE_EXCEEDED past its deadline."""
    state.ended = time.perf_counter()
    if isinstance(exc, errors.RagError):
        state.error = exc
    if state.error is not None:
        state.code = code_for(state.error)
    elif exc is None:
        state.code = grpc.StatusCode.OK
    elif isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
        remaining = context.time_remaining()
        expired = remaining is not None and remaining <= 0
        state.code = grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED
    else:
        state.code = grpc.StatusCode.UNKNOWN  # an exception the boundary did not map (grpc answers UNKNOWN)


class ServerInterceptor(grpc.aio.ServerInterceptor):
    """The units, composed into a grpc.aio interceptor (see the module docstring)."""

    def __init__(self, interceptors: Sequence[Interceptor], *, exempt: Sequence[str] = EXEMPT_PREFIXES) -> None:
        # Only the units overriding a hook take part in it: one that merely observes is not entered, one that only
        # guards is not called back.
        self._units = tuple(u for u in interceptors if type(u).intercept is not Interceptor.intercept)
        self._observers = tuple(u for u in interceptors if type(u).finished is not Interceptor.finished)
        self._exempt = tuple(exempt)
        # Each method's handler as registered, and its wrapped form (built once, not per call).
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler[Any, Any], grpc.RpcMethodHandler[Any, Any]]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(self._exempt):
            return handler
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = self._wrap(method, handler)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._client_stream(method, handler.stream_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.request_streaming:
            return handler
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _input(self, method: str, request: Any, context: Context) -> CallInput:
        metadata = {
            key: value
            for key, value in (context.invocation_metadata() or ())
            if isinstance(value, str) and not key.endswith("-bin")
        }
        call = CallInput(method, metadata, context.peer() or "", request, CallState())
        if self._observers:
            # The stubs type the callback as a class of their own; grpc calls it with the context.
            context.add_done_callback(lambda _: self._finished(call))  # type: ignore[arg-type]
        return call

    def _finished(self, call: CallInput) -> None:
        for unit in self._observers:
            try:
                unit.finished(call)
            except Exception:  # noqa: BLE001 - the call is over: a failing observer must not stop the others
                _log.exception("%s failed to record %s", type(unit).__name__, call.method)

    async def _enter(self, stack: contextlib.AsyncExitStack, call: CallInput, context: Context) -> None:
        """Enter every unit (outermost first), then start sending the response metadata they collected."""
        for unit in self._units:
            await stack.enter_async_context(unit.intercept(call))
        _start_metadata(call.state, context)

    def _unary(self, method: str, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def handle(request: Any, context: Context) -> Any:
            call = self._input(method, request, context)
            token = _CURRENT.set(call.state)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    try:
                        await self._enter(stack, call, context)
                        response = await behavior(request, context)
                        await call.state.metadata_written()
                    except BaseException as exc:
                        _end(call.state, exc, context)
                        raise
                    _end(call.state, None, context)
                    return response
            except errors.RagError as exc:  # a unit refused the call
                await _refuse(call.state, context, exc)
            finally:
                _reset(token)

        return handle

    def _client_stream(self, method: str, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """A client-streaming handler: the units see its first message as the call's request (None when the
        stream is empty); the handler gets every message, that one first."""

        async def handle(requests: AsyncIterator[Any], context: Context) -> Any:
            rest = aiter(requests)
            first = await anext(rest, None)

            async def replay() -> AsyncIterator[Any]:
                if first is not None:
                    yield first
                async for message in rest:
                    yield message

            return await self._unary(method, lambda _, context: behavior(replay(), context))(first, context)

        return handle

    def _stream(self, method: str, behavior: Callable[..., Any]) -> Callable[..., AsyncIterator[Any]]:
        async def handle(request: Any, context: Context) -> AsyncIterator[Any]:
            call = self._input(method, request, context)
            token = _CURRENT.set(call.state)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    try:
                        await self._enter(stack, call, context)
                        responses = behavior(request, context)
                        if hasattr(responses, "__aiter__"):
                            async with contextlib.aclosing(responses):
                                async for response in responses:
                                    await call.state.metadata_written()
                                    yield response
                        else:  # a handler that writes with context.write
                            await call.state.metadata_written()
                            await responses
                        await call.state.metadata_written()
                    except BaseException as exc:
                        _end(call.state, exc, context)
                        raise
                    _end(call.state, None, context)
            except errors.RagError as exc:  # a unit refused the call
                await _refuse(call.state, context, exc)
            finally:
                _reset(token)

        return handle


def _start_metadata(state: CallState, context: Context) -> None:
    """Start sending the response metadata, unless there is none or it is on its way; the handler runs meanwhile
    (grpc sends a response's metadata with it only when none was sent, so every response waits for this)."""
    if state.response_metadata and state.metadata_sent is None:
        state.metadata_sent = asyncio.ensure_future(context.send_initial_metadata(tuple(state.response_metadata)))
        # A call that ended before waiting for it (its caller gone) must not log "exception never retrieved".
        state.metadata_sent.add_done_callback(lambda sent: sent.cancelled() or sent.exception())


async def _refuse(state: CallState, context: Context, exc: errors.RagError) -> None:
    _start_metadata(state, context)
    await state.metadata_written()
    await context.abort_with_status(to_status(exc))


def _reset(token: contextvars.Token[CallState | None]) -> None:
    # A stream closed from another task (loop shutdown) cannot reset; the call's task ends anyway.
    with contextlib.suppress(ValueError):
        _CURRENT.reset(token)
