"""Text in the encodings files come in is read, and the encoding used is told; content that is not text is refused
naming what it looks like (ingest/decoding.py, through the loaders of each text format)."""

from __future__ import annotations

import gzip
import io
import zipfile

import pytest

from ragsvc.domain import SourceDocument
from ragsvc.errors import InvalidRequest
from ragsvc.ingest.decoding import decode_text, looks_like
from tests.ingest.pdfs import build_pdf
from tests.ingest.reading import loaded

FRENCH = "Le café coûte trois euros. Les employés réservent leurs vols à l'avance, même en été."
QUOTES = "The \u201cpolicy\u201d says hotels \u2013 up to 180\u20ac per night \u2013 need a receipt."
RUSSIAN = "Возврат средств производится в течение четырнадцати дней после запроса сотрудника."
JAPANESE = "返金は申請から十四日以内に支払われます。出張の航空券は旅行デスクで予約してください。"


@pytest.mark.parametrize(
    ("content", "text", "encoding"),
    [
        (FRENCH.encode(), FRENCH, "UTF-8"),
        (b"\xef\xbb\xbf" + FRENCH.encode(), FRENCH, "UTF-8"),  # with a byte-order mark, which is dropped
        (FRENCH.encode("utf-16"), FRENCH, "UTF-16LE"),  # Python writes the mark, little-endian here
        (b"\xfe\xff" + FRENCH.encode("utf-16-be"), FRENCH, "UTF-16BE"),
        (FRENCH.encode("utf-32"), FRENCH, "UTF-32LE"),
        (FRENCH.encode("latin-1"), FRENCH, "windows-1252"),  # Latin-1 text reads the same in windows-1252
        (
            "Refunds are paid within 14 days \xff of the request.".encode("latin-1"),
            "Refunds are paid within 14 days \xff of the request.",
            "windows-1252",
        ),  # the one Latin-1 byte
        (QUOTES.encode("cp1252"), QUOTES, "windows-1252"),
        (RUSSIAN.encode("cp1251"), RUSSIAN, "windows-1251"),
        (RUSSIAN.encode("koi8_r"), RUSSIAN, "KOI8-R"),
        (JAPANESE.encode("shift_jis"), JAPANESE, "windows-31j"),
        (JAPANESE.encode("utf-16-le"), JAPANESE, "UTF-16LE"),  # no mark: found by the detector
    ],
    ids=[
        "utf-8",
        "utf-8-bom",
        "utf-16-bom",
        "utf-16be-bom",
        "utf-32-bom",
        "latin-1",
        "latin-1-ff",
        "windows-1252",
        "windows-1251",
        "koi8-r",
        "shift-jis",
        "utf-16-no-bom",
    ],
)
def test_common_encodings_are_read_and_named(content: bytes, text: str, encoding: str) -> None:
    decoded = decode_text(content, "text/plain")
    assert (decoded.text, decoded.encoding) == (text, encoding)


def test_the_media_types_charset_is_used_and_must_fit() -> None:
    hebrew = "העובדים מזמינים טיסות דרך דלפק הנסיעות.".encode("cp1255")  # too short for a detector to be sure
    read = loaded(SourceDocument("d", "d.txt", hebrew, media_type="text/plain; charset=windows-1255"))
    assert (read.sections[0].text, read.encoding) == ("העובדים מזמינים טיסות דרך דלפק הנסיעות.", "windows-1255")
    with pytest.raises(InvalidRequest) as caught:
        decode_text(b"caf\xe9", "text/plain", charset="utf-8")
    assert caught.value.message == "content is not valid UTF-8, the charset its media type names"


@pytest.mark.parametrize("media_type", ["text/markdown", "text/x-rst", "text/csv", "text/html"])
def test_every_text_format_is_decoded_the_same_way(media_type: str) -> None:
    source = {
        "text/markdown": "# Caf\xe9\n\nCr\xe8me br\xfbl\xe9e.\n",
        "text/x-rst": "Caf\xe9\n=====\n\nCr\xe8me br\xfbl\xe9e.\n",
        "text/csv": "dish,place\nCr\xe8me br\xfbl\xe9e,Caf\xe9\n",
        "text/html": "<h1>Caf\xe9</h1><p>Cr\xe8me br\xfbl\xe9e.</p>",
    }[media_type]
    read = loaded(SourceDocument("d", "d", source.encode("cp1252"), media_type=media_type))
    assert read.encoding == "windows-1252"
    assert "Crème brûlée" in read.sections[0].text


def test_an_html_pages_declared_charset_comes_before_utf8() -> None:
    # Valid UTF-8 too, but the page says what it is.
    page = '<meta charset="windows-1251"><p>\u0412\u043e\u0437\u0432\u0440\u0430\u0442</p>'.encode("cp1251")
    read = loaded(SourceDocument("d", "d.html", page, media_type="text/html"))
    assert (read.sections[0].text, read.encoding) == ("Возврат", "windows-1251")
    lying = '<meta charset="utf-16"><p>caf\xe9</p>'.encode()  # an ASCII page cannot be UTF-16 (browsers agree)
    read = loaded(SourceDocument("d", "d.html", lying, media_type="text/html"))
    assert (read.sections[0].text, read.encoding) == ("café", "UTF-8")


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64), "a PNG image"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(64), "a JPEG image"),
        (b"GIF89a\x01\x00\x01\x00" + bytes(32), "a GIF image"),
        (build_pdf([["Hello"]]), "a PDF document"),
        (_zip({"word/document.xml": b"<w/>", "[Content_Types].xml": b"<t/>"}), "a Word document (.docx)"),
        (_zip({"xl/workbook.xml": b"<x/>"}), "an Excel workbook (.xlsx)"),
        (_zip({"notes.txt": b"hello"}), "a ZIP archive"),
        (gzip.compress(b"hello " * 100), "gzip-compressed data"),
        (b"\x7fELF\x02\x01\x01\x00" + bytes(64), "an ELF executable"),
        (b"MZ\x90\x00\x03\x00\x00\x00" + bytes(64), "a Windows executable"),
        (b"SQLite format 3\x00" + bytes(64), "an SQLite database"),
        (bytes(range(256)) * 8, "binary data"),
        (b"\x00" * 100, "binary data"),
    ],
    ids=["png", "jpeg", "gif", "pdf", "docx", "xlsx", "zip", "gzip", "elf", "exe", "sqlite", "bytes", "zeros"],
)
def test_content_that_is_not_text_is_refused_naming_what_it_looks_like(content: bytes, what: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode_text(content, "text/markdown")
    assert caught.value.message == f"content looks like {what}, not text/markdown"
    assert [v.field for v in caught.value.violations] == ["content"]


def test_short_signatures_need_binary_content_to_count() -> None:
    """ "MZ", "BM" or "ID3" also start words: only content with NUL bytes early on is taken for those formats."""
    for text in ("MZ-series servers are covered.", "BMW leases end in March.", "ID3 tags name the album."):
        assert looks_like(text.encode()) is None
        assert decode_text(text.encode(), "text/plain").text == text
