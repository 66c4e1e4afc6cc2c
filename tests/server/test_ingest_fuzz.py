"""The loaders fuzzed through a real server: hypothesis draws 200 inputs across every media type, each a real
small file of one format mutated (bytes flipped, inserted, deleted, a slice repeated hundreds of times, the file
cut short, spliced with a file of another format) or plain random bytes, sent alone through IngestDocuments.

The properties: no call fails (no INTERNAL, nor any other status: a document that cannot be read is reported in
its result, typed INVALID_ARGUMENT, and never as a fault of the server's own reader); every call returns within
a bound; the server reports SERVING throughout. Embeddings come from a scripted OpenAI-compatible server on a real
socket, so that the time goes to the loaders and not to the model."""

from __future__ import annotations

import asyncio
import collections
import io
import time
from pathlib import Path

import docx
from google.rpc import code_pb2
from grpc_health.v1 import health_pb2
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ragsvc.server.app import RagServer
from ragsvc.v1 import index_service_pb2 as index_pb
from tests.ingest.pdfs import build_pdf
from tests.support.http_server import hashed_embedding
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.servers import Stubs, connected, server_settings

EXAMPLES = 200
CALL_BOUND_S = 10.0  # each call's deadline; the slowest mutant reads in well under a second
HEALTH_EVERY = 40  # examples between two health checks
MAX_SIZE = 128 * 1024  # what a repeated slice may grow a file to


def _docx() -> bytes:
    document = docx.Document()
    document.add_heading("Expenses", level=1)
    document.add_paragraph("Hotels are reimbursed up to 180 euros a night.")
    table = document.add_table(rows=2, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "City", "Limit"
    table.rows[1].cells[0].text, table.rows[1].cells[1].text = "Paris", "210 euros"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


SEEDS: dict[str, bytes] = {
    "text/plain": "Refunds are paid within fourteen days.\nHotels: up to 180 € a night.\n".encode(),
    "text/markdown": b"# Travel\n\nBook early.\n\n## Hotels\n\n- Paris: 210\n- Berlin: 150\n\n```\ncode # not a heading\n```\n",
    "text/html": (
        b'<!DOCTYPE html><html><head><meta charset="utf-8"><title>T</title><script>var x = "<div>";</script></head>'
        b"<body><nav>menu</nav><h1>Travel</h1><p>Book <b>early</b>.</p><table><tr><th>City</th><td>Paris</td></tr>"
        b"</table><ul><li>one<li>two</ul><pre>code</pre><svg><path/></svg></body></html>"
    ),
    "text/x-rst": (
        b"Travel\n======\n\nBook early.\n\n* one\n* two\n\n.. code-block:: sh\n\n   ls\n\n"
        b"=====  =====\nCity   Limit\n=====  =====\nParis  210\n=====  =====\n"
    ),
    "text/csv": b'name,team,ext\nAda,Payments,4411\n"Hopper, Grace","Compilers\nand tools",4412\n',
    "text/tab-separated-values": b"service\towner\nbilling\tPayments\nsearch\tRelevance\n",
    "application/pdf": build_pdf([["Travel policy", "Book early."], ["Hotels up to 180 euros."]], outline=[("Hotels", 1)]),
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": _docx(),
}
MEDIA_TYPES = sorted(SEEDS)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[str, bytes]:
    """(media type, content): a seed of any format, mutated, or random bytes, sent as any media type (mostly its
    own)."""
    seed_type = draw(st.sampled_from(MEDIA_TYPES))
    media_type = draw(st.one_of(st.just(seed_type), st.sampled_from(MEDIA_TYPES)))
    if draw(st.integers(0, 9)) == 0:
        return media_type, draw(st.binary(max_size=4096))
    content = bytearray(SEEDS[seed_type])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(content)))
        kind = draw(st.sampled_from(["flip", "insert", "delete", "repeat", "truncate", "splice"]))
        if kind == "flip" and content:
            content[min(at, len(content) - 1)] = draw(st.integers(0, 255))
        elif kind == "insert":
            content[at:at] = draw(st.binary(min_size=1, max_size=64))
        elif kind == "delete":
            del content[at : at + draw(st.integers(1, 64))]
        elif kind == "repeat":
            piece = bytes(content[at : at + draw(st.integers(1, 16))])
            times = draw(st.integers(2, 4000))
            content[at:at] = (piece * times)[: MAX_SIZE - len(content)]
        elif kind == "truncate":
            del content[at:]
        else:
            content += SEEDS[draw(st.sampled_from(MEDIA_TYPES))]
    return media_type, bytes(content)


def embed(text: str) -> list[float]:
    """The scripted server's bag-of-words vector, or a fixed one for text without a word of [a-z0-9] (which has
    no bag): a model gives every text a vector, and the server refuses a zero one as the embedder's fault."""
    vector = hashed_embedding(text)
    return vector if any(vector) else [1.0] + [0.0] * (len(vector) - 1)


async def serving(stubs: Stubs) -> bool:
    response = await stubs.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    return response.status == health_pb2.HealthCheckResponse.SERVING


def test_no_input_makes_the_server_fail_hang_or_stop_serving(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # grpc.aio asks the policy for the current loop: another test may have cleared it
    embeddings = ScriptedOpenAIServer(embed=embed)
    loop.run_until_complete(embeddings.__aenter__())
    # RAG_EMBEDDER=openai (running_server's own `embedder` is an embedder object to inject).
    configured = server_settings(
        tmp_path, demo_corpus=False, request_log=False, embedder="openai", embedding_base_url=embeddings.base_url
    )
    server = loop.run_until_complete(RagServer.start(configured))
    channel_context = connected(server)
    stubs = loop.run_until_complete(channel_context.__aenter__())
    outcomes: collections.Counter[str] = collections.Counter()
    slowest = 0.0
    calls_s = [0.0]

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
    @given(case=inputs())
    def check(case: tuple[str, bytes]) -> None:
        nonlocal slowest
        media_type, content = case
        number = sum(outcomes.values())
        request = index_pb.IngestDocumentsRequest(
            tenant_id="fuzz",
            documents=[index_pb.Document(document_id=f"doc-{number}", content=content, media_type=media_type)],
        )
        started = time.monotonic()
        response = loop.run_until_complete(stubs.index.IngestDocuments(request, timeout=CALL_BOUND_S))
        slowest = max(slowest, time.monotonic() - started)
        calls_s[0] += time.monotonic() - started
        [result] = response.results
        if result.HasField("failure"):
            assert result.failure.code == code_pb2.INVALID_ARGUMENT, result
            assert result.failure.reason in ("VALIDATION_ERROR", "DOCUMENT_LIMIT_EXCEEDED"), result
            assert "the server's reader failed" not in result.error, (media_type, content[:200], result.error)
            outcomes[f"refused {result.failure.reason}"] += 1
        else:
            assert result.chunks_indexed >= 1, result
            outcomes["indexed"] += 1
        if number % HEALTH_EVERY == 0:
            assert loop.run_until_complete(serving(stubs))

    try:
        check()
        print(f"\n{sum(outcomes.values())} inputs, slowest call {slowest:.2f} s, calls {calls_s[0]:.2f} s: {dict(outcomes)}")
        assert sum(outcomes.values()) >= EXAMPLES
        assert outcomes["indexed"] and outcomes["refused VALIDATION_ERROR"], dict(outcomes)
        assert loop.run_until_complete(serving(stubs))
    finally:
        loop.run_until_complete(channel_context.__aexit__(None, None, None))
        loop.run_until_complete(server.stop())
        loop.run_until_complete(embeddings.__aexit__(None, None, None))
        loop.close()
        asyncio.set_event_loop(None)
