"""The formats teams keep their documents in, read from real files: .docx (python-docx writes them here),
reStructuredText (docutils parses it) and CSV/TSV; a folder's files of these types are picked up by extension."""

from __future__ import annotations

import io
from pathlib import Path

import docx
from docx.enum.style import WD_STYLE_TYPE

from ragsvc.domain import SourceDocument
from ragsvc.ingest.chunker import chunk_sections, token_count
from ragsvc.ingest.loaders import source_documents_from_paths
from ragsvc.ingest.media import CSV, DOCX, RST, TSV
from ragsvc.ingest.sections import Section
from tests.ingest.reading import CHUNK_TOKENS, sections_of


def word_file() -> bytes:
    document = docx.Document()
    document.core_properties.title = "Travel handbook"
    document.add_paragraph("Applies to every employee.")
    document.add_heading("Booking flights", level=1)
    document.add_paragraph("Book flights through the travel desk   at least fourteen days ahead.")
    document.add_paragraph("Use the approved agency.", style="List Bullet")
    document.add_paragraph("Keep the receipt.", style="List Number")
    document.add_heading("Hotels", level=2)
    table = document.add_table(rows=3, cols=3)
    for row, cells in zip(
        table.rows,
        [("City", "Limit", "Note"), ("Paris", "210 euros", "with breakfast"), ("Berlin", "150 euros", "")],
        strict=True,
    ):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    merged = table.rows[2].cells[1].merge(table.rows[2].cells[2])
    merged.text = "150 euros, breakfast extra"
    custom = document.styles.add_style("Policy Heading", WD_STYLE_TYPE.PARAGRAPH)
    custom.base_style = document.styles["Heading 1"]
    document.add_paragraph("Meals", style="Policy Heading")
    document.add_paragraph("Meals are covered up to 40 euros a day.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_docx_headings_make_sections_with_paragraphs_lists_and_table_rows() -> None:
    assert sections_of(SourceDocument("d", "d.docx", word_file(), media_type=DOCX)) == [
        Section("Applies to every employee."),
        Section(
            "Book flights through the travel desk at least fourteen days ahead.\n\n"
            "- Use the approved agency.\n- Keep the receipt.",
            "Booking flights",
        ),
        Section(
            "| City | Limit | Note |\n| Paris | 210 euros | with breakfast |\n| Berlin | 150 euros, breakfast extra |",
            "Hotels",
        ),
        Section("Meals are covered up to 40 euros a day.", "Meals"),  # a style based on a heading style
    ]


RST_TEXT = """\
Travel policy
=============

This policy applies to every employee.

Booking flights
---------------

Book flights through the travel desk at least
fourteen days before departure.

* Use the approved agency.
* Keep the receipt; see :ref:`the expense guide <expenses>`.

.. code-block:: shell

   expense-tool submit --receipt hotel.pdf

Hotels
------

.. note:: Hotel limits change every January.

=======  =========
City     Limit
=======  =========
Paris    180 euros
Berlin   150 euros
=======  =========

:Owner: the finance team

.. include:: /etc/passwd
.. raw:: html

   <script>alert(1)</script>

.. toctree::

   other-page
"""


def test_rst_sections_by_title_with_lists_tables_and_code() -> None:
    assert sections_of(SourceDocument("d", "d.rst", RST_TEXT.encode(), media_type=RST)) == [
        Section("This policy applies to every employee.", "Travel policy"),
        Section(
            "Book flights through the travel desk at least fourteen days before departure.\n\n"
            "- Use the approved agency.\n- Keep the receipt; see the expense guide.\n\n"
            "```\nexpense-tool submit --receipt hotel.pdf\n```",
            "Booking flights",
        ),
        Section(
            "Hotel limits change every January.\n\n| City | Limit |\n| Paris | 180 euros |\n| Berlin | 150 euros |"
            "\n\nOwner: the finance team",
            "Hotels",
        ),
    ]


def test_rst_that_docutils_cannot_make_sense_of_still_reads_as_text() -> None:
    broken = "Title\n=====\n\n* item\n continued badly\n\n`unclosed role\n\n.. unknown-directive:: x\n\nLast words."
    sections = sections_of(SourceDocument("d", "d.rst", broken.encode(), media_type=RST))
    assert sections[0].heading == "Title" and "Last words." in sections[0].text


STAFF = """name,team,extension,office
Ada Lovelace,Payments,4411,Room 2.14

Grace Hopper,Compilers,4412,"Room 3.01, east wing"
Edsger Dijkstra,Algorithms,,Room 1.07
"""


def test_csv_rows_carry_their_header_and_group_into_sections_of_whole_rows() -> None:
    [section] = sections_of(SourceDocument("d", "staff.csv", STAFF.encode(), media_type=CSV))
    assert section == Section(
        "name: Ada Lovelace; team: Payments; extension: 4411; office: Room 2.14\n"
        "name: Grace Hopper; team: Compilers; extension: 4412; office: Room 3.01, east wing\n"
        "name: Edsger Dijkstra; team: Algorithms; office: Room 1.07",
        "rows 2-5",  # the blank row 3 counts, as a spreadsheet shows it
    )

    many = "id;city;note\n" + "".join(f"{i};City {i};note number {i} about the city\n" for i in range(300))
    sections = sections_of(SourceDocument("d", "cities.csv", many.encode(), media_type=CSV))  # ";" found
    assert len(sections) > 5 and sections[0].text.startswith("id: 0; city: City 0; note: note number 0")
    rows = [line for s in sections for line in s.text.split("\n")]
    assert rows == [f"id: {i}; city: City {i}; note: note number {i} about the city" for i in range(300)]
    assert all(token_count(s.text) <= CHUNK_TOKENS for s in sections)
    chunks = list(chunk_sections(sections, chunk_tokens=CHUNK_TOKENS, overlap_tokens=40))
    assert [c.text for c in chunks] == [s.text for s in sections], "a chunk is a group of whole rows"


def test_tsv_is_tab_separated_and_extra_cells_are_numbered() -> None:
    text = "name\tteam\nAda\tPayments\textra value\n"
    assert sections_of(SourceDocument("d", "d.tsv", text.encode(), media_type=TSV)) == [
        Section("name: Ada; team: Payments; column 3: extra value", "row 2")
    ]


def test_a_folder_picks_the_new_formats_up_by_extension_with_their_titles(tmp_path: Path) -> None:
    (tmp_path / "handbook.docx").write_bytes(word_file())
    (tmp_path / "policy.rst").write_text(RST_TEXT)
    (tmp_path / "staff.csv").write_text(STAFF)
    (tmp_path / "rooms.tsv").write_text("room\tfloor\n2.14\t2\n")
    documents = source_documents_from_paths([tmp_path], tenant_id="acme")
    assert [(d.document_id, d.media_type, d.title) for d in documents] == [
        ("handbook", DOCX, "Travel handbook"),
        ("policy", RST, "Travel policy"),
        ("rooms", TSV, "rooms"),
        ("staff", CSV, "staff"),
    ]
