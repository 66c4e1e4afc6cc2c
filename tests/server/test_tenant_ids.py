"""tenant_id follows one pattern on every RPC that takes one: the walk below finds them in the services'
descriptors (a tenant_id field of the request, or of a message it carries, as SimulateAsk's question), so an RPC
added later is walked too, and sends each "../x": INVALID_ARGUMENT with a field violation naming the field
(its path in the request: "request.tenant_id" in SimulateAsk)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message

from ragsvc.sanitize import TENANT_ID_PATTERN
from ragsvc.v1 import admin_service_pb2, index_service_pb2, rag_service_pb2
from ragsvc.v1 import index_service_pb2 as index_pb
from tests.support.rpc_details import details_of
from tests.support.servers import Stubs

SERVICES = (
    rag_service_pb2.DESCRIPTOR.services_by_name["RagService"],
    index_service_pb2.DESCRIPTOR.services_by_name["IndexService"],
    admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"],
)
# What every RPC of the contract that takes a tenant takes it in (the walk must find at least these).
KNOWN = {
    "RagService.Ask": "tenant_id", "RagService.AskStream": "tenant_id", "RagService.GetSession": "tenant_id",
    "RagService.DeleteSession": "tenant_id", "IndexService.IngestDocuments": "tenant_id",
    "IndexService.DeleteDocument": "tenant_id", "IndexService.ListDocuments": "tenant_id",
    "IndexService.GetDocument": "tenant_id", "IndexService.GetIndexStats": "tenant_id",
    "IndexService.UploadDocument": "tenant_id", "IndexService.GetUploadStatus": "tenant_id",
    "AdminService.SimulateAsk": "request.tenant_id", "AdminService.EraseCaller": "tenant_id",
}  # fmt: skip


def tenant_paths(message: Descriptor, prefix: str = "", depth: int = 2) -> Iterator[str]:
    """The paths of the tenant_id fields of a message and of the single messages it holds, `depth` levels down."""
    for field in message.fields:
        if field.name == "tenant_id" and field.type == FieldDescriptor.TYPE_STRING:
            yield prefix + field.name
        elif field.type == FieldDescriptor.TYPE_MESSAGE and depth and not field.is_repeated:
            yield from tenant_paths(field.message_type, f"{prefix}{field.name}.", depth - 1)


def walked() -> list[tuple[MethodDescriptor, str]]:
    return [(method, path) for service in SERVICES for method in service.methods for path in tenant_paths(method.input_type)]


def request_for(method: MethodDescriptor, path: str, tenant: str) -> Message:
    """A request that is valid but for its tenant at `path`."""
    modules = {"RagService": rag_service_pb2, "IndexService": index_service_pb2, "AdminService": admin_service_pb2}
    request: Any = getattr(modules[method.containing_service.name], method.input_type.name)()
    _fill(request)
    target = request
    *parents, name = path.split(".")
    for parent in parents:
        target = getattr(target, parent)
        _fill(target)
    setattr(target, name, tenant)
    return request


def _fill(message: Message) -> None:
    """Sets the fields a request needs to be valid, where the message has them."""
    fields = message.DESCRIPTOR.fields_by_name
    if "query" in fields:
        message.query = "What is the refund policy?"  # type: ignore[attr-defined]
    if "session_id" in fields:
        message.session_id = str(uuid.uuid4())  # type: ignore[attr-defined]
    if "document_id" in fields:
        message.document_id = "doc"  # type: ignore[attr-defined]
    if "documents" in fields:
        message.documents.add(document_id="doc", content=b"Refunds take fourteen days.")  # type: ignore[attr-defined]
    if "document" in fields:  # an upload's first message
        message.document.document_id = "doc"  # type: ignore[attr-defined]
        message.data, message.finish_write = b"Refunds take fourteen days.", True  # type: ignore[attr-defined]


async def call(stubs: Stubs, method: MethodDescriptor, request: Message) -> None:
    stub = {"RagService": stubs.rag, "IndexService": stubs.index, "AdminService": stubs.admin}
    rpc = getattr(stub[method.containing_service.name], method.name)
    if method.client_streaming:

        async def one() -> AsyncIterator[Message]:
            yield request

        await rpc(one(), timeout=30)
    elif method.server_streaming:
        async for _ in rpc(request, timeout=30):
            pass
    else:
        await rpc(request, timeout=30)


def test_the_walk_finds_every_rpc_that_takes_a_tenant() -> None:
    found = {f"{m.containing_service.name}.{m.name}": path for m, path in walked()}
    assert found.items() >= KNOWN.items()


@pytest.mark.parametrize(("method", "path"), walked(), ids=lambda v: getattr(v, "name", v))
async def test_every_rpc_refuses_a_path_as_tenant(stubs: Stubs, method: MethodDescriptor, path: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(stubs, method, request_for(method, path, "../x"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violations = {(v.field, v.description) for v in details_of(caught.value).bad_request.field_violations}
    assert (path, f"must match {TENANT_ID_PATTERN} (or be empty for the default tenant)") in violations


@pytest.mark.parametrize(
    "tenant",
    ["../x", "a/b", "..", ".hidden", "-rf", "two words", "tab\tinside", "ümlaut", "a" * 129, "x" * 1000],
)
async def test_what_the_pattern_refuses(stubs: Stubs, tenant: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.index.GetIndexStats(index_pb.GetIndexStatsRequest(tenant_id=tenant), timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("tenant", ["", "acme", " acme ", "Team-1.eu_west", "a" * 128, "0"])
async def test_what_the_pattern_takes(stubs: Stubs, tenant: str) -> None:
    stats = await stubs.index.GetIndexStats(index_pb.GetIndexStatsRequest(tenant_id=tenant), timeout=10)
    assert stats.engine
