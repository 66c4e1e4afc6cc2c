"""Authentication over a real channel: bearer tokens from a keys file, mapped to a tenant and the tags the key
may read. Every refusal is checked with its status code and its decoded google.rpc details."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc
from ragsvc.v1 import rag_service_pb2 as pb

from ragsvc.server.app import RagServer
from ragsvc.server.auth import token_digest
from tests.server.conftest import running_server
from tests.support.rpc_details import details_of

KEYS = {
    "keys": [
        {"name": "default-reader", "token": "tok-default", "tenant": "default"},
        {"name": "acme-finance", "token": "tok-finance", "tenant": "acme", "tags": ["finance"]},
        {"name": "acme-plain", "token": "tok-plain", "tenant": "acme", "tags": []},
        # Stored as a digest: the file need not hold the secret.
        {"name": "acme-admin", "token_sha256": token_digest("tok-admin"), "tenant": "acme", "tags": ["*"],
         "index": True},
    ]
}  # fmt: skip
QUESTION = "What is the travel budget for the finance team?"
FINANCE_DOC = b"# Travel budget\n\nThe finance team has a travel budget of 12000 euros per quarter for conferences."
HR_DOC = b"# Salaries\n\nThe HR team reviews salaries every March and publishes the salary bands internally."


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture(scope="module")
async def auth_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    keys_file = tmp_path_factory.mktemp("keys") / "keys.json"
    keys_file.write_text(json.dumps(KEYS))
    async with running_server(
        tmp_path_factory.mktemp("auth-data"), auth_enabled=True, api_keys_file=str(keys_file)
    ) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            index = index_service_pb2_grpc.IndexServiceStub(channel)
            documents = [
                index_pb.Document(document_id="travel", name="travel.md", content=FINANCE_DOC,
                                  media_type="text/markdown", tags=["finance"]),
                index_pb.Document(document_id="salaries", name="salaries.md", content=HR_DOC,
                                  media_type="text/markdown", tags=["hr"]),
            ]  # fmt: skip
            await index.IngestDocuments(
                index_pb.IngestDocumentsRequest(documents=documents), metadata=bearer("tok-admin"), timeout=30
            )
        yield server


@pytest.fixture(scope="module")
async def auth_channel(auth_server: RagServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(auth_server.address) as channel:
        yield channel


@pytest.fixture
def rag(auth_channel: grpc.aio.Channel) -> rag_service_pb2_grpc.RagServiceStub:
    return rag_service_pb2_grpc.RagServiceStub(auth_channel)


@pytest.fixture
def index(auth_channel: grpc.aio.Channel) -> index_service_pb2_grpc.IndexServiceStub:
    return index_service_pb2_grpc.IndexServiceStub(auth_channel)


async def test_a_call_without_a_token_is_unauthenticated(rag) -> None:
    call = rag.Ask(pb.AskRequest(query=QUESTION), timeout=10)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    details = details_of(caught.value)
    assert details.code == grpc.StatusCode.UNAUTHENTICATED
    assert details.reason == "UNAUTHENTICATED" and details.error_info.domain == "ragsvc.v1"
    assert "bearer" in details.message.lower()
    assert dict(await call.initial_metadata())["x-request-id"], "a refused call still gets its request id"


@pytest.mark.parametrize("metadata", [bearer("tok-wrong"), (("authorization", "Basic dG9rLWFkbWlu"),),
                                      (("authorization", "Bearer"),)], ids=["unknown", "basic", "empty"])  # fmt: skip
async def test_a_bad_token_is_unauthenticated(rag, metadata) -> None:  # noqa: ANN001
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


async def test_health_and_reflection_need_no_token(auth_channel) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    health = health_pb2_grpc.HealthStub(auth_channel)
    response = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert response.status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(auth_channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    responses = [r async for r in stub.ServerReflectionInfo(iter([request]), timeout=5)]
    assert responses[0].list_services_response.service


def test_keys_documents_are_checked(tmp_path: Path) -> None:
    from ragsvc.errors import InvalidRequest
    from ragsvc.server.auth import KeyStore

    bad = [
        "not json",
        '{"keys": {}}',
        '{"keys": [{"token": "a"}]}',  # no tenant
        '{"keys": [{"token": "a", "token_sha256": "00", "tenant": "t"}]}',
        '{"keys": [{"token": "a", "tenant": "t"}, {"token": "a", "tenant": "u"}]}',
        '{"keys": [{"token": "a", "tenant": "t", "tags": "finance"}]}',
    ]
    for text in bad:
        with pytest.raises(InvalidRequest) as caught:
            KeyStore.from_json(text, source="RAG_API_KEYS")
        assert caught.value.violations[0].field == "RAG_API_KEYS", text
    with pytest.raises(InvalidRequest):
        KeyStore.load(keys_file=str(tmp_path / "missing.json"), keys_json="")
    store = KeyStore.load(keys_file="", keys_json=json.dumps(KEYS))
    assert store.lookup("tok-admin").tags is None and store.lookup("tok-admin").can_index
    assert store.lookup("tok-finance").tags == frozenset({"finance"}) and store.lookup("nope") is None


async def test_auth_without_keys_refuses_to_start(tmp_path: Path) -> None:
    from ragsvc.errors import InvalidRequest

    with pytest.raises(InvalidRequest) as caught:
        async with running_server(tmp_path, auth_enabled=True):
            pass
    assert caught.value.violations[0].field == "RAG_AUTH_ENABLED"


async def test_a_refused_call_is_logged_with_its_status_and_reason(rag) -> None:
    from tests.server.test_request_log import request_log

    with request_log() as lines:
        with pytest.raises(grpc.aio.AioRpcError):
            await rag.Ask(pb.AskRequest(query=QUESTION, tenant_id="globex"), metadata=bearer("tok-finance"), timeout=10)
    (line,) = (json.loads(line) for line in lines)
    assert (line["status"], line["error_reason"]) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
    assert line["key"] == "acme-finance"
    assert line["tenant_id"] == "globex"
