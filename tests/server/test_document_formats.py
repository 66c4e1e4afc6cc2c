"""The formats teams keep their documents in, end to end: real files (a .docx python-docx writes, a
reStructuredText page, a CSV and a TSV file, and Markdown saved in windows-1252) in a folder that `ragsvc ingest
DIR` sends to a real server, which then answers a question from each file's content, citing it."""

from __future__ import annotations

import io

import docx
import pytest

from ragsvc.server.app import RagServer
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.cli import run_cli
from tests.support.servers import Stubs

TENANT = "formats"


def handbook_docx() -> bytes:
    document = docx.Document()
    document.add_heading("Travel handbook", level=0)
    document.add_heading("Hotels", level=1)
    document.add_paragraph("Hotel nights are reimbursed up to the city's limit, with an itemised receipt.")
    table = document.add_table(rows=3, cols=2)
    for row, (city, limit) in zip(
        table.rows, [("City", "Nightly hotel limit"), ("Paris", "210 euros"), ("Berlin", "150 euros")], strict=True
    ):
        row.cells[0].text, row.cells[1].text = city, limit
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


FILES = {
    "handbook.docx": handbook_docx(),
    "booking.rst": (
        b"Booking flights\n===============\n\nFlights are booked through the travel desk at least fourteen days "
        b"before departure.\n\nLuggage\n-------\n\n* One checked bag is covered on flights over four hours.\n"
    ),
    "staff.csv": b"name,team,phone extension\nAda Lovelace,Payments,4411\nGrace Hopper,Compilers,4412\n",
    "services.tsv": b"service\towner\tpager\nbilling\tPayments team\t555-0101\nsearch\tRelevance team\t555-0102\n",
    "cafe.md": "# Caf\xe9 hours\n\nThe caf\xe9 on the ground floor opens at 8:30 and closes at 17:00.\n".encode("cp1252"),
}


@pytest.fixture(scope="module")
async def ingested(stubs: Stubs, server: RagServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("formats")
    for name, content in FILES.items():
        (folder / name).write_bytes(content)
    code, out, err = await run_cli("ingest", str(folder), "--address", server.address, "--tenant", TENANT)
    assert code == 0, out + err
    assert out.splitlines()[-1].startswith("5 of 5 documents indexed"), out
    listed = await stubs.index.ListDocuments(index_pb.ListDocumentsRequest(tenant_id=TENANT), timeout=10)
    return {d.document_id: d.media_type for d in listed.documents}


def test_the_folder_is_picked_up_by_extension(ingested: dict[str, str]) -> None:
    assert ingested == {
        "booking": "text/x-rst",
        "cafe": "text/markdown",
        "handbook": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "services": "text/tab-separated-values",
        "staff": "text/csv",
    }


@pytest.mark.parametrize(
    ("question", "document_id", "fact"),
    [
        ("What is the nightly hotel limit in Paris?", "handbook", "210 euros"),
        ("How many days before departure are flights booked?", "booking", "fourteen days"),
        ("What is Grace Hopper's phone extension?", "staff", "4412"),
        ("Which team owns the billing service?", "services", "Payments team"),
        ("When does the café open?", "cafe", "8:30"),
    ],
    ids=["docx", "rst", "csv", "tsv", "windows-1252-markdown"],
)
async def test_each_format_answers_from_its_content(
    stubs: Stubs, ingested: dict[str, str], question: str, document_id: str, fact: str
) -> None:
    answer = (await stubs.rag.Ask(pb.AskRequest(query=question, tenant_id=TENANT), timeout=30)).answer
    assert answer.grounded, answer.refusal_reason
    assert fact in answer.text
    assert answer.citations[0].document_id == document_id


async def test_the_encoding_of_each_text_file_is_recorded(stubs: Stubs, ingested: dict[str, str]) -> None:
    encodings = {}
    for document_id in ingested:
        request = index_pb.GetDocumentRequest(tenant_id=TENANT, document_id=document_id)
        encodings[document_id] = (await stubs.index.GetDocument(request, timeout=10)).document.encoding
    assert encodings == {"booking": "UTF-8", "cafe": "windows-1252", "handbook": "", "services": "UTF-8", "staff": "UTF-8"}
