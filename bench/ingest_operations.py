"""Big documents ingested as long-running operations, as a user does it: `ragsvc ingest FILE` against a `ragsvc serve`
process, for a 5 MB plain-text file and a 2,000-page PDF (issue 31).

Each input gets a server of its own (fresh RAG_DATA_DIR, no demo corpus, default settings otherwise), so that its
peak RSS is the input's. `ragsvc ingest` uploads the file in pieces (it is larger than --max-message-bytes) with
`long_running`, and follows the operation's progress until it is done. Measured:

- from the operation's own metadata: its start and end times, and the chunks it wrote: chunks per second is
  chunks / (end - start), the server's work, not the upload;
- the CLI's wall time, upload included;
- the server process, from /proc: RSS when it serves (before the ingest), its peak (VmHWM) after, and the CPU time
  the ingest took (all threads), as chunks per CPU-second (less dependent on a shared machine's load).

The inputs are made here, deterministically: the text is sentences of English words drawn (seeded) from wordfreq's
list of the 5,000 most common; the PDF has 2,000 pages of 30 such lines each, drawn as text in Helvetica by pypdf's
writer (tests/ingest/pdfs.py). Writes bench/results/ingest-operations-DATE.json.

    python -m bench.ingest_operations [--text-mb 5] [--pdf-pages 2000] [--only text|pdf]   # make bench-operations
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from google.longrunning import operations_pb2_grpc as lro_grpc
from google.longrunning import operations_proto_pb2 as lro
from wordfreq import top_n_list

from bench.quality.server import ServerProcess, base_env
from bench.stats import machine, write_result
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import operations_pb2 as ops_pb
from tests.ingest.pdfs import build_pdf

SEED = 31
WORK = Path(__file__).resolve().parents[1] / ".bench" / "ingest-operations"
LINE_WORDS = 11
PAGE_LINES = 30


def sentences(rng: random.Random, words: list[str]) -> str:
    """One line of text: a sentence of LINE_WORDS words."""
    line = " ".join(rng.choice(words) for _ in range(LINE_WORDS))
    return line[0].upper() + line[1:] + "."


def make_text(path: Path, megabytes: float) -> None:
    rng, words = random.Random(SEED), top_n_list("en", 5000)
    target, lines, size = int(megabytes * 1_000_000), [], 0
    while size < target:
        paragraph = " ".join(sentences(rng, words) for _ in range(rng.randint(3, 8)))
        lines.append(paragraph)
        size += len(paragraph.encode()) + 2
    path.write_text("\n\n".join(lines) + "\n")


def make_pdf(path: Path, pages: int) -> None:
    rng, words = random.Random(SEED + 1), [w for w in top_n_list("en", 5000) if w.isascii()]
    path.write_bytes(build_pdf([[sentences(rng, words) for _ in range(PAGE_LINES)] for _ in range(pages)]))


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in bytes."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    return values


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, every thread


async def last_operation(address: str) -> lro.Operation:
    async with grpc.aio.insecure_channel(address) as channel:
        listed = await lro_grpc.OperationsStub(channel).ListOperations(lro.ListOperationsRequest(page_size=1), timeout=30)
        return listed.operations[0]


def ingest_one(kind: str, path: Path, work: Path, *options: str) -> dict[str, Any]:
    data_dir = work / f"data-{kind}"
    with ServerProcess(base_env(data_dir), log=work / f"serve-{kind}.log") as server:
        pid = server.process.pid
        before = proc_status(pid)
        cpu_before = cpu_seconds(pid)
        started = time.perf_counter()
        cli = asyncio.run(_cli(path, server.address, *options))
        cli_s = time.perf_counter() - started
        if server.process.poll() is not None:
            raise RuntimeError(f"ragsvc serve exited with {server.process.returncode} during the ingest; see "
                               f"{work / f'serve-{kind}.log'}")  # fmt: skip
        after, cpu_after = proc_status(pid), cpu_seconds(pid)
        operation = asyncio.run(last_operation(server.address))
    metadata = ops_pb.IngestOperationMetadata()
    operation.metadata.Unpack(metadata)
    response = index_pb.IngestDocumentsResponse()
    operation.response.Unpack(response)
    [result] = response.results
    run_s = (metadata.times.end_time.ToNanoseconds() - metadata.times.start_time.ToNanoseconds()) / 1e9
    cpu_s = cpu_after - cpu_before
    return {
        "input": kind,
        "file_bytes": path.stat().st_size,
        "operation": operation.name,
        "state": ops_pb.OperationState.Name(metadata.state),
        "error": result.error,
        "chunks": result.chunks_indexed,
        "chunks_progress_final": [metadata.chunks_done, metadata.chunks_total],
        "operation_seconds": round(run_s, 2),
        "chunks_per_second": round(result.chunks_indexed / run_s, 2) if run_s else None,
        "cli_seconds_upload_included": round(cli_s, 2),
        "cli_exit_status": cli[0],
        "server_cpu_seconds": round(cpu_s, 2),
        "chunks_per_cpu_second": round(result.chunks_indexed / cpu_s, 2) if cpu_s else None,
        "server_rss_serving_mb": round(before["VmRSS"] / 2**20, 1),
        "server_peak_rss_mb": round(after["VmHWM"] / 2**20, 1),
    }


async def _cli(path: Path, address: str, *options: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ragsvc.cli", "ingest", str(path), "--address", address, "--timeout", "120", *options,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    text = out.decode(errors="replace")
    print(text[-2000:])
    assert process.returncode is not None
    return process.returncode, text


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text-mb", type=float, default=5.0)
    parser.add_argument("--pdf-pages", type=int, default=2000)
    parser.add_argument("--only", choices=["text", "pdf"])
    parser.add_argument("--operation-bytes", help="passed to ragsvc ingest (smaller inputs, to try this script out)")
    parser.add_argument("--work", type=Path, default=WORK, help="inputs, data and server logs (emptied first)")
    args = parser.parse_args(argv)
    options = ("--operation-bytes", args.operation_bytes) if args.operation_bytes else ()
    load = os.getloadavg()
    runs = []
    # The inputs, the servers' data and logs stay in --work until the next run (a failed run can be looked into).
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if args.only in (None, "text"):
        text = work / "register.txt"
        make_text(text, args.text_mb)
        runs.append(ingest_one("text", text, work, *options))
    if args.only in (None, "pdf"):
        pdf = work / "report.pdf"
        make_pdf(pdf, args.pdf_pages)
        runs.append({**ingest_one("pdf", pdf, work, *options), "pages": args.pdf_pages})
    write_result("ingest-operations", {
        "what": "ragsvc ingest FILE against a fresh ragsvc serve: uploaded in pieces, ingested as a long-running "
                "operation (UploadDocument long_running), followed to its end; default settings (RAG_CHUNK_TOKENS "
                "180, overlap 40, the bundled MiniLM fp32 embedder, embedded qdrant-edge engine)",
        "machine": machine(load),
        "runs": runs,
    })  # fmt: skip


if __name__ == "__main__":
    main()
