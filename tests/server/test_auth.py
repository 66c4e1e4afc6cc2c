"""Authentication over a real channel: bearer tokens from a keys file, mapped to a tenant and the tags the key
may read. Every refusal is checked with its status code and its decoded google.rpc details."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from ragsvc.access import token_digest
from ragsvc.errors import InvalidRequest
from ragsvc.server.app import RagServer
from ragsvc.server.auth import bearer_token
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.rpc_details import details_of
from tests.support.servers import Stubs, connected, running_server

KEYS = {
    "keys": [
        {"name": "default-reader", "token": "tok-default", "tenant": "default"},
        {"name": "acme-finance", "token": "tok-finance", "tenant": "acme", "tags": ["finance"]},
        {"name": "acme-plain", "token": "tok-plain", "tenant": "acme", "tags": []},
        # Stored as a digest: the file need not hold the secret.
        {"name": "acme-admin", "token_sha256": token_digest("tok-admin"), "tenant": "acme", "tags": ["*"], "index": True},
    ]
}
QUESTION = "What is the travel budget for the finance team?"
FINANCE_DOC = b"# Travel budget\n\nThe finance team has a travel budget of 12000 euros per quarter for conferences."
HR_DOC = b"# Salaries\n\nThe HR team reviews salaries every March and publishes the salary bands internally."


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture(scope="module")
async def auth_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    keys_file = tmp_path_factory.mktemp("keys") / "keys.json"
    keys_file.write_text(json.dumps(KEYS))
    async with running_server(tmp_path_factory.mktemp("auth-data"), auth_enabled=True, api_keys_file=str(keys_file)) as server:
        await ingest_finance_and_hr(server, "tok-admin")
        yield server


async def ingest_finance_and_hr(server: RagServer, token: str) -> None:
    """The finance document (tag `finance`) and the HR one (tag `hr`), ingested with the indexing key `token`."""
    documents = [
        index_pb.Document(document_id="travel", name="travel.md", content=FINANCE_DOC, media_type="text/markdown",
                          tags=["finance"]),
        index_pb.Document(document_id="salaries", name="salaries.md", content=HR_DOC, media_type="text/markdown",
                          tags=["hr"]),
    ]  # fmt: skip
    async with connected(server) as stubs:
        await stubs.index.IngestDocuments(
            index_pb.IngestDocumentsRequest(documents=documents), metadata=bearer(token), timeout=60
        )


@pytest.fixture(scope="module")
async def auth_stubs(auth_server: RagServer) -> AsyncIterator[Stubs]:
    async with connected(auth_server) as stubs:
        yield stubs


@pytest.fixture
def rag(auth_stubs: Stubs) -> rag_service_pb2_grpc.RagServiceStub:
    return auth_stubs.rag


@pytest.fixture
def index(auth_stubs: Stubs) -> index_service_pb2_grpc.IndexServiceStub:
    return auth_stubs.index


async def test_a_call_without_a_token_is_unauthenticated(rag) -> None:
    call = rag.Ask(pb.AskRequest(query=QUESTION), timeout=10)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    details = details_of(caught.value)
    assert details.code == grpc.StatusCode.UNAUTHENTICATED
    assert details.reason == "UNAUTHENTICATED" and details.error_info.domain == "ragsvc.v1"
    assert "bearer" in details.message.lower()
    assert dict(await call.initial_metadata())["x-request-id"], "a refused call still gets its request id"


@pytest.mark.parametrize(
    "metadata",
    [bearer("tok-wrong"), (("authorization", "Basic dG9rLWFkbWlu"),), (("authorization", "Bearer"),)],
    ids=["unknown", "basic", "empty"],
)
async def test_a_bad_token_is_unauthenticated(rag, metadata) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in rag.AskStream(pb.AskStreamRequest(query=QUESTION), metadata=metadata, timeout=10):
            pass
    details = details_of(caught.value)
    assert (details.code, details.reason) == (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")


async def test_index_service_needs_a_token_too(index) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await index.DeleteDocument(index_pb.DeleteDocumentRequest(document_id="travel"), timeout=10)
    assert details_of(caught.value).code == grpc.StatusCode.UNAUTHENTICATED


async def test_another_tenant_is_permission_denied(rag) -> None:
    request = pb.AskRequest(query=QUESTION, tenant_id="globex")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await rag.Ask(request, metadata=bearer("tok-finance"), timeout=10)
    details = details_of(caught.value)
    assert (details.code, details.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    assert details.error_info.metadata["tenant"] == "globex"
    assert details.error_info.metadata["key"] == "acme-finance"


async def test_a_malformed_tenant_is_invalid_argument_whatever_the_key(rag, index) -> None:
    """The same answer as without keys: the request is malformed, whichever tenant the key holds."""
    for call in (
        rag.Ask(pb.AskRequest(query=QUESTION, tenant_id="../acme"), metadata=bearer("tok-finance"), timeout=10),
        index.ListDocuments(index_pb.ListDocumentsRequest(tenant_id="../acme"), metadata=bearer("tok-admin"), timeout=10),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        details = details_of(caught.value)
        assert (details.code, details.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_ERROR")
        assert [v.field for v in details.bad_request.field_violations] == ["tenant_id"]


async def test_a_caller_cannot_widen_its_tags(rag) -> None:
    request = pb.AskRequest(query=QUESTION, user_tags=["finance", "hr"])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await rag.Ask(request, metadata=bearer("tok-finance"), timeout=10)
    details = details_of(caught.value)
    assert (details.code, details.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    assert details.error_info.metadata["tags"] == "hr"


async def test_index_service_needs_a_key_allowed_to_index(index) -> None:
    request = index_pb.IngestDocumentsRequest(documents=[index_pb.Document(document_id="x", content=b"text")])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await index.IngestDocuments(request, metadata=bearer("tok-finance"), timeout=10)
    details = details_of(caught.value)
    assert (details.code, details.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")


async def test_uploads_in_pieces_are_authenticated_and_bounded_by_the_key(index) -> None:
    """The client stream's first message is checked like any request: token, index permission, tenant, tags."""

    def upload(**first: object) -> AsyncIterator[index_pb.UploadDocumentRequest]:
        async def messages() -> AsyncIterator[index_pb.UploadDocumentRequest]:
            document = index_pb.Document(document_id="memo", media_type="text/plain", tags=first.pop("tags", []))
            yield index_pb.UploadDocumentRequest(document=document, data=b"The memo.", **first)
            yield index_pb.UploadDocumentRequest(write_offset=9, finish_write=True)

        return messages()

    refusals = [
        ((), {}, grpc.StatusCode.UNAUTHENTICATED),
        (bearer("tok-finance"), {}, grpc.StatusCode.PERMISSION_DENIED),  # not an indexing key
        (bearer("tok-admin"), {"tenant_id": "globex"}, grpc.StatusCode.PERMISSION_DENIED),
    ]
    for metadata, first, code in refusals:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await index.UploadDocument(upload(**first), metadata=metadata, timeout=10)
        assert details_of(caught.value).code == code, (metadata, first)

    done = await index.UploadDocument(upload(tags=["finance"]), metadata=bearer("tok-admin"), timeout=30)
    assert done.result.chunks_indexed == 1
    listed = await index.ListDocuments(index_pb.ListDocumentsRequest(), metadata=bearer("tok-admin"), timeout=10)
    assert {d.document_id for d in listed.documents} == {"memo", "salaries", "travel"}, "the key's tenant: acme"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await index.ListDocuments(index_pb.ListDocumentsRequest(tenant_id="default"), metadata=bearer("tok-admin"))
    assert details_of(caught.value).code == grpc.StatusCode.PERMISSION_DENIED


async def test_the_tenant_and_tags_come_from_the_key(rag) -> None:
    # No tenant and no tags in the request: the key's tenant (acme) and tags (finance) apply.
    finance = (await rag.Ask(pb.AskRequest(query=QUESTION), metadata=bearer("tok-finance"), timeout=30)).answer
    assert finance.grounded and {c.document_id for c in finance.citations} == {"travel"}

    # A key without tags sees only untagged chunks of its tenant: nothing here.
    plain = (await rag.Ask(pb.AskRequest(query=QUESTION), metadata=bearer("tok-plain"), timeout=30)).answer
    assert not plain.grounded and not plain.citations

    # The default tenant's key never sees acme's documents, only the demo corpus of its own tenant.
    other = (await rag.Ask(pb.AskRequest(query=QUESTION), metadata=bearer("tok-default"), timeout=30)).answer
    assert "travel" not in {c.document_id for c in other.citations}


async def test_a_wildcard_key_reads_the_tags_the_request_names(rag) -> None:
    request = pb.AskRequest(query="When are salaries reviewed?", user_tags=["hr"], tenant_id="acme")
    answer = (await rag.Ask(request, metadata=bearer("tok-admin"), timeout=30)).answer
    assert {c.document_id for c in answer.citations} == {"salaries"}


async def test_health_and_reflection_need_no_token(auth_stubs: Stubs) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    response = await auth_stubs.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert response.status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(auth_stubs.channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    responses = [r async for r in stub.ServerReflectionInfo(iter([request]), timeout=5)]
    assert responses[0].list_services_response.service


def test_the_bearer_token_is_read_from_the_authorization_metadata() -> None:
    assert bearer_token({"authorization": "Bearer tok-1"}) == "tok-1"
    assert bearer_token({"authorization": "  bearer   tok-1 "}) == "tok-1"
    for refused in ({}, {"authorization": "Bearer"}, {"authorization": "Basic dG9rLWFkbWlu"}):
        assert bearer_token(refused) is None, refused


async def test_auth_without_keys_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest) as caught:
        async with running_server(tmp_path, auth_enabled=True):
            pass
    assert caught.value.violations[0].field == "RAG_AUTH_ENABLED"


async def test_a_refused_call_is_logged_with_its_status_and_reason(rag) -> None:
    from tests.server.test_request_log import logged, request_log

    metadata = (*bearer("tok-finance"), ("x-request-id", "refused-1"))
    with request_log() as lines:
        with pytest.raises(grpc.aio.AioRpcError):
            await rag.Ask(pb.AskRequest(query=QUESTION, tenant_id="globex"), metadata=metadata, timeout=10)
        (line,) = await logged(lines, "refused-1")
    assert (line["status"], line["error_reason"]) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
    assert line["key"] == "acme-finance"
    assert line["tenant_id"] == "globex"
