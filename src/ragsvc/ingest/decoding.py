"""Bytes to text for the text formats (plain text, Markdown, reStructuredText, CSV/TSV, HTML), and the refusal of
content that is not text at all.

The encoding is found in this order:

1. content that starts like a known binary format (PNG, JPEG, GIF, PDF, ZIP and the Office files in one, gzip,
   ELF ...) is refused, naming what it looks like;
2. a byte-order mark: UTF-8, UTF-16 or UTF-32;
3. the charset the media type names ("text/plain; charset=windows-1251"), which must then decode the content;
4. the charset the content declares (an HTML page's <meta charset>), when it decodes the content;
5. UTF-8;
6. a guess by charset-normalizer among the encodings of the WHATWG Encoding Standard (what browsers read: the
   windows-125x and ISO-8859 code pages, KOI8, the Chinese, Japanese and Korean ones, UTF-16 without a mark).
   Text that windows-1252 reads as cleanly as the best guess is windows-1252: for Western text with a few
   accented letters the guess is often another Latin code page that differs only in rare letters.

Content with NUL bytes that is not UTF-16 or UTF-32, or whose text is mostly control characters, is refused as
binary data. A short text in a single-byte code page of another script can be guessed wrong: declaring its
charset in the media type settles it. The encoding used is reported by its IANA name (UTF-8, windows-1252 ...).
"""

from __future__ import annotations

import codecs
import io
import re
import zipfile
from dataclasses import dataclass

import charset_normalizer

from ragsvc.errors import FieldViolation, InvalidRequest

# Byte-order marks, UTF-32's before UTF-16's (FF FE 00 00 starts with FF FE).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# (offset, signature, what the content looks like) of common formats that are not text.
_SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (0, b"\xff\xd8\xff", "a JPEG image"),
    (0, b"GIF87a", "a GIF image"),
    (0, b"GIF89a", "a GIF image"),
    (0, b"%PDF-", "a PDF document"),
    (0, b"\x1f\x8b", "gzip-compressed data"),
    (0, b"BZh", "bzip2-compressed data"),
    (0, b"\xfd7zXZ\x00", "xz-compressed data"),
    (0, b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
    (0, b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (0, b"Rar!\x1a\x07", "a RAR archive"),
    (0, b"\x7fELF", "an ELF executable"),
    (0, b"MZ", "a Windows executable"),
    (0, b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (0, b"\x00asm", "a WebAssembly module"),
    (0, b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Microsoft Office file (.doc, .xls, .ppt)"),
    (0, b"SQLite format 3\x00", "an SQLite database"),
    (0, b"II*\x00", "a TIFF image"),
    (0, b"MM\x00*", "a TIFF image"),
    (0, b"BM", "a BMP image"),
    (0, b"\x00\x00\x01\x00", "an icon (.ico)"),
    (0, b"OggS", "Ogg audio or video"),
    (0, b"fLaC", "FLAC audio"),
    (0, b"ID3", "MP3 audio"),
    (4, b"ftyp", "an MP4 or QuickTime video"),
    (8, b"WEBP", "a WebP image"),
    (8, b"WAVE", "WAV audio"),
    (8, b"AVI ", "an AVI video"),
)
# Signatures of two or three bytes ("MZ", "BM", "BZh", "ID3") also start ordinary words: they count only when the
# content also holds NUL bytes early on, as those formats do and text does not.
_SHORT = 3
_ZIP = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
# What an Office or other ZIP-packaged file holds, by a member that names its kind.
_ZIP_KINDS = (
    ("word/document.xml", "a Word document (.docx)"),
    ("xl/workbook.xml", "an Excel workbook (.xlsx)"),
    ("ppt/presentation.xml", "a PowerPoint presentation (.pptx)"),
    ("META-INF/container.xml", "an EPUB book"),
    ("content.xml", "an OpenDocument file"),
    ("META-INF/MANIFEST.MF", "a Java archive"),
)
# The guesses allowed (Python codec names): the WHATWG Encoding Standard's encodings, without the Mac ones, which
# win on short Western texts that they read as Icelandic or Turkish.
_GUESSED = [
    "cp1250", "cp1251", "cp1252", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257", "cp1258", "cp874", "cp866",
    "iso8859_2", "iso8859_3", "iso8859_4", "iso8859_5", "iso8859_6", "iso8859_7", "iso8859_8", "iso8859_10",
    "iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16", "koi8_r", "koi8_u", "gb18030", "gbk", "big5",
    "euc_jp", "iso2022_jp", "shift_jis", "cp932", "euc_kr", "cp949", "utf_16_le", "utf_16_be", "utf_32_le",
    "utf_32_be",
]  # fmt: skip
_GUESS_BYTES = 1 << 20  # the guess reads at most the first MiB
_MAX_CONTROL_SHARE = 0.05  # more control characters than this (of the first MiB of text): binary data
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")  # all but tab, newlines, form feed and escape
# Labels that mean windows-1252, as browsers read them (WHATWG): a page "in ISO-8859-1" is in windows-1252.
_WESTERN_LABELS = frozenset({"iso8859-1", "ascii", "cp1252"})
_WESTERN = "cp1252"
_PASS_C1 = "ragsvc-pass-c1"


def _pass_c1(error: UnicodeError) -> tuple[str, int]:
    """windows-1252's five undefined bytes read as the C1 controls of the same number (as WHATWG's decoder does)."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return error.object[error.start : error.end].decode("latin-1"), error.end


codecs.register_error(_PASS_C1, _pass_c1)


@dataclass(frozen=True, slots=True)
class DecodedText:
    """Text and the IANA name of the encoding it was read in."""

    text: str
    encoding: str


def not_text(what: str, media_type: str) -> InvalidRequest:
    """The refusal of content that looks like `what` ("a PNG image") sent as `media_type`."""
    description = f"looks like {what}, not {media_type}"
    return InvalidRequest([FieldViolation("content", description)], f"content {description}")


def unreadable(description: str) -> InvalidRequest:
    """The refusal of content that cannot be read: `description` says why ("is not valid UTF-16")."""
    return InvalidRequest([FieldViolation("content", description)], f"content {description}")


def looks_like(content: bytes) -> str | None:
    """What `content` looks like when it starts like a common format that is not text ("a PNG image"); None
    when it does not."""
    if content.startswith(_ZIP):
        return _zip_kind(content)
    early_nul = b"\x00" in content[:64]
    for offset, signature, what in _SIGNATURES:
        if content.startswith(signature, offset) and (len(signature) > _SHORT or early_nul):
            return what
    return None


def _zip_kind(content: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, ValueError, OSError):
        return "a ZIP archive"
    return next((what for member, what in _ZIP_KINDS if member in names), "a ZIP archive")


def decode_text(content: bytes, media_type: str, *, charset: str | None = None, declared: str | None = None) -> DecodedText:
    """`content` as text (see the module's docstring), `charset` being the media type's and `declared` the one
    the content declares (Python codec names). Raises InvalidRequest for content that is not text, or not in the
    charset the media type names."""
    if (what := looks_like(content)) is not None:
        raise not_text(what, media_type)
    decoded = _decoded(content, media_type, charset, declared)
    sample = decoded.text[:_GUESS_BYTES]
    if sample and sum(1 for _ in _CONTROLS.finditer(sample)) > _MAX_CONTROL_SHARE * len(sample):
        raise not_text("binary data", media_type)
    return decoded


def _decoded(content: bytes, media_type: str, charset: str | None, declared: str | None) -> DecodedText:
    for bom, codec in _BOMS:
        if content.startswith(bom):
            text = _decode(content[len(bom) :], codec)
            if text is None:
                raise unreadable(f"starts with a {iana_name(codec)} byte-order mark but is not valid {iana_name(codec)}")
            return DecodedText(text, iana_name(codec))
    if charset is not None:
        text = _decode(content, charset)
        if text is None:
            raise unreadable(f"is not valid {iana_name(charset)}, the charset its media type names")
        return DecodedText(text, iana_name(_effective(charset)))
    # A page that declares UTF-16 in ASCII is not UTF-16 (browsers read it as UTF-8).
    if declared is not None and not _is_wide(declared) and (text := _decode(content, declared)) is not None:
        return DecodedText(text, iana_name(_effective(declared)))
    if b"\x00" not in content and (text := _decode(content, "utf-8")) is not None:
        return DecodedText(text, "UTF-8")
    guessed = _guess(content)
    if guessed is None or (text := _decode(content, guessed)) is None:
        if b"\x00" in content:
            raise not_text("binary data", media_type)
        raise unreadable(
            "is not text in an encoding this server recognises (UTF-8, UTF-16 with a byte-order mark, "
            f"windows-1252 ...): send it as UTF-8, or name its charset in the media type ({media_type}; charset=...)"
        )
    return DecodedText(text, iana_name(guessed))


def _is_wide(codec: str) -> bool:
    return codecs.lookup(codec).name.startswith(("utf-16", "utf-32"))


def _effective(codec: str) -> str:
    """The codec that reads text labelled `codec`: windows-1252 for the labels browsers read as it."""
    return _WESTERN if codecs.lookup(codec).name in _WESTERN_LABELS else codec


def _decode(content: bytes, codec: str) -> str | None:
    """`content` decoded strictly (windows-1252 as browsers decode it), or None."""
    codec = _effective(codec)
    try:
        return content.decode(codec, _PASS_C1 if codec == _WESTERN else "strict")
    except (UnicodeDecodeError, LookupError):
        return None


def _guess(content: bytes) -> str | None:
    """charset-normalizer's best guess among _GUESSED, windows-1252 when it reads the text as cleanly."""
    sample = content[: _GUESS_BYTES - _GUESS_BYTES % 4]
    matches = charset_normalizer.from_bytes(sample, cp_isolation=_GUESSED)
    best = matches.best()
    if best is None:
        return None
    if best.encoding.startswith(("utf_16", "utf_32")):
        return best.encoding
    western = sample.decode(_WESTERN, _PASS_C1)
    if str(best) == western or any(m.encoding == _WESTERN and m.chaos <= best.chaos for m in matches):
        return _WESTERN
    return best.encoding


# Python codec names -> IANA charset names, where they differ by more than case.
_IANA = {
    "utf-8": "UTF-8",
    "utf-16-le": "UTF-16LE",
    "utf-16-be": "UTF-16BE",
    "utf-16": "UTF-16",
    "utf-32-le": "UTF-32LE",
    "utf-32-be": "UTF-32BE",
    "utf-32": "UTF-32",
    "cp932": "windows-31j",
    "cp949": "windows-949",
    "cp874": "windows-874",
    "cp866": "IBM866",
    "shift_jis": "Shift_JIS",
    "euc_jp": "EUC-JP",
    "euc_kr": "EUC-KR",
    "iso2022_jp": "ISO-2022-JP",
    "big5": "Big5",
    "mac-roman": "macintosh",
}


def iana_name(codec: str) -> str:
    """The IANA name of a Python codec: "cp1252" -> "windows-1252", "iso8859-2" -> "ISO-8859-2"."""
    name = codecs.lookup(codec).name
    if name in _IANA:
        return _IANA[name]
    if name.startswith("cp125"):
        return f"windows-{name[2:]}"
    if name.startswith("iso8859-"):
        return f"ISO-8859-{name[8:]}"
    return name.upper()
