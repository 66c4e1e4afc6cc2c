"""PDF to sections: one per page, numbered from 1, headed by the title of the PDF outline (bookmark) entry that
covers the page. pypdf reads it; every stream it decompresses stops at RAG_INGEST_MAX_DECOMPRESSED_BYTES (pypdf's
own limits, set per read), and the parse time is checked between pages."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator
from typing import Any

import pypdf
from pypdf.errors import LimitReachedError

from ragsvc.errors import InvalidRequest
from ragsvc.ingest.decoding import looks_like, not_text, unreadable
from ragsvc.ingest.limits import MAX_DECOMPRESSED_BYTES, Deadline, DocumentLimits, exceeded
from ragsvc.ingest.media import PDF
from ragsvc.ingest.sections import Loaded, Section

_log = logging.getLogger(__name__)


def pdf_sections(content: bytes, limits: DocumentLimits, *, deadline: Deadline | None = None) -> Loaded:
    """The non-empty pages as sections (see the module's docstring). Raises InvalidRequest for content that is
    not a readable PDF (another format, broken, or encrypted with a password), DocumentLimitExceeded past a
    limit."""
    with _bounded(limits):
        reader = _pdf_reader(content)
        try:
            headings = _outline_headings(reader)
            sections = []
            for number, page in enumerate(reader.pages, start=1):
                if deadline is not None:
                    deadline.check()
                if (text := _page_text(page)).strip():
                    sections.append(Section(text, headings.get(number), number))
            return Loaded(sections)
        except (InvalidRequest, LimitReachedError):
            raise
        except Exception as exc:  # pypdf raises many kinds of errors on damaged files
            raise unreadable(f"is not a readable PDF: {exc}") from exc


def pdf_title(content: bytes, limits: DocumentLimits = DocumentLimits()) -> str | None:
    """The PDF's document-information title, if it has one."""
    try:
        with _bounded(limits):
            metadata = _pdf_reader(content).metadata
            title = metadata.title if metadata is not None else None
    except Exception:  # noqa: BLE001 - pypdf raises anything on a damaged file; it is reported when ingested
        return None
    return title.strip() if isinstance(title, str) and title.strip() else None


@contextlib.contextmanager
def _bounded(limits: DocumentLimits) -> Iterator[None]:
    """pypdf's decompression limits at `limits.decompressed_bytes` for this thread's reads; its LimitReachedError
    as DocumentLimitExceeded."""
    most = limits.decompressed_bytes
    bounded = pypdf.get_configuration().with_overwrites(
        maximum_declared_stream_length=most,
        array_based_stream_maximum_output_length=most,
        jbig2_maximum_output_length=most,
        lzw_maximum_output_length=most,
        run_length_maximum_output_length=most,
        zlib_maximum_output_length=most,
        brotli_maximum_output_length=most,
        image_maximum_buffer_size=most,
        stream_decoding_work_maximum_length=4 * most,
    )
    try:
        with pypdf.apply_configuration(bounded):
            yield
    except LimitReachedError as exc:
        found = f"has a PDF stream that decompresses to more than {most:,} bytes"
        raise exceeded(MAX_DECOMPRESSED_BYTES, most, found) from exc


def _pdf_reader(content: bytes) -> pypdf.PdfReader:
    if b"%PDF-" not in content[:1024] and (what := looks_like(content)) is not None:
        raise not_text(what, PDF)
    try:
        reader = pypdf.PdfReader(io.BytesIO(content))
        if reader.is_encrypted and not reader.decrypt(""):
            raise unreadable("is a PDF encrypted with a password")
    except (InvalidRequest, LimitReachedError):
        raise
    except Exception as exc:
        raise unreadable(f"is not a readable PDF: {exc}") from exc
    return reader


def _page_text(page: pypdf.PageObject) -> str:
    _decode_streams(page)
    text = page.extract_text() or ""
    return text.replace("\x00", "")


def _decode_streams(page: pypdf.PageObject) -> None:
    """Decodes the page's content and its form XObjects: pypdf's text extraction skips a stream past its limits
    without a word, while decoding raises LimitReachedError; the decoded data is kept for the extraction. A
    stream damaged otherwise is left to the extraction, which reads what it can."""
    try:
        contents = page.get_contents()
        if contents is not None:
            contents.get_data()
        resources = page.get("/Resources")
        xobjects = resources.get_object().get("/XObject") if resources is not None else None
        for reference in xobjects.get_object().values() if xobjects is not None else ():
            xobject = reference.get_object()
            if isinstance(xobject, pypdf.generic.StreamObject) and xobject.get("/Subtype") == "/Form":
                xobject.get_data()
    except LimitReachedError:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises anything on a damaged stream
        _log.debug("a damaged stream on a PDF page: %s", exc)


def _outline_headings(reader: pypdf.PdfReader) -> dict[int, str]:
    """Page number -> title of the last outline entry starting on or before that page (best effort: a broken
    outline gives no headings rather than no document)."""
    starts: list[tuple[int, int, str]] = []  # (page number, order in the outline, title)

    def walk(items: Any) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item)
                continue
            page = reader.get_destination_page_number(item)
            title = str(getattr(item, "title", "") or "").strip()
            if page is not None and page >= 0 and title:
                starts.append((page + 1, len(starts), title))

    try:
        walk(reader.outline)
    except LimitReachedError:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises anything on a damaged outline
        _log.warning("ignoring an unreadable PDF outline: %s", exc)
        return {}
    headings: dict[int, str] = {}
    current: str | None = None
    ordered = sorted(starts)
    next_start = 0
    for number in range(1, len(reader.pages) + 1):
        while next_start < len(ordered) and ordered[next_start][0] <= number:
            current = ordered[next_start][2]
            next_start += 1
        if current is not None:
            headings[number] = current
    return headings
