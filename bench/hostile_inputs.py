"""Hostile and awkward inputs sent to a real `ragsvc serve` process (issue 31's table, and the inputs each reading
limit is for), and Ask latency while a 1 MB document ingests.

Phase `inputs`: one server with the default settings (the bundled MiniLM embedder, the extractive generator, the
demo corpus indexed). Each input goes alone through IndexService.IngestDocuments, to a tenant of its own. For each:
the call's wall time at the client, the server process's CPU time over the call (utime + stime from /proc), its
peak resident set during the call (VmHWM, reset before each call through /proc/PID/clear_refs), its resident set
after, and what the call answered (the document's chunks, or its failure's reason, limit and message, or the
call's status).

Phase `latency`: a second server, with RAG_INGEST_MAX_CALL_CHUNKS raised to 2000 so that a 1 MB plain-text
document (~1,400 chunks) ingests within one call. First Asks alone (sequential, the demo corpus's questions), then
the same Asks, one after another, for as long as the 1 MB IngestDocuments call runs: p50, p90 and max of each, and
the ingest's chunks per second and peak RSS.

`--compare-with CHECKOUT` runs the latency phase again with the server of another checkout (its src/ and
generated/ on PYTHONPATH), e.g. main's, which knows no RAG_INGEST_MAX_CALL_CHUNKS and ingests the document anyway.

    python -m bench.hostile_inputs [--scale 1.0] [--latency-bytes 1000000] [--baseline-asks 50] [--compare-with DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import docx
import grpc
from pypdf import PdfWriter
from pypdf.generic import NameObject, StreamObject

from bench.stats import machine, summary, write_result
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc
from ragsvc.v1 import rag_service_pb2 as pb

QUESTIONS = (
    "How is the confidence score computed?",
    "What happens on SIGTERM?",
    "How are documents chunked?",
    "Which status code does an empty query get?",
    "When is a question routed to a human?",
)
SERVER = {"RAG_GENERATOR": "extractive", "RAG_API_RATE_LIMIT": "0", "RAG_CACHE_MAX_ENTRIES": "0"}
LATENCY_SERVER = {**SERVER, "RAG_INGEST_MAX_CALL_CHUNKS": "2000"}
WORDS = "the of and to in is for desk hotel pays trip cost plan team week travel budget receipt".split()
CALL_TIMEOUT_S = 600.0


@dataclass
class Server:
    process: subprocess.Popen[str]
    address: str

    def _status(self) -> dict[str, int]:
        fields = {}
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    fields[name] = int(value.split()[0])  # kB
        return fields

    def rss_mb(self) -> float:
        return round(self._status()["VmRSS"] / 1024, 1)

    def peak_mb(self) -> float:
        return round(self._status()["VmHWM"] / 1024, 1)

    def reset_peak(self) -> None:
        """The peak resident set (VmHWM) starts again from the current one (Linux: clear_refs 5)."""
        with open(f"/proc/{self.process.pid}/clear_refs", "w") as refs:
            refs.write("5")

    def cpu_s(self) -> float:
        with open(f"/proc/{self.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def start_server(settings: dict[str, str], checkout: str | None = None) -> Server:
    """`ragsvc serve` with `settings`, from this checkout or from the src/ and generated/ of `checkout`."""
    path = {"PYTHONPATH": f"{checkout}/src:{checkout}/generated"} if checkout else {}
    process = subprocess.Popen(
        [sys.executable, "-m", "ragsvc.cli", "serve"],
        env={
            **os.environ,
            "RAG_GRPC_ADDRESS": "127.0.0.1:0",
            "RAG_DATA_DIR": tempfile.mkdtemp(prefix="ragsvc-bench-"),
            **path,
            **settings,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = await asyncio.to_thread(process.stdout.readline)  # type: ignore[union-attr]
    if not line.startswith("ragsvc serving on "):
        raise RuntimeError(f"`ragsvc serve` exited with {process.wait()} before serving")
    return Server(process, line.removeprefix("ragsvc serving on ").strip())


def stop(server: Server) -> None:
    server.process.terminate()
    server.process.wait(timeout=60)


# -- the inputs ---------------------------------------------------------------------------------------------------


def plain_text(size: int, *, seed: int = 5) -> bytes:
    """~`size` bytes of plain text: lines of 15 short words."""
    words = random.Random(seed).choices(WORDS, k=size // 5)
    return "\n".join(" ".join(words[i : i + 15]) for i in range(0, len(words), 15)).encode()


def blank_pdf(pages: int) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def inflating_pdf(decompressed: int) -> bytes:
    writer = PdfWriter()
    page = writer.add_blank_page(width=612, height=792)
    stream = StreamObject()
    stream.set_data(zlib.compress(b"BT ET\n" + b" " * decompressed, 9))
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    page[NameObject("/Contents")] = writer._add_object(stream)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def docx_with_big_part(decompressed: int) -> bytes:
    """A real .docx with one more part of `decompressed` zero bytes, deflated (a ZIP bomb of one member)."""
    document = docx.Document()
    document.add_paragraph("Hotels are reimbursed up to 180 euros a night.")
    buffer = io.BytesIO()
    document.save(buffer)
    with zipfile.ZipFile(buffer, "a", zipfile.ZIP_DEFLATED) as package:
        package.writestr("word/media/padding.bin", b"\x00" * decompressed)
    return buffer.getvalue()


def inputs(scale: float) -> list[tuple[str, str, Callable[[], list[index_pb.Document]]]]:
    """(name, tenant, its documents), the table's rows first. `scale` shrinks the large ones (for a smoke run)."""

    def one(content: bytes, media_type: str = "text/plain") -> list[index_pb.Document]:
        return [index_pb.Document(document_id="input", name="input", content=content, media_type=media_type)]

    depth = max(2000, int(200_000 * scale))
    return [
        ("latin-1 text (one \\xff byte)", "latin",
         lambda: one("Refunds are paid within fourteen days \xff of the request.\n".encode("latin-1"))),
        ("PNG bytes as text/markdown", "png",
         lambda: one(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(1).randbytes(4000), "text/markdown")),
        (f"HTML of {depth:,} nested <div>s", "divs",
         lambda: one(("<html><body>" + "<div>" * depth + "x" + "</div>" * depth + "</body></html>").encode(),
                     "text/html")),
        (f"plain text of {int(5_000_000 * scale):,} bytes", "big", lambda: one(plain_text(int(5_000_000 * scale)))),
        ('tenant_id "../x"', "../x", lambda: one(b"text")),
        ("random bytes behind %PDF-1.7", "pdfjunk",
         lambda: one(b"%PDF-1.7\n" + random.Random(2).randbytes(50_000), "application/pdf")),
        (f"{max(30, int(3000 * scale)):,}-page blank PDF", "blank",
         lambda: one(blank_pdf(max(30, int(3000 * scale))), "application/pdf")),
        ("empty file", "empty", lambda: one(b"")),
        ("HTML element with 100,000 attributes", "attributes",
         lambda: one(("<div " + " ".join(f"a{i}=1" for i in range(100_000)) + ">x</div>").encode(), "text/html")),
        ("PDF stream inflating to 64 MB", "pdfbomb", lambda: one(inflating_pdf(64 * 1024 * 1024), "application/pdf")),
        (".docx with a part unpacking to 64 MB", "docxbomb",
         lambda: one(docx_with_big_part(64 * 1024 * 1024),
                     "application/vnd.openxmlformats-officedocument.wordprocessingml.document")),
        ("Markdown heading line of 80,000 spaces and tabs", "heading",
         lambda: one(("# a" + " \t" * 40_000 + "b\n\nbody").encode(), "text/markdown")),
        ("one line of 1,000,000 characters", "line", lambda: one(b"x" * 1_000_000)),
    ]  # fmt: skip


def outcome(response: index_pb.IngestDocumentsResponse) -> dict[str, Any]:
    [result] = response.results
    if result.HasField("failure"):
        failure = result.failure
        return {"failure": failure.reason, "limit": failure.metadata.get("limit", ""), "message": failure.message}
    return {"chunks_indexed": result.chunks_indexed, "encoding": result.encoding}


async def hostile_phase(scale: float) -> dict[str, Any]:
    server = await start_server(SERVER)
    try:
        measured = {"server_rss_at_start_mb": server.rss_mb(), "inputs": []}
        options = [("grpc.max_send_message_length", 64 * 1024 * 1024)]
        async with grpc.aio.insecure_channel(server.address, options=options) as channel:
            index = index_service_pb2_grpc.IndexServiceStub(channel)
            for name, tenant, documents in inputs(scale):
                request = index_pb.IngestDocumentsRequest(tenant_id=tenant, documents=documents())
                server.reset_peak()
                cpu = server.cpu_s()
                started = time.perf_counter()
                try:
                    answered = outcome(await index.IngestDocuments(request, timeout=CALL_TIMEOUT_S))
                except grpc.aio.AioRpcError as exc:
                    answered = {"status": exc.code().name, "message": exc.details()}
                row = {
                    "input": name,
                    "bytes": sum(len(d.content) for d in request.documents),
                    "wall_ms": round((time.perf_counter() - started) * 1000, 1),
                    "server_cpu_s": round(server.cpu_s() - cpu, 2),
                    "server_peak_rss_mb": server.peak_mb(),
                    "server_rss_after_mb": server.rss_mb(),
                    **answered,
                }
                print(row, flush=True)
                measured["inputs"].append(row)
        measured["server_rss_at_end_mb"] = server.rss_mb()
        return measured
    finally:
        stop(server)


async def asks(rag: rag_service_pb2_grpc.RagServiceStub, until: Callable[[], bool], most: int) -> list[float]:
    """Sequential Asks (the demo questions in turn) until `until()` or `most` of them; their latencies in ms."""
    latencies: list[float] = []
    while not until() and len(latencies) < most:
        started = time.perf_counter()
        answer = (await rag.Ask(pb.AskRequest(query=QUESTIONS[len(latencies) % len(QUESTIONS)]), timeout=60)).answer
        latencies.append((time.perf_counter() - started) * 1000)
        assert answer.grounded or answer.refusal_reason, answer
    return latencies


def latency_summary(ms: list[float]) -> dict[str, Any]:
    return {**summary(ms, (0.5, 0.9)), "max_ms": round(max(ms), 3) if ms else None}


async def latency_phase(document_bytes: int, baseline: int, checkout: str | None = None) -> dict[str, Any]:
    server = await start_server(LATENCY_SERVER, checkout)
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            rag = rag_service_pb2_grpc.RagServiceStub(channel)
            index = index_service_pb2_grpc.IndexServiceStub(channel)
            await asks(rag, lambda: False, len(QUESTIONS))  # warm-up
            alone = await asks(rag, lambda: False, baseline)
            content = plain_text(document_bytes, seed=11)
            request = index_pb.IngestDocumentsRequest(
                tenant_id="latency",
                documents=[index_pb.Document(document_id="big", name="big.txt", content=content)],
            )
            server.reset_peak()
            cpu = server.cpu_s()
            started = time.perf_counter()
            ingest = asyncio.ensure_future(index.IngestDocuments(request, timeout=CALL_TIMEOUT_S))
            during = await asks(rag, ingest.done, 1_000_000)
            response = await ingest
            ingest_s = time.perf_counter() - started
            [result] = response.results
            return {
                "server": checkout or "this checkout",
                "server_settings": LATENCY_SERVER,
                "document_bytes": len(content),
                "ask_alone": latency_summary(alone),
                "ask_during_ingest": latency_summary(during),
                "ingest": {
                    "wall_s": round(ingest_s, 2),
                    "server_cpu_s": round(server.cpu_s() - cpu, 2),
                    "chunks": result.chunks_indexed,
                    "chunks_per_s": round(result.chunks_indexed / ingest_s, 1),
                    "server_peak_rss_mb": server.peak_mb(),
                    "failure": result.failure.message,
                },
            }
    finally:
        stop(server)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="size of the large inputs, as a share of the table's")
    parser.add_argument("--latency-bytes", type=int, default=1_000_000, help="the document ingested during the Asks")
    parser.add_argument("--baseline-asks", type=int, default=50, help="Asks measured before the ingest")
    parser.add_argument(
        "--compare-with", metavar="CHECKOUT", help="also run the latency phase with the server of another checkout (e.g. main's)"
    )
    args = parser.parse_args(argv)
    load = os.getloadavg()
    result = {
        "benchmark": "hostile_inputs",
        "command": "python -m bench.hostile_inputs " + " ".join(sys.argv[1:] if argv is None else argv),
        "inputs_phase": await hostile_phase(args.scale),
        "latency_phase": await latency_phase(args.latency_bytes, args.baseline_asks),
    }
    if args.compare_with:
        result["latency_phase_compared"] = await latency_phase(args.latency_bytes, args.baseline_asks, args.compare_with)
    result["machine"] = machine(load)
    write_result("hostile_inputs", result)


if __name__ == "__main__":
    asyncio.run(main())
