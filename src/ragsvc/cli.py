"""`ragsvc serve | reindex | llm | ingest | docs | ask | chat | session | owners | erase`: the server, the rewrite of
its index after an upgrade, a local LLM for it, and clients that talk to it over gRPC.

Clients send RAG_API_TOKEN, when set, as their bearer token (for a server with RAG_AUTH_ENABLED)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
from google.longrunning import operations_pb2_grpc as lro_grpc
from google.longrunning import operations_proto_pb2 as lro
from google.protobuf import duration_pb2, json_format
from grpc_health.v1 import health_pb2

from ragsvc import chat, local_llm
from ragsvc.chat import call_metadata
from ragsvc.config import ServerSettings, Settings
from ragsvc.domain import SourceDocument
from ragsvc.errors import FieldViolation, InvalidRequest, RagError
from ragsvc.ingest.loaders import FoundFile, find_files, read_document
from ragsvc.ingest.media import MEDIA_TYPES
from ragsvc.ingest.sidecar import read_sidecar
from ragsvc.metadata import MetadataValue, read_entry
from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import admin_service_pb2_grpc as admin_grpc
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc as index_grpc
from ragsvc.v1 import operations_pb2 as ops_pb
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc as rag_grpc
from ragsvc.wire import convert
from ragsvc.wire.status import from_rpc_error, from_rpc_status

INGEST_BATCH = 8
# A request of IngestDocuments stays under this, and a larger document is uploaded in pieces of this size (the
# server accepts messages of up to RAG_MAX_RECEIVE_MESSAGE_BYTES, 16 MiB by default).
MESSAGE_BYTES = 4 * 1024 * 1024
# A batch (or one file) larger than this is "large": it is ingested as a long-running operation, followed by its
# progress, instead of within one call. 1 MiB of text is ~1,200 chunks, ~1.5 to 2 minutes of embedding on two
# cores (docs/operations.md): longer than a call should be held open, and than a user waits without a sign of life.
OPERATION_BYTES = 1024 * 1024
OPERATION_POLL_S = 1.0  # each WaitOperation of the progress bar waits at most this long
UPLOAD_ATTEMPTS = 3
UNAVAILABLE_HINT = "is `make serve` running?"
# A client's deadline: longer than the server's own budget for an answer (RAG_TOTAL_TIMEOUT_SECONDS, 30 s; 120 s
# against `make llm`, whose small model on two busy cores takes a minute), so that the server's ends it, with its reason.
CLIENT_DEADLINE_S = 180.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragsvc", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the gRPC server (settings from RAG_* environment variables)")
    reindex = commands.add_parser(
        "reindex",
        help="with the server stopped, rewrite the index terms stored with every chunk using this version's analyser "
        "(what `serve` asks for when the index was written by another version; nothing is re-embedded); same "
        "settings as `serve` (docs/operating.md)",
        description="Rewrite the index terms stored with every chunk of every tenant, from the chunk's stored text, "
        "with this version's analyser, then record its version in the index. Run it with the server stopped and the "
        "settings of `ragsvc serve` (RAG_DATA_DIR, or RAG_QDRANT_URL and RAG_QDRANT_COLLECTION; the embedder's "
        "settings pick the embedded shard). Nothing is re-embedded. Interrupted, the index keeps its old version "
        "(the server still refuses it) and a second run finishes the job.",
    )
    reindex.add_argument("--page-size", type=_positive, help="chunks read and rewritten at a time (default 256)")

    llm = commands.add_parser("llm", help="run a local LLM for ragsvc: llama.cpp with a small model (see `make llm`)")
    llm.add_argument(
        "--model",
        choices=sorted(local_llm.MODELS),
        default=local_llm.DEFAULT_MODEL,
        help=f"the model (default: {local_llm.DEFAULT_MODEL})",
    )
    llm.add_argument("--host", default="127.0.0.1")
    llm.add_argument("--port", type=int, default=local_llm.DEFAULT_PORT)
    llm.add_argument("--threads", type=int, default=local_llm.default_threads(), help="llama.cpp threads (default: cores - 1)")
    llm.add_argument("--env", action="store_true", help="print the settings of `ragsvc serve` against it, and exit")

    def client(name: str, help_text: str, parent: Any = commands) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = parent.add_parser(name, help=help_text)
        sub.add_argument("--address", help="server host:port (default: RAG_GRPC_ADDRESS or 127.0.0.1:50051)")
        sub.add_argument("--tenant", default="", help="tenant id (default: the server's default tenant)")
        sub.add_argument("--timeout", type=float, default=CLIENT_DEADLINE_S, help="deadline in seconds (default: %(default)s)")
        return sub

    def streamed(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub.add_argument(
            "--stream",
            choices=sorted(chat.STREAM_POLICIES),
            help="validated: complete sentences whose citations hold; raw: every token, a draft replaced by the final "
            "answer when it differs (default: the server's RAG_STREAM_POLICY)",
        )
        return sub

    ask = streamed(client("ask", "ask a question and stream the answer"))
    ask.add_argument("query")
    ask.add_argument("--tag", action="append", default=[], dest="tags", help="a user tag (repeatable)")
    ask.add_argument("--top-k", type=int)
    ask.add_argument(
        "--filter",
        default="",
        metavar="EXPRESSION",
        help='only documents whose metadata match, e.g. "published_at >= 2024-01-01 AND '
        'doc_type IN (act, judgment)" (docs/filters.md)',
    )
    ask.add_argument("--model", default="")
    ask.add_argument("--explain", action="store_true", help="also print the packed chunks and prompt")
    ask.add_argument("--json", action="store_true", help="print the final answer as JSON instead of streaming")

    ingest = client(
        "ingest",
        f"index {', '.join(MEDIA_TYPES)} files; folders are read recursively, each file named by its path in the "
        "folder (hidden, dependency, build and virtualenv folders are skipped: vendor, dist, build, target ...); unchanged "
        "files are skipped",
    )
    ingest.set_defaults(timeout=600.0)
    ingest.add_argument("paths", nargs="+", type=Path)
    ingest.add_argument("--tag", action="append", default=[], dest="tags", help="an access tag (repeatable)")
    ingest.add_argument(
        "--trust", type=float, help="source trust, 0 to 1, used in ranking (default: the weight of the source type)"
    )
    ingest.add_argument("--published", default="", help="publication date YYYY-MM-DD, used in ranking")
    ingest.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY[:TYPE]=VALUE",
        help="a metadata value of every file (repeatable), e.g. jurisdiction=India, year=1872, "
        "source_type=statute; the type is read from the value (true/false, a number, an ISO date or "
        "date-time, else a string) unless TYPE (string, number, bool, timestamp) names it. A file's "
        "NAME.meta.json sidecar adds to these and wins over them",
    )
    ingest.add_argument("--confidential", action="store_true", help="readable only with the clearance tag")
    ingest.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="only files whose path in the folder or name matches (repeatable), e.g. '*.md'",
    )
    ingest.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="leave out files and folders whose path in the folder or name matches (repeatable), "
        "e.g. 'drafts' or 'archive/*.pdf'",
    )
    ingest.add_argument("--id", dest="document_id", help="the document id of a single file (default: its name)")
    ingest.add_argument(
        "--max-message-bytes",
        type=int,
        default=MESSAGE_BYTES,
        help="requests stay under this; larger documents are uploaded in pieces of this size",
    )
    ingest.add_argument(
        "--operation-bytes",
        type=int,
        default=OPERATION_BYTES,
        help="a batch of files (or one file) larger than this is ingested as a long-running "
        "operation, whose progress the bar shows; it goes on on the server if this command stops",
    )

    docs = commands.add_parser("docs", help="what the index holds: list, show or remove documents")
    docs_commands = docs.add_subparsers(dest="docs_command", required=True)
    client("list", "list the tenant's documents, with the index's totals", docs_commands)
    client("show", "one document's details", docs_commands).add_argument("document_id")
    client("rm", "remove documents from the index", docs_commands).add_argument("document_ids", nargs="+")

    session = commands.add_parser("session", help="a stored conversation: show its turns, or delete it")
    session_commands = session.add_subparsers(dest="session_command", required=True)
    show_session = client("show", "the session's turns, with the documents each answer cited", session_commands)
    show_session.add_argument("session_id")
    show_session.add_argument("--tag", action="append", default=[], dest="tags", help="read with this tag (repeatable)")
    client("rm", "delete the session and its turns (the right to be forgotten)", session_commands).add_argument("session_id")

    owners = commands.add_parser("owners", help="the tag-owner directory: who routed questions about a tag go to")
    owners_commands = owners.add_subparsers(dest="owners_command", required=True)
    client("list", "every tag with an owner", owners_commands)
    set_owner = client("set", "make a user (with an email) the owner of a tag", owners_commands)
    for name in ("tag", "user_id", "email"):
        set_owner.add_argument(name)
    client("rm", "remove a tag's owner (its questions go to the admin)", owners_commands).add_argument("tag")

    erase = client(
        "erase",
        "erase every text the server stored from one caller: its sessions, the text of its audit rows, its "
        "long-running operations and its cached answers (an admin key's call, AdminService.EraseCaller)",
    )
    erased = erase.add_mutually_exclusive_group(required=True)
    erased.add_argument("--key", dest="key_name", help="the caller's API key name (in --tenant, default the admin key's)")
    erased.add_argument(
        "--peer",
        help="a caller without a key: its peer as the request log shows it, e.g. "
        "ipv4:10.0.0.7 (every tenant unless --tenant names one)",
    )

    streamed(client("chat", "an interactive conversation: streamed answers, sources, follow-ups in one session")).add_argument(
        "--tag", action="append", default=[], dest="tags", help="a user tag (repeatable)"
    )
    return parser


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


# -- ask ------------------------------------------------------------------------------------------------------


def _print_sources(answer: pb.Answer) -> None:
    if answer.citations:
        print("\nSources:")
        for c in answer.citations:
            where = ", ".join(
                part
                for part in (
                    c.document_name,
                    f"page {c.page_number}" if c.HasField("page_number") else "",
                    f"section {c.section!r}" if c.HasField("section") else "",
                )
                if part
            )
            print(f"  [#{c.marker}] {where} (relevance {c.relevance_score:.2f})")
    elif candidates := chat.format_candidates(answer):
        print("\n" + "\n".join(candidates))
    print("\n" + answer_status(answer))


def answer_status(answer: pb.Answer) -> str:
    """One line: grounded or why not, confidence, action, model, tokens, and whether the cache answered."""
    status = "grounded" if answer.grounded else pb.RefusalReason.Name(answer.refusal_reason)
    action = pb.Action.Name(answer.action)
    if answer.action == pb.ACTION_ROUTE:
        action += f" to {answer.route.owner_email}"
    parts = [status, f"confidence {answer.confidence.overall:.0f}", action]
    if answer.model:  # refusals before generation name no model
        parts.append(f"model {answer.model}")
    usage = answer.usage
    if usage.prompt_tokens or usage.completion_tokens:
        parts.append(f"{usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens")
    if answer.flags.cache_hit:
        parts.append("cache hit (no stage ran; the tokens are the original answer's)")
    return "; ".join(parts)


async def _ask(args: argparse.Namespace, address: str) -> None:
    request = pb.AskStreamRequest(
        query=args.query,
        tenant_id=args.tenant,
        user_tags=args.tags,
        explain=args.explain,
        retrieval=pb.RetrievalOptions(top_k=args.top_k, filter=pb.MetadataFilter(expression=args.filter)),
        generation=pb.GenerationOptions(model=args.model),
        stream_policy=_stream_policy(args),
    )
    answer = pb.Answer()
    view = chat.AnswerView(sys.stdout)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = rag_grpc.RagServiceStub(channel)
        async for message in stub.AskStream(request, timeout=args.timeout, metadata=call_metadata()):
            kind = message.WhichOneof("event")
            if kind == "text_delta" and not args.json:
                view.delta(message.text_delta)
            elif kind == "answer":
                answer = message.answer
    if args.json:  # the final answer only: a refused answer's text is the refusal (its draft: --explain)
        print(json_format.MessageToJson(answer))
        return
    view.final(answer)
    _print_sources(answer)
    if args.explain:
        print("\nPrompt:")
        for message in answer.explanation.prompt:
            print(f"--- {pb.Role.Name(message.role)}\n{message.content}")


def _stream_policy(args: argparse.Namespace) -> pb.StreamPolicy:
    return chat.STREAM_POLICIES[args.stream] if args.stream else pb.STREAM_POLICY_UNSPECIFIED


# -- ingest ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _IngestReport:
    """Counts what happened to each file, prints a line per document and a summary at the end."""

    total: int
    done: int = 0
    chunks: int = 0
    unchanged: int = 0
    failures: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def failed(self, what: str, why: str) -> str:
        self.done += 1
        self.failures.append((what, why))
        return f"[{self.done}/{self.total}] {what}: error: {why}"

    def result(self, path: Path, result: index_pb.DocumentResult) -> str:
        if result.error:
            return self.failed(f"{result.document_id} ({path})", result.error)
        self.done += 1
        self.chunks += result.chunks_indexed
        self.unchanged += result.unchanged
        if result.unchanged:
            return f"[{self.done}/{self.total}] {result.document_id}: unchanged"
        seconds = result.elapsed.ToTimedelta().total_seconds()
        return f"[{self.done}/{self.total}] {result.document_id}: {result.chunks_indexed} chunks ({seconds:.2f} s)"

    def finish(self) -> int:
        if self.failures:
            print(f"failed ({len(self.failures)}):")
            for what, why in self.failures:
                print(f"  {what}: {why}")
        indexed = self.done - len(self.failures)
        summary = f"{indexed} of {self.total} documents indexed ({self.unchanged} unchanged), {self.chunks} chunks written"
        print(summary + (f"; {len(self.failures)} failed" if self.failures else ""), flush=True)
        return 1 if self.failures else 0


def _metadata_options(entries: Sequence[str]) -> dict[str, MetadataValue]:
    """The --meta entries as metadata; InvalidRequest naming each bad one."""
    metadata: dict[str, MetadataValue] = {}
    violations = []
    for entry in entries:
        spec, equals, raw = entry.partition("=")
        try:
            if not equals:
                raise ValueError(f"{entry!r} is not KEY[:TYPE]=VALUE")
            key, value = read_entry(spec, raw)
        except ValueError as exc:
            violations.append(FieldViolation("--meta", str(exc)))
            continue
        metadata[key] = value
    if violations:
        raise InvalidRequest(violations)
    return metadata


async def _ingest(args: argparse.Namespace, address: str) -> int:
    """Sends the files in batches over IndexService.IngestDocuments, with a progress bar (by bytes) on a terminal and
    one line per document; exit status 1 when any file failed, after the others went in. A batch larger than
    --operation-bytes goes as a long-running operation (SubmitIngest; a document larger than a request may be, over
    UploadDocument in pieces, then as an operation), the bar following its progress. Each file's metadata is
    --meta's, with its sidecar's (`ragsvc.ingest.sidecar`) over it."""
    from tqdm import tqdm

    common = _metadata_options(args.meta)
    selection = find_files(args.paths, include=args.include, exclude=args.exclude, document_id=args.document_id)
    if skipped := selection.skipped_folders:
        shown = ", ".join(str(p) for p in skipped[:4]) + (f" and {len(skipped) - 4} more" if len(skipped) > 4 else "")
        print(
            f"skipped {len(skipped)} folder{'s' * (len(skipped) != 1)} (hidden, dependencies, build output, virtualenvs): "
            f"{shown}; name one as a path to ingest it"
        )
    report = _IngestReport(len(selection.files) + len(selection.problems))
    if not report.total:
        raise InvalidRequest([], f"no {', '.join(MEDIA_TYPES)} files under the given paths")
    bar = tqdm(
        total=sum(f.size for f in selection.files),
        unit="B",
        unit_scale=True,
        desc=f"ingesting {report.total} documents",
        disable=None,  # no bar when stderr is not a terminal; the per-document lines remain
        file=sys.stderr,
    )
    with bar:
        for problem in selection.problems:
            bar.write(report.failed(str(problem.path), problem.reason))
        options = [("grpc.max_send_message_length", args.max_message_bytes * 2)]
        metadata = {"trust": args.trust, "published_at": args.published, "confidential": args.confidential}
        async with grpc.aio.insecure_channel(address, options=options) as channel:
            stub = index_grpc.IndexServiceStub(channel)
            for batch in _batches(selection.files, args.max_message_bytes):
                documents: list[tuple[FoundFile, SourceDocument]] = []
                for found in batch:
                    try:
                        document = read_document(found, tenant_id=args.tenant, tags=args.tags)
                        own = {**common, **read_sidecar(found.path)}
                    except (OSError, ValueError) as exc:
                        why = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
                        bar.write(report.failed(str(found.path), why))
                        bar.update(found.size)
                        continue
                    documents.append((found, dataclasses.replace(document, metadata=own, **metadata)))
                if not documents:
                    continue
                size = sum(found.size for found, _ in documents)
                ids = [document.document_id for _, document in documents]
                if len(documents) == 1 and size > args.max_message_bytes:
                    operation = await _upload(stub, documents[0][1], args)
                    results = await _followed(channel, operation, ids, bar, size, args)
                else:
                    request = index_pb.IngestDocumentsRequest(
                        tenant_id=args.tenant, documents=[convert.document_to_proto(d) for _, d in documents]
                    )
                    if size > args.operation_bytes:
                        operation = await stub.SubmitIngest(request, timeout=args.timeout, metadata=call_metadata())
                        results = await _followed(channel, operation, ids, bar, size, args)
                    else:
                        response = await stub.IngestDocuments(request, timeout=args.timeout, metadata=call_metadata())
                        results = list(response.results)
                        bar.update(size)
                for (found, _), result in zip(documents, results, strict=True):
                    bar.write(report.result(found.path, result))
                bar.set_postfix(chunks=report.chunks, failed=len(report.failures))
    return report.finish()


async def _followed(
    channel: grpc.aio.Channel,
    operation: lro.Operation,
    document_ids: Sequence[str],
    bar: Any,
    size: int,
    args: argparse.Namespace,
) -> list[index_pb.DocumentResult]:
    """The results of the operation ingesting the documents `document_ids`, once done; meanwhile the bar advances over the batch's
    `size` bytes as the operation's metadata reports documents and chunks done. When the operation failed, each
    document's result is its error."""
    bar.write(f"{operation.name}: ingesting {size} bytes as a long-running operation (it goes on if this command "
              "stops: follow it with google.longrunning.Operations/WaitOperation)")  # fmt: skip
    operations = lro_grpc.OperationsStub(channel)
    shown = 0
    while True:
        metadata = ops_pb.IngestOperationMetadata()
        operation.metadata.Unpack(metadata)
        done = metadata.documents_done / max(metadata.documents_total, 1)
        if metadata.chunks_total:
            done = max(done, metadata.chunks_done / metadata.chunks_total)
        advance = size if operation.done else int(size * done)
        bar.update(advance - shown)
        shown = advance
        bar.set_postfix(chunks=f"{metadata.chunks_done}/{metadata.chunks_total}", refresh=False)
        if operation.done:
            break
        wait = lro.WaitOperationRequest(name=operation.name, timeout=duration_pb2.Duration(seconds=int(OPERATION_POLL_S)))
        operation = await operations.WaitOperation(wait, timeout=args.timeout, metadata=call_metadata())
    if operation.HasField("error"):
        error = from_rpc_status(operation.error)
        why = f"{operation.name} failed: {error.reason}: {error.message}"
        return [index_pb.DocumentResult(document_id=document_id, error=why) for document_id in document_ids]
    response = index_pb.IngestDocumentsResponse()
    operation.response.Unpack(response)
    return list(response.results)


def _batches(files: Sequence[FoundFile], max_bytes: int) -> list[list[FoundFile]]:
    """At most INGEST_BATCH files and `max_bytes` of content per request; a larger file alone (it is uploaded)."""
    batches: list[list[FoundFile]] = []
    size = 0
    for found in files:
        if not batches or len(batches[-1]) >= INGEST_BATCH or size + found.size > max_bytes:
            batches.append([])
            size = 0
        batches[-1].append(found)
        size += found.size
    return batches


async def _upload(stub: index_grpc.IndexServiceStub, document: SourceDocument, args: argparse.Namespace) -> lro.Operation:
    """Streams the document over UploadDocument in pieces of --max-message-bytes, resuming what the server holds of
    an earlier upload of it (a broken stream is resumed up to UPLOAD_ATTEMPTS times); the operation that ingests
    it."""
    content = document.content
    sha256 = hashlib.sha256(content).hexdigest()
    header = convert.document_to_proto(dataclasses.replace(document, content=b""))
    status_request = index_pb.GetUploadStatusRequest(tenant_id=args.tenant, document_id=document.document_id)
    piece = args.max_message_bytes

    async def messages(start: int) -> AsyncIterator[index_pb.UploadDocumentRequest]:
        offsets = range(start, len(content), piece) or [start]
        for i, offset in enumerate(offsets):
            last = offset + piece >= len(content)
            yield index_pb.UploadDocumentRequest(
                tenant_id=args.tenant if i == 0 else "",
                document=header if i == 0 else None,
                write_offset=offset,
                data=content[offset : offset + piece],
                finish_write=last,
                content_sha256=sha256 if last else "",
                long_running=last,
            )

    for attempt in range(1, UPLOAD_ATTEMPTS + 1):
        held = (await stub.GetUploadStatus(status_request, timeout=args.timeout, metadata=call_metadata())).committed_size
        start = held if held <= len(content) else 0
        try:
            response: index_pb.UploadDocumentResponse = await stub.UploadDocument(
                messages(start), timeout=args.timeout, metadata=call_metadata()
            )
            return response.operation
        except grpc.aio.AioRpcError as exc:
            stale = start > 0 and [v.field for v in getattr(from_rpc_error(exc), "violations", ())] == ["content_sha256"]
            if attempt == UPLOAD_ATTEMPTS or not (stale or exc.code() == grpc.StatusCode.UNAVAILABLE):
                raise
    raise AssertionError("unreachable")  # the last attempt returns or raises


# -- docs -----------------------------------------------------------------------------------------------------


def _size(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    scaled = size / 1000
    for unit in ("kB", "MB"):
        if scaled < 1000:
            return f"{scaled:.1f} {unit}"
        scaled /= 1000
    return f"{scaled:.1f} GB"


def _ingested(document: index_pb.IndexedDocument) -> str:
    if not document.HasField("ingest_time"):
        return "-"
    return datetime.fromtimestamp(document.ingest_time.ToNanoseconds() / 1e9).strftime("%Y-%m-%d %H:%M")


async def _docs(args: argparse.Namespace, address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = index_grpc.IndexServiceStub(channel)
        call: dict[str, Any] = {"timeout": args.timeout, "metadata": call_metadata()}
        if args.docs_command == "list":
            documents: list[index_pb.IndexedDocument] = []
            token = ""
            while True:
                request = index_pb.ListDocumentsRequest(tenant_id=args.tenant, page_size=1000, page_token=token)
                page = await stub.ListDocuments(request, **call)
                documents += page.documents
                if not (token := page.next_page_token):
                    break
            stats = await stub.GetIndexStats(index_pb.GetIndexStatsRequest(tenant_id=args.tenant), **call)
            width = max([len("DOCUMENT"), *(len(d.document_id) for d in documents)])
            print(f"{'DOCUMENT':<{width}}  CHUNKS      SIZE  INGESTED          NAME")
            for d in documents:
                size = _size(d.size_bytes) if d.content_sha256 else "-"
                print(f"{d.document_id:<{width}}  {d.chunk_count:>6}  {size:>8}  {_ingested(d):<16}  {d.name}")
            keys = ", ".join(f"{k.name} ({k.type})" for k in stats.metadata_keys)
            print(
                f"{stats.document_count} documents, {stats.chunk_count} chunks, {_size(stats.content_bytes)}; "
                f"{stats.engine}" + (f"; metadata keys: {keys}" if keys else "")
            )
            return 0
        if args.docs_command == "show":
            named = index_pb.GetDocumentRequest(tenant_id=args.tenant, document_id=args.document_id)
            print(json_format.MessageToJson((await stub.GetDocument(named, **call)).document))
            return 0
        failed = 0
        for document_id in args.document_ids:
            delete = index_pb.DeleteDocumentRequest(tenant_id=args.tenant, document_id=document_id)
            try:
                deleted = await stub.DeleteDocument(delete, **call)
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                print(f"{document_id}: not in the index", file=sys.stderr)
                failed += 1
                continue
            print(f"{document_id}: removed ({deleted.chunks_deleted} chunks)")
        return 1 if failed else 0


# -- session and owners ---------------------------------------------------------------------------------------


def _local_time(stamp: Any) -> str:
    return datetime.fromtimestamp(stamp.ToNanoseconds() / 1e9).strftime("%Y-%m-%d %H:%M:%S")


async def _session(args: argparse.Namespace, address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = rag_grpc.RagServiceStub(channel)
        call: dict[str, Any] = {"timeout": args.timeout, "metadata": call_metadata()}
        if args.session_command == "rm":
            delete = pb.DeleteSessionRequest(tenant_id=args.tenant, session_id=args.session_id)
            deleted = await stub.DeleteSession(delete, **call)
            print(f"{args.session_id}: deleted ({deleted.turns_deleted} turns; the text of "
                  f"{deleted.audit_records_erased} audit rows erased)")  # fmt: skip
            return 0
        turns: list[pb.SessionTurn] = []
        token = ""
        while True:
            request = pb.GetSessionRequest(tenant_id=args.tenant, session_id=args.session_id, user_tags=args.tags,
                                           page_size=1000, page_token=token)  # fmt: skip
            page = await stub.GetSession(request, **call)
            turns += page.session.turns
            if not (token := page.next_page_token):
                break
        session = page.session
        print(f"session {session.session_id} (tenant {session.tenant_id}): {len(turns)} turns you may read, "
              f"{_local_time(session.create_time)} to {_local_time(session.update_time)}")  # fmt: skip
        for turn in turns:
            print(f"\n[{turn.turn_number}] {_local_time(turn.create_time)}\nQ: {turn.query}\nA: {turn.answer}")
            if turn.cited_document_ids:
                print(f"sources: {', '.join(turn.cited_document_ids)}")
        return 0


async def _owners(args: argparse.Namespace, address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = admin_grpc.AdminServiceStub(channel)
        call: dict[str, Any] = {"timeout": args.timeout, "metadata": call_metadata()}
        if args.owners_command == "set":
            owner = admin_pb.TagOwner(name=f"tagOwners/{args.tag}", owner_user_id=args.user_id, owner_email=args.email)
            await stub.SetTagOwner(admin_pb.SetTagOwnerRequest(tag_owner=owner), **call)
            print(f"{args.tag}: owned by {args.user_id} <{args.email}>")
            return 0
        if args.owners_command == "rm":
            await stub.DeleteTagOwner(admin_pb.DeleteTagOwnerRequest(name=f"tagOwners/{args.tag}"), **call)
            print(f"{args.tag}: no owner now (routed to the admin)")
            return 0
        owners: list[admin_pb.TagOwner] = []
        token = ""
        while True:
            page = await stub.ListTagOwners(admin_pb.ListTagOwnersRequest(page_size=1000, page_token=token), **call)
            owners += page.tag_owners
            if not (token := page.next_page_token):
                break
        tags = [owner.name.removeprefix("tagOwners/") for owner in owners]
        width = max([len("TAG"), *map(len, tags)])
        print(f"{'TAG':<{width}}  OWNER")
        for tag, owner in zip(tags, owners, strict=True):
            print(f"{tag:<{width}}  {owner.owner_user_id} <{owner.owner_email}>")
        return 0


async def _erase(args: argparse.Namespace, address: str) -> int:
    request = admin_pb.EraseCallerRequest(tenant_id=args.tenant, key_name=args.key_name or "", peer=args.peer or "")
    async with grpc.aio.insecure_channel(address) as channel:
        erased = await admin_grpc.AdminServiceStub(channel).EraseCaller(request, timeout=args.timeout, metadata=call_metadata())
    print(f"erased {f'key {args.key_name}' if args.key_name else f'peer {args.peer}'}: "
          f"{erased.sessions_deleted} sessions ({erased.session_messages_deleted} messages), "
          f"the text of {erased.audit_records_erased} audit rows, {erased.operations_deleted} operations, "
          f"{erased.cached_answers_dropped} cached and {erased.replayed_answers_dropped} replayable answers")  # fmt: skip
    return 0


# -- errors and main ------------------------------------------------------------------------------------------


def _print_error(headline: str, error: RagError) -> None:
    """`error: <headline>: <message>`, then each field violation on a line of its own, once (an InvalidRequest's
    message ends with them)."""
    violations = getattr(error, "violations", ())
    listed = "; ".join(f"{v.field}: {v.description}" for v in violations)
    message = error.message.removesuffix(listed).rstrip(": ") if listed else error.message
    parts = [part for part in (headline, message) if part]
    if not parts:  # local problems only: one line each
        for violation in violations:
            print(f"error: {violation.field}: {violation.description}", file=sys.stderr)
        return
    print("error: " + ": ".join(parts), file=sys.stderr)
    for violation in violations:
        print(f"  {violation.field}: {violation.description}", file=sys.stderr)


def _print_rpc_error(exc: grpc.RpcError, address: str) -> None:
    """The error as a user can act on it: an unreachable server named, each violation once."""
    error = from_rpc_error(exc)
    code = exc.code()
    print(file=sys.stderr)  # after whatever was streamed
    if code == grpc.StatusCode.UNAVAILABLE and error.reason == "INTERNAL":  # no ragsvc status: the transport's
        print(f"error: cannot reach ragsvc at {address} ({UNAVAILABLE_HINT})\n  {error.message}", file=sys.stderr)
        return
    _print_error(f"{code.name} {error.reason}", error)


async def _reachable(address: str, deadline_s: float) -> None:
    """Raises the RpcError of a server that does not answer a health check."""
    async with grpc.aio.insecure_channel(address) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        await check(health_pb2.HealthCheckRequest(), timeout=deadline_s)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    serving = args.command == "serve"
    logging.basicConfig(
        level=logging.INFO if serving else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # No line per request of the LLM server's health probe; and a client reading a PDF's title has nothing to say
    # about a damaged file (the server reports it when the document is ingested).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    address = ""
    try:
        if serving:
            from ragsvc.server.workers import serve_processes  # only the serve command loads the server

            return asyncio.run(serve_processes(Settings.from_env()))
        if args.command == "reindex":
            from ragsvc.server.reindex import reindex

            asyncio.run(reindex(Settings.from_env(), page_size=args.page_size))
            return 0
        if args.command == "llm":
            if args.env:
                print(" ".join(f"{k}={v}" for k, v in local_llm.serve_env(args.host, args.port, args.model).items()))
            else:
                local_llm.serve(model=args.model, host=args.host, port=args.port, threads=args.threads)
            return 0
        address = args.address or os.environ.get("RAG_GRPC_ADDRESS") or ServerSettings().grpc_address
        if args.command == "ingest":
            return asyncio.run(_ingest(args, address))
        if args.command == "docs":
            return asyncio.run(_docs(args, address))
        if args.command == "session":
            return asyncio.run(_session(args, address))
        if args.command == "owners":
            return asyncio.run(_owners(args, address))
        if args.command == "erase":
            return asyncio.run(_erase(args, address))
        if args.command == "chat":
            asyncio.run(_reachable(address, args.timeout))
            asyncio.run(
                chat.run(address, tenant=args.tenant, tags=args.tags, deadline_s=args.timeout, stream_policy=_stream_policy(args))
            )
            return 0
        asyncio.run(_ask(args, address))
        return 0
    except grpc.RpcError as exc:
        _print_rpc_error(exc, address)
        return 1
    except InvalidRequest as exc:
        _print_error("", exc)
        return 2
    except RagError as exc:  # a dependency that `serve` (or `reindex`) could not open
        _print_error("cannot start" if serving else f"cannot {args.command}", exc)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
