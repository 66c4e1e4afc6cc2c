"""`ragsvc serve | ingest | ask | chat`: the server, and clients that talk to it over gRPC.

Clients send RAG_API_TOKEN, when set, as their bearer token (for a server with RAG_AUTH_ENABLED)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import grpc
from google.protobuf import json_format

from ragsvc import chat
from ragsvc.chat import call_metadata
from ragsvc.config import ServerSettings, Settings
from ragsvc.domain import SourceDocument
from ragsvc.errors import InvalidRequest
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc as index_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc as rag_grpc
from ragsvc.wire import convert
from ragsvc.wire.status import from_rpc_error

INGEST_BATCH = 8
INGEST_BATCH_BYTES = 4 * 1024 * 1024  # the server accepts messages of up to 16 MiB


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragsvc", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the gRPC server (settings from RAG_* environment variables)")

    def client(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--address", help="server host:port (default: RAG_GRPC_ADDRESS or 127.0.0.1:50051)")
        sub.add_argument("--tenant", default="", help="tenant id (default: the server's default tenant)")
        sub.add_argument("--timeout", type=float, default=60.0, help="deadline in seconds")
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
    ask.add_argument("--model", default="")
    ask.add_argument("--explain", action="store_true", help="also print the packed chunks and prompt")
    ask.add_argument("--json", action="store_true", help="print the final answer as JSON instead of streaming")

    ingest = client("ingest", "index .txt, .md and .pdf files (directories are read recursively)")
    ingest.add_argument("paths", nargs="+", type=Path)
    ingest.add_argument("--tag", action="append", default=[], dest="tags", help="an access tag (repeatable)")
    ingest.add_argument("--trust", type=float, default=1.0, help="source trust, 0 to 1, used in ranking")
    ingest.add_argument("--published", default="", help="publication date YYYY-MM-DD, used in ranking")
    ingest.add_argument("--confidential", action="store_true", help="readable only with the clearance tag")

    streamed(client("chat", "an interactive conversation: streamed answers, sources, follow-ups in one session")).add_argument(
        "--tag", action="append", default=[], dest="tags", help="a user tag (repeatable)"
    )
    return parser


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
    elif answer.candidates:
        print("\nNearest candidates (below the score gate):")
        for c in answer.candidates:
            print(f"  {c.document_name} {c.source_id} (relevance {c.relevance_score:.2f})")
    status = "grounded" if answer.grounded else pb.RefusalReason.Name(answer.refusal_reason)
    action = pb.Action.Name(answer.action)
    if answer.action == pb.ACTION_ROUTE:
        action += f" to {answer.route.owner_email}"
    print(f"\n{status}; confidence {answer.confidence.overall:.0f}; {action}; model {answer.model}")


async def _ask(args: argparse.Namespace, address: str) -> None:
    request = pb.AskStreamRequest(
        query=args.query,
        tenant_id=args.tenant,
        user_tags=args.tags,
        explain=args.explain,
        retrieval=pb.RetrievalOptions(top_k=args.top_k),
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


async def _ingest(args: argparse.Namespace, address: str) -> int:
    """Sends the documents in batches over IndexService.IngestDocuments, with a progress bar (by bytes) on a
    terminal and one line per document; exit status 1 when any document failed."""
    from tqdm import tqdm

    from ragsvc.ingest.loaders import source_documents_from_paths

    documents = source_documents_from_paths(args.paths, tenant_id=args.tenant, tags=args.tags)
    if not documents:
        raise InvalidRequest([], "no .txt, .md or .pdf files under the given paths")
    done = chunks = failed = 0
    bar = tqdm(
        total=sum(len(d.content) for d in documents),
        unit="B",
        unit_scale=True,
        desc=f"ingesting {len(documents)} documents",
        disable=None,  # no bar when stderr is not a terminal; the per-document lines remain
        file=sys.stderr,
    )
    with bar:
        async with grpc.aio.insecure_channel(
            address, options=[("grpc.max_send_message_length", INGEST_BATCH_BYTES * 4)]
        ) as channel:
            stub = index_grpc.IndexServiceStub(channel)
            for batch in _ingest_batches(documents):
                request = index_pb.IngestDocumentsRequest(
                    tenant_id=args.tenant,
                    documents=[
                        convert.document_to_proto(
                            dataclasses.replace(
                                d, trust=args.trust, published_at=args.published, confidential=args.confidential
                            )
                        )
                        for d in batch
                    ],
                )
                response = await stub.IngestDocuments(request, timeout=args.timeout, metadata=call_metadata())
                for document, result in zip(batch, response.results, strict=True):
                    done += 1
                    chunks += result.chunks_indexed
                    failed += bool(result.error)
                    seconds = result.elapsed.ToTimedelta().total_seconds()
                    outcome = f"error: {result.error}" if result.error else f"{result.chunks_indexed} chunks"
                    bar.write(f"[{done}/{len(documents)}] {result.document_id}: {outcome} ({seconds:.2f} s)")
                    bar.update(len(document.content))
                bar.set_postfix(chunks=chunks, failed=failed)
    print(f"{done - failed} of {done} documents indexed, {chunks} chunks", flush=True)
    return 1 if failed else 0


def _ingest_batches(documents: Sequence[SourceDocument]) -> list[list[SourceDocument]]:
    """At most INGEST_BATCH documents and INGEST_BATCH_BYTES of content per request (a larger document alone)."""
    batches: list[list[SourceDocument]] = []
    size = 0
    for document in documents:
        if not batches or len(batches[-1]) >= INGEST_BATCH or size + len(document.content) > INGEST_BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(document)
        size += len(document.content)
    return batches


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "serve":
            from ragsvc.server.app import serve  # only the serve command loads the server

            asyncio.run(serve(Settings.from_env()))
            return 0
        address = args.address or os.environ.get("RAG_GRPC_ADDRESS") or ServerSettings().grpc_address
        if args.command == "ingest":
            return asyncio.run(_ingest(args, address))
        if args.command == "chat":
            asyncio.run(chat.run(address, tenant=args.tenant, tags=args.tags, deadline_s=args.timeout,
                                 stream_policy=_stream_policy(args)))
            return 0
        asyncio.run(_ask(args, address))
        return 0
    except grpc.RpcError as exc:
        error = from_rpc_error(exc)
        print(f"\nerror: {exc.code().name} {error.reason}: {error.message}", file=sys.stderr)
        for violation in getattr(error, "violations", ()):
            print(f"  {violation.field}: {violation.description}", file=sys.stderr)
        return 1
    except InvalidRequest as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
