"""Server interceptors as small units, composed into one grpc.aio server interceptor.

Each unit is an `Interceptor` with one hook, `intercept(call)`, that takes one dataclass input (`CallInput`:
method, metadata, peer, the request, and the call's mutable `CallState`) and wraps the call as an async context
manager: code before its ``yield`` runs before the handler (raise a `RagError` to refuse the call: it becomes
the call's status, with its google.rpc details), code after it runs once the call has ended, when
``call.state.code`` holds the final status code. Units run in the order given, the first outermost::

    server = grpc.aio.server(interceptors=[ServerInterceptor([RequestIdInterceptor(), AuthInterceptor(keys)])])

`ServerInterceptor` adapts the units to grpc.aio: it wraps unary-unary, unary-stream and stream-unary handlers
(every ragsvc RPC; a client stream's first message is the request the units see), leaves health and reflection
untouched (never authenticated, rate limited or counted), sends the
units' response metadata as initial metadata, and exposes the call's state to the servicer through a
contextvar (`current_call()`), read once by the servicers' boundary (server/boundary.py): that is how the
servicer learns the authenticated principal and the request id, hands them on explicitly, and records the
domain error a call ended with, which the units read (`CallState.error`) instead of parsing status details.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
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
    metadata_sent: bool = False

    @property
    def error_reason(self) -> str:
        return self.error.reason if self.error is not None else ""

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


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
        self._units = tuple(interceptors)
        self._exempt = tuple(exempt)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(self._exempt):
            return handler
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
        return CallInput(method, metadata, context.peer() or "", request, CallState())

    async def _enter(
        self, stack: contextlib.AsyncExitStack, call: CallInput, context: Context
    ) -> None:
        """Enter every unit (outermost first), then send the response metadata they collected."""
        for unit in self._units:
            await stack.enter_async_context(unit.intercept(call))
        await _send_metadata(call.state, context)

    def _unary(self, method: str, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def handle(request: Any, context: Context) -> Any:
            call = self._input(method, request, context)
            token = _CURRENT.set(call.state)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    try:
                        await self._enter(stack, call, context)
                        response = await behavior(request, context)
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
                                    yield response
                        else:  # a handler that writes with context.write
                            await responses
                    except BaseException as exc:
                        _end(call.state, exc, context)
                        raise
                    _end(call.state, None, context)
            except errors.RagError as exc:  # a unit refused the call
                await _refuse(call.state, context, exc)
            finally:
                _reset(token)

        return handle


async def _send_metadata(state: CallState, context: Context) -> None:
    if state.response_metadata and not state.metadata_sent:
        state.metadata_sent = True
        await context.send_initial_metadata(tuple(state.response_metadata))


async def _refuse(state: CallState, context: Context, exc: errors.RagError) -> None:
    await _send_metadata(state, context)
    await context.abort_with_status(to_status(exc))


def _reset(token: contextvars.Token[CallState | None]) -> None:
    # A stream closed from another task (loop shutdown) cannot reset; the call's task ends anyway.
    with contextlib.suppress(ValueError):
        _CURRENT.reset(token)
