"""`ragsvc chat`: an interactive terminal client. Answers stream as they arrive, sources follow each answer, the
session id carries the conversation, and Ctrl-C stops the current answer (the server sees the cancel) without
leaving the chat."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import Callable
from typing import TextIO

import grpc

from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc as rag_grpc

EXAMPLES = (
    "How is the confidence score computed?",
    "What happens on SIGTERM?",
    "How are documents chunked?",
)
QUIT = {"exit", "quit", ":q"}


def call_metadata() -> tuple[tuple[str, str], ...]:
    """The bearer token from RAG_API_TOKEN, for a server with authentication on; nothing otherwise."""
    token = os.environ.get("RAG_API_TOKEN", "")
    return (("authorization", f"Bearer {token}"),) if token else ()


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


class Chat:
    def __init__(self, stub: rag_grpc.RagServiceStub, *, tenant: str, tags: list[str], deadline_s: float,
                 out: TextIO = sys.stdout) -> None:
        self.session_id = str(uuid.uuid4())
        self._stub = stub
        self._tenant = tenant
        self._tags = tags
        self._deadline_s = deadline_s
        self._out = out
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
            query=query, tenant_id=self._tenant, user_tags=self._tags, session_id=self.session_id
        )
        self._call = self._stub.AskStream(request, timeout=self._deadline_s, metadata=call_metadata())
        answer = None
        streamed = False
        try:
            async for message in self._call:
                if message.HasField("text_delta"):
                    self._print(message.text_delta, end="")
                    streamed = True
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
            if not streamed:
                self._print(answer.text, end="")
            self._print("")
            sources = format_sources(answer)
            if sources:
                self._print("Sources:\n" + "\n".join(sources))
            elif not answer.grounded:
                self._print(f"({pb.RefusalReason.Name(answer.refusal_reason)})")
        return answer

    def _print(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self._out, flush=True)


async def run(address: str, *, tenant: str, tags: list[str], deadline_s: float,
              read_line: Callable[[str], str] = input) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        chat = Chat(rag_grpc.RagServiceStub(channel), tenant=tenant, tags=tags, deadline_s=deadline_s)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, chat.interrupt)
        print(f"ragsvc chat · {address} · session {chat.session_id}")
        print("Ask a question. Ctrl-C stops an answer, Ctrl-D or 'exit' quits. For example:")
        for example in EXAMPLES:
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
