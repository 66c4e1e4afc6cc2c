"""The media types ragsvc reads, the file extensions that stand for them, and a media type's parts ("text/markdown;
charset=windows-1252" is text/markdown in windows-1252)."""

from __future__ import annotations

import codecs
from dataclasses import dataclass

PLAIN = "text/plain"
MARKDOWN = "text/markdown"
HTML = "text/html"
PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
RST = "text/x-rst"
CSV = "text/csv"
TSV = "text/tab-separated-values"
# File extension -> media type: what `ragsvc ingest` picks up in a folder.
MEDIA_TYPES = {
    ".txt": PLAIN,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".html": HTML,
    ".htm": HTML,
    ".pdf": PDF,
    ".docx": DOCX,
    ".rst": RST,
    ".csv": CSV,
    ".tsv": TSV,
}
SUPPORTED = tuple(dict.fromkeys(MEDIA_TYPES.values()))
# Formats of bytes that are not text: a `charset` parameter means nothing to them.
BINARY = frozenset({PDF, DOCX})


@dataclass(frozen=True, slots=True)
class MediaType:
    """A media type's essence (lower case, no parameters) and the Python codec its `charset` parameter names."""

    essence: str
    charset: str | None = None


def parse_media_type(value: str) -> MediaType:
    """`value` split into its essence and charset. Raises ValueError naming the problem: an unsupported type, or a
    charset no codec reads."""
    essence, *parameters = (part.strip() for part in value.split(";"))
    essence = essence.lower()
    if essence not in SUPPORTED:
        raise ValueError(f"{essence!r} is not supported: use one of {', '.join(SUPPORTED)} (a text type may name its charset)")
    charset = None
    for parameter in parameters:
        name, _, given = parameter.partition("=")
        if name.strip().lower() == "charset" and essence not in BINARY:
            label = given.strip().strip('"').strip()
            try:
                b"".decode(label)  # LookupError for a name no codec has, and for codecs not of text (base64 ...)
                charset = codecs.lookup(label).name
            except LookupError:
                raise ValueError(f"names charset {label!r}, which this server cannot decode") from None
    return MediaType(essence, charset)
