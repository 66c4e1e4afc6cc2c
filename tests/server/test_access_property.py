"""Access control as a property, through the real gRPC server with authentication on (issue 16).

Random programs over two tenants and six keys (single tags, none, two keys with the same tags, wildcards): random
ingests with random tags, and random Ask, AskStream, SimulateAsk and GetSession calls, with or without explain,
with random tags, sessions and idempotency keys (so replays, reused keys and other callers' sessions all occur). Every document
carries a secret of its own; after every step, the test checks that nothing the caller received (answer text,
citations, candidates, the explained prompt with its history, stream events) holds the secret or id of a document
the caller could not read directly with the tags of that request. A model of the service predicts each call's
outcome too: PERMISSION_DENIED for a tag the key does not hold, IDEMPOTENCY_KEY_REUSED for a key sent again by
its caller with another request, a replay for the same request, NOT_FOUND for a session another caller created
(and for GetSession, for any session but the caller's own; a GetSession naming no session reads session 0).

The same programs call IndexService with every key (issue 28 item 8: index rights are bounded by tags like
reading): ListDocuments, GetDocument, GetIndexStats, DeleteDocument and GetUploadStatus, unfinished uploads, and
ingests of a document id that exists already. The model predicts what each may see: the documents of its tenant
that share a tag with the key, the untagged ones, all of them for a key of any tag. A listing holds exactly those,
a count counts exactly those, a document outside them is NOT_FOUND to GetDocument and DeleteDocument (and stays),
an upload of one is no upload (size 0), and an ingest over one is refused in its result (and changes nothing).

Documents accumulate across examples (the model knows them all); keys and sessions are fresh in every example.
Bounded and derandomized: the same EXAMPLES programs on every run.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.rpc_details import details_of
from tests.support.servers import Stubs, connected, running_server

EXAMPLES = 30
TAGS = ("finance", "hr", "legal")
TOPICS = ("harbour", "glacier", "orchard")
# name: (tenant, tags; None: any tag the request names)
KEYS: dict[str, tuple[str, frozenset[str] | None]] = {
    "acme-fin": ("acme", frozenset({"finance"})),
    "acme-fin-2": ("acme", frozenset({"finance"})),
    "acme-hr-legal": ("acme", frozenset({"hr", "legal"})),
    "acme-plain": ("acme", frozenset()),
    "acme-all": ("acme", None),
    "globex-all": ("globex", None),
}
INDEXERS = {"acme": "acme-all", "globex": "globex-all"}
SESSIONS = 3  # session ids per example
SECRET = re.compile(r"SECRET\d+X")
DOCUMENT_ID = re.compile(r"doc-\d+-x")
_documents = itertools.count()
_examples = itertools.count()


def session_id(example: int, n: int) -> str:
    """The id of session `n` of an example: every example has sessions of its own."""
    return f"0b5c2f8e-3a1d-4e7f-9c6b-{example * SESSIONS + n:012x}"


def token(name: str) -> str:
    return f"tok-{name}"


def bearer(name: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token(name)}"),)


@dataclass(frozen=True)
class Ingest:
    tenant: str
    tags: frozenset[str]
    topic: str


@dataclass(frozen=True)
class Call:
    key: str
    rpc: str  # Ask, AskStream, SimulateAsk, GetSession
    topic: str
    tags: frozenset[str] | None  # None: the request names none
    session: int | None
    idempotency: int | None
    explain: bool

    @property
    def session_named(self) -> int | None:
        """The session the request names: GetSession always names one."""
        return 0 if self.rpc == "GetSession" and self.session is None else self.session


@dataclass(frozen=True)
class Repeat:
    """An earlier call of the program again: as it was (a retry), or by another key, or about another topic; or
    its session read back (GetSession)."""

    of: int
    key: str | None
    topic: str | None
    read_back: bool = False

    def resolved(self, earlier: list[Call]) -> Call:
        call = earlier[self.of % len(earlier)]
        return Call(self.key or call.key, "GetSession" if self.read_back else call.rpc, self.topic or call.topic,
                    call.tags, call.session, call.idempotency, call.explain)  # fmt: skip


@dataclass(frozen=True)
class IndexCall:
    """An IndexService call by `key` about the `pick`-th document (or unfinished upload) the model knows."""

    key: str
    rpc: str  # ListDocuments, GetDocument, GetIndexStats, DeleteDocument, GetUploadStatus, Overwrite
    pick: int


@dataclass(frozen=True)
class PartialUpload:
    """An upload by `key` of a new document, tagged with some of the key's tags, that sends a piece and stops."""

    key: str
    tags: frozenset[str]


@dataclass
class Model:
    """What the service must hold: the documents (all examples), the replays and sessions (this example)."""

    documents: dict[str, tuple[str, frozenset[str], str]] = field(default_factory=dict)  # id -> tenant, tags, secret
    replays: dict[tuple[str, int], tuple[object, ...]] = field(default_factory=dict)  # (key, n) -> request
    owners: dict[tuple[str, int], str] = field(default_factory=dict)  # (tenant, session) -> key
    uploads: dict[str, tuple[str, frozenset[str], int]] = field(default_factory=dict)  # id -> tenant, tags, size

    def readable(self, tenant: str, tags: frozenset[str]) -> set[str]:
        """The documents a caller of `tenant` reading `tags` may read (untagged ones are visible to all)."""
        return {doc for doc, (where, doc_tags, _) in self.documents.items()
                if where == tenant and (not doc_tags or doc_tags & tags)}  # fmt: skip

    def managed(self, key: str) -> set[str]:
        """The documents `key` may list, read, count and delete: those its tags read, all of its tenant for `*`."""
        tenant, tags = KEYS[key]
        if tags is None:
            return {doc for doc, (where, _, _) in self.documents.items() if where == tenant}
        return self.readable(tenant, tags)


ingests = st.builds(Ingest, st.sampled_from(sorted(INDEXERS)), st.frozensets(st.sampled_from(TAGS), max_size=2),
                    st.sampled_from(TOPICS))  # fmt: skip
calls = st.builds(
    Call,
    st.sampled_from(sorted(KEYS)),
    st.sampled_from(["Ask", "AskStream", "SimulateAsk", "GetSession"]),
    st.sampled_from(TOPICS),
    st.none() | st.frozensets(st.sampled_from(TAGS), min_size=1, max_size=2),
    st.none() | st.integers(0, SESSIONS - 1),
    st.none() | st.integers(0, 1),
    st.booleans(),
)
repeats = st.builds(Repeat, st.integers(0, 20), st.none() | st.sampled_from(sorted(KEYS)),
                    st.none() | st.sampled_from(TOPICS))  # fmt: skip
reads = st.builds(Repeat, st.integers(0, 20), st.none() | st.sampled_from(sorted(KEYS)), st.none(), st.just(True))
# Hypothesis draws the first of a list most often: the calls whose outcomes depend on a document come first.
INDEX_RPCS = ["Overwrite", "GetDocument", "DeleteDocument", "GetUploadStatus", "GetIndexStats", "ListDocuments"]
index_calls = st.builds(IndexCall, st.sampled_from(sorted(KEYS)), st.sampled_from(INDEX_RPCS), st.integers(0, 1000))


def held_tags(key: str) -> tuple[str, ...]:
    """The tags `key` may give a document: its own, any for a key of any tag."""
    tags = KEYS[key][1]
    return TAGS if tags is None else tuple(sorted(tags))


def uploads_by(key: str) -> st.SearchStrategy[PartialUpload]:
    held = held_tags(key)
    tags = st.frozensets(st.sampled_from(held), max_size=2) if held else st.just(frozenset[str]())
    return st.builds(PartialUpload, st.just(key), tags)


partial_uploads = st.sampled_from(sorted(KEYS)).flatmap(uploads_by)


programs = st.tuples(
    st.lists(ingests, min_size=1, max_size=3),
    st.lists(st.one_of(calls, repeats, repeats, ingests, reads), min_size=6, max_size=12),
)
# IndexService programs: index calls by every key among ingests and asks (which must see deletions and overwrites).
index_programs = st.tuples(
    st.lists(ingests, min_size=2, max_size=4),
    st.lists(st.one_of(index_calls, index_calls, index_calls, partial_uploads, ingests, calls), min_size=6,
             max_size=12),
)


def keys_document() -> str:
    entries = [
        {"name": name, "token": token(name), "tenant": tenant, "tags": ["*"] if tags is None else sorted(tags),
         "index": True, "admin": True}
        for name, (tenant, tags) in KEYS.items()
    ]  # fmt: skip
    return json.dumps({"keys": entries})


async def ingest(stubs: Stubs, model: Model, step: Ingest) -> None:
    n = next(_documents)
    doc_id, secret = f"doc-{n}-x", f"SECRET{n}X"
    text = f"# {step.topic.title()} notes\n\nThe {step.topic} project code is {secret}. The {step.topic} figure is {secret}."
    document = index_pb.Document(document_id=doc_id, name=f"{doc_id}.md", content=text.encode(),
                                 media_type="text/markdown", tags=sorted(step.tags))  # fmt: skip
    await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(documents=[document], tenant_id=step.tenant),
                                      metadata=bearer(INDEXERS[step.tenant]), timeout=60)  # fmt: skip
    model.documents[doc_id] = (step.tenant, step.tags, secret)


def shows(model: Model, key: str, tenant: str, tags: frozenset[str]) -> bool:
    """Whether `key` may see a document (or upload) of `tenant` tagged `tags`."""
    key_tenant, key_tags = KEYS[key]
    return tenant == key_tenant and (key_tags is None or not tags or bool(tags & key_tags))


async def partial_upload(stubs: Stubs, model: Model, step: PartialUpload) -> str:
    """Starts an upload and leaves it unfinished; the model records what the server holds."""
    n = next(_documents)
    doc_id, tenant = f"doc-{n}-x", KEYS[step.key][0]
    header = index_pb.Document(document_id=doc_id, name=f"{doc_id}.md", media_type="text/markdown",
                               tags=sorted(step.tags))  # fmt: skip
    piece = f"# Draft {n}\n\nUnfinished.".encode()
    response = await stubs.index.UploadDocument(
        iter([index_pb.UploadDocumentRequest(document=header, data=piece)]), metadata=bearer(step.key), timeout=30
    )
    assert response.committed_size == len(piece) and not response.HasField("result")
    model.uploads[doc_id] = (tenant, step.tags, len(piece))
    return "PartialUpload"


async def index_call(stubs: Stubs, model: Model, step: IndexCall) -> str:
    """Runs an IndexService call and checks it against the model; returns its outcome."""
    tenant = KEYS[step.key][0]
    managed = model.managed(step.key)
    metadata = bearer(step.key)
    if step.rpc == "ListDocuments":
        listed = await stubs.index.ListDocuments(index_pb.ListDocumentsRequest(page_size=1000), metadata=metadata)
        assert {d.document_id for d in listed.documents} == managed, step
        return "ListDocuments"
    if step.rpc == "GetIndexStats":
        stats = await stubs.index.GetIndexStats(index_pb.GetIndexStatsRequest(), metadata=metadata)
        assert stats.document_count == len(managed), step
        return "GetIndexStats"
    if step.rpc == "GetUploadStatus":
        if not model.uploads:
            return "skipped"
        doc_id = sorted(model.uploads)[step.pick % len(model.uploads)]
        where, tags, size = model.uploads[doc_id]
        status = await stubs.index.GetUploadStatus(index_pb.GetUploadStatusRequest(document_id=doc_id), metadata=metadata)
        seen = shows(model, step.key, where, tags)
        assert status.committed_size == (size if seen else 0), (step, where, tags)
        return "GetUploadStatus " + ("seen" if seen else "hidden")
    if not model.documents:
        return "skipped"
    doc_id = sorted(model.documents)[step.pick % len(model.documents)]
    where, tags, _ = model.documents[doc_id]
    if step.rpc == "Overwrite":
        if where != tenant:
            return "skipped"  # another tenant's id would be a new document of this one
        n = next(_documents)
        new_tags, new_secret = frozenset(held_tags(step.key)[:1]), f"SECRET{n}X"
        document = index_pb.Document(document_id=doc_id, name=f"{doc_id}.md", media_type="text/markdown",
                                     content=f"# Notes\n\nThe code is {new_secret}.".encode(), tags=sorted(new_tags))  # fmt: skip
        [result] = (await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(documents=[document]),
                                                      metadata=metadata, timeout=60)).results  # fmt: skip
        if doc_id in managed:
            assert not result.error, (step, result.error)
            model.documents[doc_id] = (tenant, new_tags, new_secret)
            return "Overwrite OK"
        assert result.error and not result.chunks_indexed and not SECRET.search(result.error), step
        return "Overwrite refused"
    if step.rpc == "GetDocument":
        call = stubs.index.GetDocument(index_pb.GetDocumentRequest(document_id=doc_id), metadata=metadata)
    else:
        call = stubs.index.DeleteDocument(index_pb.DeleteDocumentRequest(document_id=doc_id), metadata=metadata)
    if doc_id not in managed:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        # As for a document that does not exist: its id (which the caller named), nothing else.
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND, (step, caught.value.code())
        assert caught.value.details() == f"no document {doc_id!r} in tenant {tenant!r}", step
        return f"{step.rpc} NOT_FOUND"
    reply = await call
    if isinstance(reply, index_pb.GetDocumentResponse):
        assert reply.document.document_id == doc_id and set(reply.document.tags) == tags
    else:
        assert reply.chunks_deleted >= 1
        del model.documents[doc_id]
    return f"{step.rpc} OK"


async def received(stubs: Stubs, step: Call, example: int) -> str | grpc.aio.AioRpcError:
    """Everything the call returned, as text; or its error."""
    fields: dict[str, object] = {"query": f"What is the {step.topic} project code?", "explain": step.explain}
    if step.tags is not None:
        fields["user_tags"] = sorted(step.tags)
    if step.session is not None:
        fields["session_id"] = session_id(example, step.session)
    if step.idempotency is not None:
        fields["idempotency_key"] = f"example-{example}-key-{step.idempotency}"
    metadata = bearer(step.key)
    try:
        if step.rpc == "GetSession":
            read = pb.GetSessionRequest(session_id=session_id(example, step.session_named or 0),
                                        user_tags=fields.get("user_tags", ()))  # type: ignore[arg-type]
            return str(await stubs.rag.GetSession(read, metadata=metadata, timeout=30))
        if step.rpc == "Ask":
            return str(await stubs.rag.Ask(pb.AskRequest(**fields), metadata=metadata, timeout=30))  # type: ignore[arg-type]
        if step.rpc == "AskStream":
            stream = stubs.rag.AskStream(pb.AskStreamRequest(**fields), metadata=metadata, timeout=30)  # type: ignore[arg-type]
            return "\n".join([str(event) async for event in stream])
        request = admin_pb.SimulateAskRequest(request=pb.AskRequest(**fields))  # type: ignore[arg-type]
        return str(await stubs.admin.SimulateAsk(request, metadata=metadata, timeout=30))
    except grpc.aio.AioRpcError as error:
        return error


def expected(model: Model, step: Call, session_tenant: str) -> tuple[str, tuple[object, ...]]:
    """The outcome the model predicts ("PERMISSION_DENIED", "IDEMPOTENCY_KEY_REUSED", "REPLAY", "NOT_FOUND", "OK"),
    and the request as the replay store fingerprints it."""
    _, key_tags = KEYS[step.key]
    effective = step.tags if step.tags is not None else (key_tags or frozenset())
    request = (step.topic, effective, step.session, step.explain or step.rpc == "SimulateAsk", step.rpc == "SimulateAsk")
    if key_tags is not None and step.tags is not None and not step.tags <= key_tags:
        return "PERMISSION_DENIED", request
    if step.rpc == "GetSession":  # only the owner reads a session; one nobody created does not exist
        return ("OK" if model.owners.get((session_tenant, step.session_named)) == step.key else "NOT_FOUND"), request
    if step.idempotency is not None and (step.key, step.idempotency) in model.replays:
        same = model.replays[(step.key, step.idempotency)] == request
        return ("REPLAY" if same else "IDEMPOTENCY_KEY_REUSED"), request
    owner = model.owners.get((session_tenant, step.session)) if step.session is not None else None
    if owner not in (None, step.key):
        return "NOT_FOUND", request
    return "OK", request


async def call(stubs: Stubs, model: Model, step: Call, example: int) -> str:
    """Run `step`, check it against the model; returns its outcome."""
    tenant, key_tags = KEYS[step.key]
    outcome, request = expected(model, step, tenant)
    result = await received(stubs, step, example)
    if isinstance(result, grpc.aio.AioRpcError):
        details = details_of(result)
        assert details.reason == outcome, (step, details.code, details.message)
        return outcome
    assert outcome in ("OK", "REPLAY"), (step, outcome, result[:300])
    if outcome == "REPLAY":
        assert "cache_hit: true" in result, (step, "a replay of the caller's own recorded answer")
    effective = step.tags if step.tags is not None else (key_tags or frozenset())
    readable = model.readable(tenant, effective)
    secrets = {model.documents[doc][2] for doc in readable}
    leaked_secrets = set(SECRET.findall(result)) - secrets
    leaked_ids = set(DOCUMENT_ID.findall(result)) - readable
    assert not leaked_secrets and not leaked_ids, (step, leaked_secrets, leaked_ids)
    if step.idempotency is not None and step.rpc != "GetSession" and outcome == "OK":
        model.replays[(step.key, step.idempotency)] = request
    if step.session is not None and step.rpc in ("Ask", "AskStream") and outcome == "OK":
        model.owners.setdefault((tenant, step.session), step.key)
    return outcome + (" with secrets" if SECRET.search(result) else "")


async def counted(stubs: Stubs, model: Model, step: Call, example: int, outcomes: collections.Counter[str]) -> None:
    """Run `step` and count its outcome (GetSession's also on its own)."""
    outcome = await call(stubs, model, step, example)
    outcomes[outcome] += 1
    if step.rpc == "GetSession":
        outcomes[f"GetSession {outcome}"] += 1


@contextlib.contextmanager
def serving(tmp_path: Path) -> Iterator[tuple[asyncio.AbstractEventLoop, Stubs]]:
    """A loop of its own (hypothesis runs synchronously) and a server with authentication on and KEYS, stubs to it."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # grpc.aio asks the policy for the current loop: another test may have cleared it
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(keys_document())
    server_context = running_server(tmp_path / "data", auth_enabled=True, api_keys_file=str(keys_file),
                                    cache_max_entries=1000, demo_corpus=False)  # fmt: skip
    server = loop.run_until_complete(server_context.__aenter__())
    channel_context = connected(server)
    stubs = loop.run_until_complete(channel_context.__aenter__())
    try:
        yield loop, stubs
    finally:
        loop.run_until_complete(channel_context.__aexit__(None, None, None))
        loop.run_until_complete(server_context.__aexit__(None, None, None))
        loop.close()
        asyncio.set_event_loop(None)


def test_no_caller_ever_receives_what_it_could_not_read(tmp_path: Path) -> None:
    with serving(tmp_path) as (loop, stubs):
        check_reads(loop, stubs)


def check_reads(loop: asyncio.AbstractEventLoop, stubs: Stubs) -> None:
    """The programs of the test above (the body of its first version: derandomized, its programs stay the same)."""
    model = Model()
    outcomes: collections.Counter[str] = collections.Counter()

    # No shrinking: a failing program is reported as generated, within the test's time limit.
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
    @given(program=programs)
    def check(program: tuple[list[Ingest], list[Ingest | Call | Repeat]]) -> None:
        example = next(_examples)
        model.replays.clear()
        model.owners.clear()
        first, then = program
        earlier: list[Call] = []
        for step in (*first, *then):
            if isinstance(step, Ingest):
                loop.run_until_complete(ingest(stubs, model, step))
            elif isinstance(step, Repeat) and not earlier:
                continue
            else:
                step = step.resolved(earlier) if isinstance(step, Repeat) else step
                earlier.append(step)
                loop.run_until_complete(counted(stubs, model, step, example, outcomes))

    check()
    print(f"\n{EXAMPLES} examples (derandomized), {len(model.documents)} documents, outcomes: {dict(outcomes)}")
    assert next(_examples) >= EXAMPLES
    for outcome in ("OK with secrets", "REPLAY with secrets", "IDEMPOTENCY_KEY_REUSED", "NOT_FOUND",
                    "PERMISSION_DENIED", "GetSession OK with secrets", "GetSession NOT_FOUND"):
        assert outcomes[outcome], f"the programs never gave {outcome}: {dict(outcomes)}"


def test_index_calls_touch_only_the_documents_the_keys_tags_show(tmp_path: Path) -> None:
    with serving(tmp_path) as (loop, stubs):
        model = Model()
        outcomes: collections.Counter[str] = collections.Counter()

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
        @given(program=index_programs)
        def check(program: tuple[list[Ingest], list[Ingest | Call | IndexCall | PartialUpload]]) -> None:
            example = next(_examples)
            model.replays.clear()
            model.owners.clear()
            for step in (*program[0], *program[1]):
                if isinstance(step, Ingest):
                    loop.run_until_complete(ingest(stubs, model, step))
                elif isinstance(step, IndexCall):
                    outcomes[loop.run_until_complete(index_call(stubs, model, step))] += 1
                elif isinstance(step, PartialUpload):
                    outcomes[loop.run_until_complete(partial_upload(stubs, model, step))] += 1
                else:
                    loop.run_until_complete(counted(stubs, model, step, example, outcomes))

        check()
        print(f"\n{EXAMPLES} examples (derandomized), {len(model.documents)} documents, outcomes: {dict(outcomes)}")
        for outcome in ("ListDocuments", "GetIndexStats", "GetDocument OK", "GetDocument NOT_FOUND",
                        "DeleteDocument OK", "DeleteDocument NOT_FOUND", "GetUploadStatus seen",
                        "GetUploadStatus hidden", "Overwrite OK", "Overwrite refused", "OK with secrets"):
            assert outcomes[outcome], f"the programs never gave {outcome}: {dict(outcomes)}"
