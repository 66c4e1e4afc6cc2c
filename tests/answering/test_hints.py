"""A NO_CHUNKS refusal says which case it is (answering/hints.py), over a real server: a tenant that holds no
documents, or documents whose tags the request did not pass; and with authentication on, only what the caller's key
may know: a key that sees none of its tenant's documents gets exactly the refusal sentence, whatever the tenant holds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from ragsvc.access import token_digest
from ragsvc.prompts import REFUSAL_SENTENCE
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.servers import Stubs, connected, running_server

QUESTION = "What is the travel budget for the finance team?"
DOCUMENTS = {  # document id -> (its tag, its content)
    "travel": ("finance", b"# Travel budget\n\nThe finance team has a travel budget of 12000 euros per quarter."),
    "salaries": ("hr", b"# Salaries\n\nThe HR team reviews salaries every March and publishes the bands."),
}
KEYS = {
    "keys": [
        {"name": "indexer", "token_sha256": token_digest("tok-index"), "tenant": "acme", "tags": ["*"], "index": True},
        {"name": "any-tag", "token": "tok-any", "tenant": "acme", "tags": ["*"]},
        {"name": "three-tags", "token": "tok-three", "tenant": "acme", "tags": ["finance", "hr", "legal"]},
        {"name": "finance-and-legal", "token": "tok-two", "tenant": "acme", "tags": ["finance", "legal"]},
        {"name": "ops", "token": "tok-ops", "tenant": "acme", "tags": ["ops"]},
        {"name": "ops-elsewhere", "token": "tok-ops-empty", "tenant": "empty", "tags": ["ops"]},
        {"name": "any-elsewhere", "token": "tok-any-empty", "tenant": "empty", "tags": ["*"]},
    ]
}


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


async def ingest(stubs: Stubs, token: str | None) -> None:
    documents = [index_pb.Document(document_id=document_id, name=f"{document_id}.md", content=content,
                                   media_type="text/markdown", tags=[tag])
                 for document_id, (tag, content) in DOCUMENTS.items()]  # fmt: skip
    request = index_pb.IngestDocumentsRequest(tenant_id="acme", documents=documents)
    await stubs.index.IngestDocuments(request, metadata=bearer(token) if token else (), timeout=60)


async def refusal(stubs: Stubs, *, tenant: str = "", tags: tuple[str, ...] = (), token: str | None = None) -> str:
    """The text of the NO_CHUNKS refusal of QUESTION (AssertionError when it is answered otherwise)."""
    request = pb.AskRequest(query=QUESTION, tenant_id=tenant, user_tags=tags)
    answer = (await stubs.rag.Ask(request, metadata=bearer(token) if token else (), timeout=30)).answer
    assert answer.refusal_reason == pb.REFUSAL_REASON_NO_CHUNKS, answer
    assert not answer.candidates and not answer.citations
    return answer.text


@pytest.fixture(scope="module")
async def open_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stubs]:
    async with running_server(tmp_path_factory.mktemp("hints-open"), demo_corpus=False) as server:
        async with connected(server) as stubs:
            await ingest(stubs, None)
            yield stubs


@pytest.fixture(scope="module")
async def auth_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stubs]:
    keys = tmp_path_factory.mktemp("hints-keys") / "keys.json"
    keys.write_text(json.dumps(KEYS))
    data = tmp_path_factory.mktemp("hints-auth")
    async with running_server(data, demo_corpus=False, auth_enabled=True, api_keys_file=str(keys)) as server:
        async with connected(server) as stubs:
            await ingest(stubs, "tok-index")
            yield stubs


async def test_a_tenant_without_documents_is_named(open_server: Stubs) -> None:
    assert await refusal(open_server, tenant="beez") == f"{REFUSAL_SENTENCE} Tenant 'beez' holds no documents."


async def test_documents_whose_tags_were_not_passed_are_counted(open_server: Stubs) -> None:
    assert await refusal(open_server, tenant="acme") == f"{REFUSAL_SENTENCE} 2 documents here carry tags you did not pass."
    text = await refusal(open_server, tenant="acme", tags=("legal",))
    assert text == f"{REFUSAL_SENTENCE} 2 documents here carry tags you did not pass."


async def test_with_auth_a_key_that_sees_nothing_gets_the_refusal_alone(auth_server: Stubs) -> None:
    """The `ops` key sees no document of acme (they carry finance and hr): it learns neither that there are some,
    nor how many; and in a tenant that holds none, the same words (it cannot tell the two apart)."""
    assert await refusal(auth_server, token="tok-ops") == REFUSAL_SENTENCE
    assert await refusal(auth_server, token="tok-ops-empty") == REFUSAL_SENTENCE


async def test_with_auth_what_the_key_may_see_is_said(auth_server: Stubs) -> None:
    """A key of any tag may know its tenant is empty; a key asking with one of its tags (legal) is told of the
    documents its other tags show, and only of those: the hr document is not counted for a key without hr."""
    assert await refusal(auth_server, token="tok-any-empty") == f"{REFUSAL_SENTENCE} Tenant 'empty' holds no documents."
    text = await refusal(auth_server, token="tok-three", tags=("legal",))
    assert text == f"{REFUSAL_SENTENCE} 2 documents here carry tags you did not pass."
    text = await refusal(auth_server, token="tok-two", tags=("legal",))
    assert text == f"{REFUSAL_SENTENCE} 1 document here carries tags you did not pass."
