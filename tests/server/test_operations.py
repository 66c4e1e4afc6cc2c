"""Long-running operations through a real server: SubmitAsk and SubmitIngest, and every google.longrunning.Operations
RPC with its error paths, for callers told apart by API keys (an operation is its submitter's, as a session is).

The server generates with a scripted OpenAI-compatible LLM on a real socket, whose first token a test can delay to
keep an ask running. Its chunks are 512 tokens, so that an ingest long enough to be watched and cancelled between
two embedding batches (64 chunks each) stays a few seconds of embedding on two cores.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from google.longrunning import operations_pb2_grpc as lro_grpc
from google.longrunning import operations_proto_pb2 as lro
from google.protobuf import duration_pb2

from ragsvc.server.app import RagServer
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import operations_pb2 as ops_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.cli import run_cli
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.polling import eventually
from tests.support.rpc_details import details_of
from tests.support.servers import Stubs, connected, running_server

KEYS = {"keys": [
    {"name": "alice", "token": "alice-token", "tenant": "acme", "tags": ["*"], "index": True},
    {"name": "bob", "token": "bob-token", "tenant": "acme", "tags": ["*"], "index": True},
    {"name": "ops", "token": "ops-token", "tenant": "acme", "tags": ["*"], "admin": True},
    {"name": "eve", "token": "eve-token", "tenant": "other", "tags": ["*"], "admin": True},
]}  # fmt: skip
QUESTION = "How long is the grace period of the drain?"
RUNBOOK = "# Drain\n\nOn SIGTERM the server drains: the grace period is forty seconds, then the last calls end.\n"
UNKNOWN = "operations/" + "0" * 32
WAIT_S = 30.0


def key(name: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {name}-token"),)


def words_text(seed: str, words: int) -> bytes:
    """Plain text of `words` distinct-ish words: sentences that each name `seed` and a number."""
    sentences = (f"The {seed} register holds entry number {i} of the ledger." for i in range(words // 9 + 1))
    return "\n".join(sentences).encode()  # a line a sentence: well within RAG_INGEST_MAX_LINE_CHARS


@pytest.fixture(scope="module")
async def llm() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer(deltas=["The grace period is forty seconds [#1]."]) as server:
        yield server


@pytest.fixture
def slow_llm(llm: ScriptedOpenAIServer) -> Iterator[ScriptedOpenAIServer]:
    """The LLM holding its first token for a minute: an ask stays running until it is cancelled."""
    llm.first_token_delay_s = 60.0
    yield llm
    llm.first_token_delay_s = 0.0


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedOpenAIServer) -> AsyncIterator[RagServer]:
    async with running_server(
        tmp_path_factory.mktemp("operations"),
        demo_corpus=False,
        auth_enabled=True,
        api_keys=json.dumps(KEYS),
        generator="openai",
        openai_base_url=llm.base_url,
        chunk_tokens=512,
        operation_poll_s=0.05,
        operation_wait_max_s=WAIT_S,
        operation_max_running=1,  # of each kind: one more ask waits QUEUED ...
        operation_max_queued=1,  # ... and one more than that is refused
    ) as server:
        yield server


@pytest.fixture(scope="module")
async def stubs(served: RagServer) -> AsyncIterator[Stubs]:
    async with connected(served) as stubs:
        runbook = index_pb.Document(document_id="runbook", content=RUNBOOK.encode(), media_type="text/markdown")
        await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(documents=[runbook]), metadata=key("alice"))
        yield stubs


@pytest.fixture(scope="module")
def operations(stubs: Stubs) -> lro_grpc.OperationsStub:
    return lro_grpc.OperationsStub(stubs.channel)


async def waited(operations: lro_grpc.OperationsStub, name: str, who: str = "alice") -> lro.Operation:
    """The operation once done (WaitOperation, again while it is not)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        operation = await operations.WaitOperation(lro.WaitOperationRequest(name=name), metadata=key(who), timeout=WAIT_S + 5)
        if operation.done:
            return operation
    raise AssertionError(f"{name} is not done after {WAIT_S} s")


def ask_metadata(operation: lro.Operation) -> ops_pb.AskOperationMetadata:
    metadata = ops_pb.AskOperationMetadata()
    assert operation.metadata.Unpack(metadata)
    return metadata


def ingest_metadata(operation: lro.Operation) -> ops_pb.IngestOperationMetadata:
    metadata = ops_pb.IngestOperationMetadata()
    assert operation.metadata.Unpack(metadata)
    return metadata


async def failure(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call  # type: ignore[misc]
    return raised.value


# --- asks ------------------------------------------------------------------------------------------------------


async def test_submit_ask_answers_as_ask_does_and_reports_its_life_in_the_metadata(
    stubs: Stubs, operations: lro_grpc.OperationsStub
) -> None:
    request = pb.AskRequest(query=QUESTION)
    asked = (await stubs.rag.Ask(request, metadata=key("alice"), timeout=30)).answer
    submitted = await stubs.rag.SubmitAsk(request, metadata=key("alice"), timeout=30)
    assert not submitted.done and submitted.name.startswith("operations/")
    operation = await waited(operations, submitted.name)

    response = pb.AskResponse()
    assert operation.response.Unpack(response) and not operation.HasField("error")
    answer = response.answer
    assert answer.grounded and "forty seconds" in answer.text
    assert (answer.text, answer.grounded, answer.refusal_reason) == (asked.text, asked.grounded, asked.refusal_reason)
    assert [c.document_id for c in answer.citations] == [c.document_id for c in asked.citations] == ["runbook"]
    metadata = ask_metadata(operation)
    assert metadata.state == ops_pb.OPERATION_STATE_SUCCEEDED and metadata.tenant_id == "acme"
    assert metadata.request_sha256 == hashlib.sha256(request.SerializeToString(deterministic=True)).hexdigest()
    times = metadata.times
    assert times.create_time.ToNanoseconds() <= times.start_time.ToNanoseconds() <= times.end_time.ToNanoseconds()
    assert await operations.GetOperation(lro.GetOperationRequest(name=submitted.name), metadata=key("alice")) == operation


async def test_a_bad_question_fails_submit_ask_itself_and_no_operation_is_made(
    stubs: Stubs, operations: lro_grpc.OperationsStub
) -> None:
    before = await operations.ListOperations(lro.ListOperationsRequest(page_size=1000), metadata=key("ops"))
    error = await failure(stubs.rag.SubmitAsk(pb.AskRequest(query=" "), metadata=key("ops")))
    details = details_of(error)
    assert details.code == grpc.StatusCode.INVALID_ARGUMENT and details.bad_request is not None
    assert [v.field for v in details.bad_request.field_violations] == ["query"]
    error = await failure(stubs.rag.SubmitAsk(pb.AskRequest(query=QUESTION, tenant_id="other"), metadata=key("ops")))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    after = await operations.ListOperations(lro.ListOperationsRequest(page_size=1000), metadata=key("ops"))
    assert len(after.operations) == len(before.operations)


async def test_a_running_ask_is_cancelled_its_llm_call_closed_and_cancel_again_is_refused(
    stubs: Stubs, operations: lro_grpc.OperationsStub, slow_llm: ScriptedOpenAIServer
) -> None:
    streams = len(slow_llm.streams)
    submitted = await stubs.rag.SubmitAsk(pb.AskRequest(query=QUESTION), metadata=key("alice"))
    await eventually(lambda: len(slow_llm.streams) > streams, within_s=10)
    running = await operations.GetOperation(lro.GetOperationRequest(name=submitted.name), metadata=key("alice"))
    assert not running.done and ask_metadata(running).state == ops_pb.OPERATION_STATE_RUNNING

    await operations.CancelOperation(lro.CancelOperationRequest(name=submitted.name), metadata=key("alice"))
    operation = await waited(operations, submitted.name)
    assert operation.error.code == grpc.StatusCode.CANCELLED.value[0] and not operation.HasField("response")
    assert ask_metadata(operation).state == ops_pb.OPERATION_STATE_CANCELLED
    connection = slow_llm.streams[streams].request.connection
    await asyncio.wait_for(connection.closed.wait(), 5)
    assert connection.closed_by == "client", "the LLM call stopped with the operation"

    error = await failure(operations.CancelOperation(lro.CancelOperationRequest(name=submitted.name), metadata=key("alice")))
    details = details_of(error)
    assert (details.code, details.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "OPERATION_DONE")


async def test_wait_returns_an_unfinished_operation_at_its_timeout_and_before_the_callers_deadline(
    stubs: Stubs, operations: lro_grpc.OperationsStub, slow_llm: ScriptedOpenAIServer
) -> None:
    submitted = await stubs.rag.SubmitAsk(pb.AskRequest(query=QUESTION), metadata=key("alice"))
    started = time.monotonic()
    request = lro.WaitOperationRequest(name=submitted.name, timeout=duration_pb2.Duration(nanos=300_000_000))
    operation = await operations.WaitOperation(request, metadata=key("alice"), timeout=10)
    assert not operation.done and 0.3 <= time.monotonic() - started < 3
    started = time.monotonic()
    operation = await operations.WaitOperation(lro.WaitOperationRequest(name=submitted.name), metadata=key("alice"), timeout=1.0)
    assert not operation.done and time.monotonic() - started < 1.0, "answered within the caller's deadline"
    negative = lro.WaitOperationRequest(name=submitted.name, timeout=duration_pb2.Duration(seconds=-1))
    error = await failure(operations.WaitOperation(negative, metadata=key("alice")))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    await operations.CancelOperation(lro.CancelOperationRequest(name=submitted.name), metadata=key("alice"))
    assert (await waited(operations, submitted.name)).error.code == grpc.StatusCode.CANCELLED.value[0]


async def test_asks_past_the_running_limit_wait_queued_past_the_queue_are_refused_and_a_queued_one_cancels_at_once(
    stubs: Stubs, operations: lro_grpc.OperationsStub, slow_llm: ScriptedOpenAIServer
) -> None:
    streams = len(slow_llm.streams)
    running = await stubs.rag.SubmitAsk(pb.AskRequest(query=QUESTION), metadata=key("alice"))
    await eventually(lambda: len(slow_llm.streams) > streams, within_s=10)
    queued = await stubs.rag.SubmitAsk(pb.AskRequest(query=QUESTION), metadata=key("alice"))
    details = details_of(await failure(stubs.rag.SubmitAsk(pb.AskRequest(query=QUESTION), metadata=key("alice"))))
    assert (details.code, details.reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED")
    assert details.retry_after_s is not None
    waiting = await operations.GetOperation(lro.GetOperationRequest(name=queued.name), metadata=key("alice"))
    assert ask_metadata(waiting).state == ops_pb.OPERATION_STATE_QUEUED
    assert not ask_metadata(waiting).times.HasField("start_time")

    await operations.CancelOperation(lro.CancelOperationRequest(name=queued.name), metadata=key("alice"))
    cancelled = await waited(operations, queued.name)
    assert cancelled.error.code == grpc.StatusCode.CANCELLED.value[0], "cancelled while it waited, not after"
    assert not ask_metadata(cancelled).times.HasField("start_time")
    assert len(slow_llm.streams) == streams + 1, "it never reached the LLM"
    await operations.CancelOperation(lro.CancelOperationRequest(name=running.name), metadata=key("alice"))
    await waited(operations, running.name)


# --- the Operations RPCs' errors, and who may see what ------------------------------------------------------------


async def test_every_operations_rpc_refuses_a_bad_name_and_answers_not_found_for_unknown_and_others_operations(
    stubs: Stubs, operations: lro_grpc.OperationsStub
) -> None:
    submitted = await stubs.rag.SubmitAsk(pb.AskRequest(query=QUESTION), metadata=key("alice"))
    await waited(operations, submitted.name)
    calls = {
        "GetOperation": lambda name, who: operations.GetOperation(lro.GetOperationRequest(name=name), metadata=key(who)),
        "WaitOperation": lambda name, who: operations.WaitOperation(lro.WaitOperationRequest(name=name), metadata=key(who)),
        "CancelOperation": lambda name, who: operations.CancelOperation(lro.CancelOperationRequest(name=name), metadata=key(who)),
        "DeleteOperation": lambda name, who: operations.DeleteOperation(lro.DeleteOperationRequest(name=name), metadata=key(who)),
    }
    for method, call in calls.items():
        for bad in ("", "operations/xyz", "runbook", submitted.name.upper()):
            details = details_of(await failure(call(bad, "alice")))
            assert details.code == grpc.StatusCode.INVALID_ARGUMENT, (method, bad)
            assert details.bad_request is not None and [v.field for v in details.bad_request.field_violations] == ["name"]
        for name, who in ((UNKNOWN, "alice"), (submitted.name, "bob"), (submitted.name, "eve")):
            details = details_of(await failure(call(name, who)))
            assert (details.code, details.reason) == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND"), (method, name, who)
        error = await failure(call(submitted.name, "nobody"))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED

    # The owner sees it; an admin of another tenant may not delete it, one of its own tenant may.
    assert (await calls["GetOperation"](submitted.name, "alice")).done
    await calls["DeleteOperation"](submitted.name, "ops")
    for method in ("GetOperation", "DeleteOperation"):
        assert (await failure(calls[method](submitted.name, "alice"))).code() == grpc.StatusCode.NOT_FOUND


async def test_list_operations_is_the_callers_own_newest_first_a_page_at_a_time(
    stubs: Stubs, operations: lro_grpc.OperationsStub
) -> None:
    mine = []
    for _ in range(3):  # one after the other: this server runs one ask at a time and queues one
        mine.append((await stubs.rag.SubmitAsk(pb.AskRequest(query=QUESTION), metadata=key("bob"))).name)
        await waited(operations, mine[-1], "bob")
    theirs = await stubs.rag.SubmitAsk(pb.AskRequest(query=QUESTION), metadata=key("alice"))

    pages: list[list[str]] = []
    first_token = token = ""
    while True:
        page = await operations.ListOperations(
            lro.ListOperationsRequest(name="operations", page_size=2, page_token=token), metadata=key("bob")
        )
        pages.append([o.name for o in page.operations])
        token = page.next_page_token
        first_token = first_token or token
        if not token:
            break
    listed = [name for page in pages for name in page]
    assert listed[:3] == mine[::-1] and theirs.name not in listed and all(len(p) <= 2 for p in pages)
    done = await operations.ListOperations(lro.ListOperationsRequest(filter="done = true"), metadata=key("bob"))
    assert {o.name for o in done.operations} >= set(mine) and all(o.done for o in done.operations)
    running = await operations.ListOperations(lro.ListOperationsRequest(filter="done = false"), metadata=key("bob"))
    assert not set(mine) & {o.name for o in running.operations}

    for bad, field in (
        (lro.ListOperationsRequest(name="projects/x/operations"), "name"),
        (lro.ListOperationsRequest(filter="state = RUNNING"), "filter"),
        (lro.ListOperationsRequest(page_size=1001), "page_size"),
        (lro.ListOperationsRequest(page_token="not-a-token"), "page_token"),
        (lro.ListOperationsRequest(filter="done = true", page_token=first_token), "page_token"),  # another listing's
    ):
        details = details_of(await failure(operations.ListOperations(bad, metadata=key("bob"))))
        assert details.code == grpc.StatusCode.INVALID_ARGUMENT and details.bad_request is not None
        assert field in [v.field for v in details.bad_request.field_violations]
    await waited(operations, theirs.name)


# --- ingests ---------------------------------------------------------------------------------------------------


async def test_an_ingest_reports_progress_and_a_cancel_mid_way_leaves_nothing_of_the_document(
    stubs: Stubs, operations: lro_grpc.OperationsStub
) -> None:
    content = words_text("zanzibarite", 60_000)  # ~150 chunks of 512 tokens: three embedding batches
    document = index_pb.Document(document_id="ledger-cancelled", content=content, media_type="text/plain")
    submitted = await stubs.index.SubmitIngest(index_pb.IngestDocumentsRequest(documents=[document]), metadata=key("alice"))
    assert ingest_metadata(submitted).documents_total == 1

    seen: list[ops_pb.IngestOperationMetadata] = []
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        operation = await operations.GetOperation(lro.GetOperationRequest(name=submitted.name), metadata=key("alice"))
        seen.append(ingest_metadata(operation))
        if seen[-1].chunks_done > 0:
            break
        await asyncio.sleep(0.05)
    progress = seen[-1]
    assert 0 < progress.chunks_done < progress.chunks_total, "cancelled between two batches of one document"
    assert progress.current_document_id == "ledger-cancelled" and progress.state == ops_pb.OPERATION_STATE_RUNNING
    assert [m.chunks_done for m in seen] == sorted(m.chunks_done for m in seen)

    await operations.CancelOperation(lro.CancelOperationRequest(name=submitted.name), metadata=key("alice"))
    operation = await waited(operations, submitted.name)
    assert operation.error.code == grpc.StatusCode.CANCELLED.value[0]
    metadata = ingest_metadata(operation)
    assert metadata.state == ops_pb.OPERATION_STATE_CANCELLED and metadata.documents_done == 0

    lookup = index_pb.GetDocumentRequest(document_id="ledger-cancelled")
    error = await failure(stubs.index.GetDocument(lookup, metadata=key("alice")))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    listed = await stubs.index.ListDocuments(index_pb.ListDocumentsRequest(page_size=1000), metadata=key("alice"))
    assert "ledger-cancelled" not in {d.document_id for d in listed.documents}
    answer = (await stubs.rag.Ask(pb.AskRequest(query="Which entry does the zanzibarite register hold?"),
                                  metadata=key("alice"), timeout=30)).answer  # fmt: skip
    assert "ledger-cancelled" not in {c.document_id for c in answer.citations}, "nothing of it is searchable"


async def test_an_ingest_goes_on_when_its_caller_disconnects_and_running_it_again_writes_no_duplicate(
    served: RagServer, stubs: Stubs, operations: lro_grpc.OperationsStub
) -> None:
    document = index_pb.Document(document_id="ledger", content=words_text("quillwort", 3_000), media_type="text/plain")
    request = index_pb.IngestDocumentsRequest(documents=[document])
    async with connected(served) as gone:  # submitted, and the channel closed at once
        submitted = await gone.index.SubmitIngest(request, metadata=key("alice"))
    operation = await waited(operations, submitted.name)
    response = index_pb.IngestDocumentsResponse()
    assert operation.response.Unpack(response)
    [result] = response.results
    assert result.chunks_indexed > 1 and not result.error and not result.unchanged
    metadata = ingest_metadata(operation)
    progress = (metadata.documents_done, metadata.chunks_done, metadata.chunks_total)
    assert progress == (1, result.chunks_indexed, result.chunks_indexed)

    async def chunks() -> int:
        stored = await stubs.index.GetDocument(index_pb.GetDocumentRequest(document_id="ledger"), metadata=key("alice"))
        return stored.document.chunk_count

    assert await chunks() == result.chunks_indexed
    again = await waited(operations, (await stubs.index.SubmitIngest(request, metadata=key("alice"))).name)
    assert again.response.Unpack(response) and response.results[0].unchanged
    assert await chunks() == result.chunks_indexed, "no duplicate"
    request.documents[0].content = words_text("quillwort", 1_500)
    changed = await waited(operations, (await stubs.index.SubmitIngest(request, metadata=key("alice"))).name)
    assert changed.response.Unpack(response)
    assert 0 < response.results[0].chunks_indexed < result.chunks_indexed
    assert await chunks() == response.results[0].chunks_indexed, "replaced: none of the longer version's chunks left"


async def test_ragsvc_ingest_sends_a_large_text_file_as_an_operation_and_follows_it(
    served: RagServer, stubs: Stubs, tmp_path: Path
) -> None:
    """Past --max-message-bytes a file is uploaded in pieces, then ingested as an operation."""
    path = tmp_path / "register.txt"
    path.write_bytes(words_text("hornblende", 20_000))  # ~150 KB: three pieces of 64 KiB
    code, out, err = await run_cli(
        "ingest", str(path), "--address", served.address, "--max-message-bytes", "65536", "--operation-bytes", "65536",
        env={"RAG_API_TOKEN": "alice-token"}, timeout_s=120,
    )  # fmt: skip
    assert code == 0, out + err
    assert "as a long-running operation" in out and "operations/" in out
    assert "1 of 1 documents indexed" in out
    stored = await stubs.index.GetDocument(index_pb.GetDocumentRequest(document_id="register"), metadata=key("alice"))
    assert stored.document.chunk_count > 1 and stored.document.size_bytes == path.stat().st_size
