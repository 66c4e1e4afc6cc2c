"""The servicers' side of the one error boundary, and the call context they hand to the domain.

Every handler is wrapped by `unary_boundary` or `stream_boundary`: any exception becomes the call's domain error
(`status.domain_error`: INTERNAL, logged, for anything outside the tree), which is recorded on the call's state
for the interceptors (request log, metrics, traces) and sent as the status with its google.rpc details.
`call_context` reads the interceptors' state once and hands the domain what it needs, explicitly.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from ragsvc.answering.context import CallContext
from ragsvc.server.interceptors import CallState, Context, current_call
from ragsvc.server.request_log import REQUEST_ID_KEY, request_id_from
from ragsvc.wire.status import domain_error, to_status

Request = TypeVar("Request")
Response = TypeVar("Response")


def call_state(context: Context) -> CallState:
    """The interceptors' state of this call, or a fresh one when the call is not intercepted."""
    state = current_call()
    if state is None:
        metadata = {key: value for key, value in context.invocation_metadata() or () if isinstance(value, str)}
        state = CallState(request_id=request_id_from(metadata.get(REQUEST_ID_KEY)))
    return state


def call_context(context: Context) -> CallContext:
    """What the answering service needs of this call: its request id, principal, deadline, report and peer."""
    state = call_state(context)
    remaining = context.time_remaining()
    deadline = None if remaining is None else asyncio.get_running_loop().time() + remaining
    return CallContext(state.request_id, state.principal, deadline, state.report, peer_identity(context))


def peer_identity(context: Context) -> str:
    """Who called, as the transport knows it: the identity of its client certificate (mutual TLS), else its
    address without the port (a client's next connection comes from another port)."""
    identities = list(context.peer_identities() or ())
    if identities:
        return "tls:" + ",".join(identity.decode(errors="replace") for identity in identities)
    peer = context.peer() or ""
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rpartition(":")[0]
    return peer


async def _abort(context: Context, exc: Exception) -> None:
    error = domain_error(exc)
    state = current_call()
    if state is not None:
        state.error = error
        await state.metadata_written()
    await context.abort_with_status(to_status(error))


def unary_boundary(
    handler: Callable[[Any, Request, Context], Awaitable[Response]],
) -> Callable[[Any, Request, Context], Awaitable[Response]]:
    """Turn any exception of a unary handler into its gRPC status."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Request, context: Context) -> Response:
        try:
            return await handler(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await _abort(context, exc)
            raise  # unreachable: abort_with_status raises

    return wrapper


def stream_boundary(
    handler: Callable[[Any, Request, Context], AsyncIterator[Response]],
) -> Callable[[Any, Request, Context], AsyncIterator[Response]]:
    """Turn any exception of a server-streaming handler into its gRPC status (after what was already sent)."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Request, context: Context) -> AsyncIterator[Response]:
        try:
            async for response in handler(self, request, context):
                yield response
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - the boundary: every error becomes a status
            await _abort(context, exc)

    return wrapper
