"""`ragsvc chat`: an interactive terminal client. Answers stream as they arrive, sources follow each answer, the
session id carries the conversation (a follow-up such as "and the default?" is searched with what it refers to),
and Ctrl-C stops the current answer (the server sees the cancel) without leaving the chat. It opens with example
questions drawn from the tenant's own documents, or none.

What streamed is a draft until the final answer arrives: when the final text differs (a refusal, a re-run), the
streamed text is withdrawn (erased on a terminal) under a visible notice, and the final text is shown instead. With
the validated stream policy (the server's default) a refused draft never shows at all."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
import uuid
from collections.abc import Callable
from typing import TextIO

import grpc

from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc as index_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc as rag_grpc

EXAMPLE_COUNT = 3  # example questions the welcome shows, from as many documents of the tenant
QUIT = {"exit", "quit", ":q"}
STREAM_POLICIES = {"validated": pb.STREAM_POLICY_VALIDATED, "raw": pb.STREAM_POLICY_RAW}


def call_metadata() -> tuple[tuple[str, str], ...]:
    """The bearer token from RAG_API_TOKEN, for a server with authentication on; nothing otherwise."""
    token = os.environ.get("RAG_API_TOKEN", "")
    return (("authorization", f"Bearer {token}"),) if token else ()


# The heading of a refused answer's candidates: why they are listed, by the refusal's reason.
CANDIDATES_HEADINGS = {
    pb.REFUSAL_REASON_SCORE_GATE: "Nearest candidates (below the score gate):",
    pb.REFUSAL_REASON_INSUFFICIENT_EVIDENCE: "Closest passages (none of them answers the question):",
    pb.REFUSAL_REASON_NOT_IN_SELECTION: "Closest passages of the selection (none of them answers the question):",
}


def format_candidates(answer: pb.Answer) -> list[str]:
    """A refused answer's candidates under a heading that says why they are listed; none for other answers."""
    if not answer.candidates:
        return []
    heading = CANDIDATES_HEADINGS.get(answer.refusal_reason, "Nearest candidates:")
    return [heading, *(f"  {c.document_name} {c.source_id} (relevance {c.relevance_score:.2f})" for c in answer.candidates)]


def example_question(heading: str) -> str:
    """An example question about a document, from its title (its first heading) or its name."""
    subject = heading.strip().rstrip(".:")
    if subject.endswith("?"):
        return subject
    subject = re.sub(r"\.(md|txt|rst|html?|pdf|docx|csv|tsv)$", "", subject, flags=re.IGNORECASE)
    if len(subject) > 1 and subject[0].isupper() and subject[1].islower():  # "Ingesting documents", not "API keys"
        subject = subject[0].lower() + subject[1:]
    return f"What do the documents say about {subject}?"


async def example_questions(channel: grpc.aio.Channel, tenant: str, deadline_s: float) -> list[str]:
    """Example questions drawn from the tenant's own documents (their titles), the first EXAMPLE_COUNT that the
    caller may list; none when it may list none (a key without IndexService rights) or the tenant holds none."""
    request = index_pb.ListDocumentsRequest(tenant_id=tenant, page_size=EXAMPLE_COUNT)
    try:
        page = await index_grpc.IndexServiceStub(channel).ListDocuments(request, timeout=deadline_s, metadata=call_metadata())
    except grpc.aio.AioRpcError:
        return []
    return [example_question(d.title or d.name) for d in page.documents[:EXAMPLE_COUNT] if (d.title or d.name).strip()]


def format_sources(answer: pb.Answer) -> list[str]:
    """One line per citation: marker, document, the page and section where the source has them (a Markdown file
    has no pages), relevance."""
    lines = []
    for c in answer.citations:
        parts = [f"[#{c.marker}] {c.document_name}"]
        if c.HasField("page_number"):
            parts.append(f"page {c.page_number}")
        if c.HasField("section"):
            parts.append(f"section {c.section}")
        parts.append(f"relevance {c.relevance_score:.2f}")
        lines.append("  " + " · ".join(parts))
    return lines


class AnswerView:
    """One answer as it streams: the deltas as they come; then the final text, which replaces them when it differs
    (the deltas were a draft: a refused one, or one a re-run replaced) under a visible notice."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self.shown = ""

    def delta(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()
        self.shown += text

    def final(self, answer: pb.Answer) -> None:
        """Ends the answer's text with its final version (and a line break)."""
        if self.shown and self.shown != answer.text:
            self._withdraw(answer)
            self.shown = ""
        if not self.shown:
            self._out.write(answer.text)
        self._out.write("\n")
        self._out.flush()

    def _withdraw(self, answer: pb.Answer) -> None:
        """Erases the streamed text on a terminal (the lines still on screen), and says it was withdrawn."""
        why = "not supported" if not answer.grounded else "replaced by the final answer"
        if self._out.isatty():
            width = shutil.get_terminal_size().columns
            rows = sum(max(1, -(-len(line) // width)) for line in self.shown.split("\n"))
            self._out.write("\r" + (f"\x1b[{rows - 1}A" if rows > 1 else "") + "\x1b[J")
        else:
            self._out.write("\n")
        self._out.write(f"[draft withdrawn: {why}]\n")


class Chat:
    def __init__(
        self,
        stub: rag_grpc.RagServiceStub,
        *,
        tenant: str,
        tags: list[str],
        deadline_s: float,
        out: TextIO = sys.stdout,
        stream_policy: pb.StreamPolicy = pb.STREAM_POLICY_UNSPECIFIED,
    ) -> None:
        self.session_id = str(uuid.uuid4())
        self._stub = stub
        self._tenant = tenant
        self._tags = tags
        self._deadline_s = deadline_s
        self._out = out
        self._stream_policy = stream_policy
        self._call: grpc.aio.UnaryStreamCall[pb.AskStreamRequest, pb.AskStreamResponse] | None = None

    def interrupt(self) -> None:
        """Ctrl-C: cancel the answer being streamed, if any; the chat goes on."""
        if self._call is not None and not self._call.done():
            self._call.cancel()
        else:
            self._print("\n(Ctrl-D or 'exit' quits)")

    async def ask(self, query: str) -> pb.Answer | None:
        """Stream one answer; None when it was interrupted or failed (the reason is printed)."""
        request = pb.AskStreamRequest(
            query=query,
            tenant_id=self._tenant,
            user_tags=self._tags,
            session_id=self.session_id,
            stream_policy=self._stream_policy,
        )
        self._call = self._stub.AskStream(request, timeout=self._deadline_s, metadata=call_metadata())
        answer = None
        view = AnswerView(self._out)
        try:
            async for message in self._call:
                if message.HasField("text_delta"):
                    view.delta(message.text_delta)
                elif message.HasField("answer"):
                    answer = message.answer
        except (asyncio.CancelledError, grpc.aio.AioRpcError) as exc:
            if isinstance(exc, asyncio.CancelledError) or exc.code() == grpc.StatusCode.CANCELLED:
                self._print("\n[answer stopped]")
            else:
                self._print(f"\nerror: {exc.code().name}: {exc.details()}")
            return None
        finally:
            self._call = None
        if answer is not None:
            view.final(answer)
            sources = format_sources(answer)
            if sources:
                self._print("Sources:\n" + "\n".join(sources))
            elif not answer.grounded:
                self._print("\n".join([*format_candidates(answer), f"({pb.RefusalReason.Name(answer.refusal_reason)})"]))
        return answer

    def _print(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self._out, flush=True)


async def run(
    address: str,
    *,
    tenant: str,
    tags: list[str],
    deadline_s: float,
    read_line: Callable[[str], str] = input,
    stream_policy: pb.StreamPolicy = pb.STREAM_POLICY_UNSPECIFIED,
) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        chat = Chat(
            rag_grpc.RagServiceStub(channel), tenant=tenant, tags=tags, deadline_s=deadline_s, stream_policy=stream_policy
        )
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, chat.interrupt)
        print(f"ragsvc chat · {address} · session {chat.session_id}")
        examples = await example_questions(channel, tenant, deadline_s)
        print("Ask a question. Ctrl-C stops an answer, Ctrl-D or 'exit' quits." + (" For example:" if examples else ""))
        for example in examples:
            print(f"  {example}")
        try:
            while True:
                try:
                    query = (await asyncio.to_thread(read_line, "\n> ")).strip()
                except EOFError:
                    print()
                    return
                if query.lower() in QUIT:
                    return
                if query:
                    await chat.ask(query)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
