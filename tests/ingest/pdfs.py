"""Builds small, valid PDFs for the tests with pypdf's writer: real text-drawing content streams in a standard
font (Helvetica), so that text extraction has real work to do; optional outline entries and title. Also a PDF
whose one stream inflates to a given size."""

from __future__ import annotations

import io
import zlib
from collections.abc import Sequence

from pypdf import PdfWriter
from pypdf.generic import (
    ArrayObject,
    DecodedStreamObject,
    DictionaryObject,
    NameObject,
    NumberObject,
    StreamObject,
)


def build_pdf(pages: Sequence[Sequence[str]], *, outline: Sequence[tuple[str, int]] = (), title: str = "") -> bytes:
    """A PDF with one page per item of `pages`, each drawing its lines top-down; `outline` entries are (title,
    0-based page index)."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
            NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
        }
    )
    font_ref = writer._add_object(font)
    for lines in pages:
        page = writer.add_blank_page(width=612, height=792)
        stream = DecodedStreamObject()
        stream.set_data(_draw(lines))
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject(
            {
                NameObject("/Font"): DictionaryObject({NameObject("/F1"): font_ref}),
                NameObject("/ProcSet"): ArrayObject([NameObject("/PDF"), NameObject("/Text")]),
            }
        )
        page[NameObject("/Rotate")] = NumberObject(0)
    for heading, index in outline:
        writer.add_outline_item(title=heading, page_number=index)
    if title:
        writer.add_metadata({"/Title": title})
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def _draw(lines: Sequence[str]) -> bytes:
    commands = ["BT", "/F1 11 Tf", "14 TL", "72 740 Td"]
    for line in lines:
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        commands.append(f"({escaped}) Tj T*")
    commands.append("ET")
    return "\n".join(commands).encode("latin-1")


def build_inflating_pdf(decompressed_bytes: int) -> bytes:
    """A one-page PDF whose content stream (one line of text, then spaces) is stored deflated and decompresses to
    `decompressed_bytes`: a few kilobytes for megabytes, as a decompression bomb is."""
    writer = PdfWriter()
    page = writer.add_blank_page(width=612, height=792)
    text = b"BT /F1 11 Tf 72 740 Td (Inflated page) Tj ET\n"
    stream = StreamObject()
    stream.set_data(zlib.compress(text + b" " * max(decompressed_bytes - len(text), 0), 9))
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    page[NameObject("/Contents")] = writer._add_object(stream)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()
