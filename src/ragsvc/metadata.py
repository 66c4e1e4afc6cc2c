"""Typed document metadata: values by key that a document carries besides its text (a string, a number, a boolean
or a timestamp each), which questions filter on (`ragsvc.filters`).

A key's type is fixed per tenant by the first document that carries it (`retrieval.schema.MetadataSchema`). Where
a value arrives as text (`ragsvc ingest --meta key=value`, a string of a `NAME.meta.json` sidecar), its type is
the first of these that reads it (`inferred`): `true`/`false` a boolean, a decimal number a number, an ISO 8601
date or date-time (`2024-01-01`, `2024-01-01T09:30:00Z`) a timestamp, anything else a string. `key:type=value`
names the type instead (`code:string=007`); JSON numbers and booleans keep their own type.

Two keys are the document's own fields, filled by ragsvc: `source_type` (which kind of source it is: it sets the
document's trust weight, see `ragsvc.source_trust`) and `published_at` (its publication date, also used for the
recency boost of ranking).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

__all__ = [
    "MAX_KEYS",
    "MAX_TEXT_CHARS",
    "PUBLISHED_AT",
    "SOURCE_TYPE",
    "MetadataType",
    "MetadataValue",
    "as_text",
    "format_timestamp",
    "inferred",
    "key_problem",
    "parse_timestamp",
    "problems",
    "read_entry",
    "timestamp_span",
    "type_of",
    "typed",
    "value_problem",
]

SOURCE_TYPE = "source_type"
PUBLISHED_AT = "published_at"
MAX_KEYS = 32  # keys per document
MAX_TEXT_CHARS = 512  # characters of a string value
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# Words of the filter language, which a key cannot be (compared without case).
_RESERVED = frozenset({"and", "or", "not", "in", "true", "false"})
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:\d{2})?")


class MetadataType(enum.Enum):
    """The type of a metadata key."""

    STRING = "string"
    NUMBER = "number"
    BOOL = "bool"
    TIMESTAMP = "timestamp"


MetadataValue = str | float | bool | datetime


def type_of(value: MetadataValue) -> MetadataType:
    if isinstance(value, bool):  # before numbers: a bool is an int to Python
        return MetadataType.BOOL
    if isinstance(value, int | float):
        return MetadataType.NUMBER
    if isinstance(value, datetime):
        return MetadataType.TIMESTAMP
    return MetadataType.STRING


def key_problem(key: str) -> str | None:
    """Why `key` cannot name metadata; None when it can."""
    if not _KEY.fullmatch(key):
        return "a metadata key is a letter or _ then letters, digits or _, at most 64 characters"
    if key.lower() in _RESERVED:
        return f"{key!r} is a word of the filter language"
    return None


def value_problem(value: MetadataValue) -> str | None:
    """Why `value` cannot be stored; None when it can."""
    if isinstance(value, float) and not math.isfinite(value):
        return "a number must be finite"
    if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
        return f"a string must be at most {MAX_TEXT_CHARS} characters"
    return None


def parse_timestamp(text: str) -> datetime:
    """An ISO 8601 date (`2024-01-01`, midnight UTC) or date-time (`2024-01-01T09:30:00Z`; UTC when it names no
    offset), in UTC. ValueError otherwise."""
    text = text.strip()
    try:
        if not (_DATE.fullmatch(text) or _DATE_TIME.fullmatch(text)):
            raise ValueError(text)
        parsed = datetime.fromisoformat(text)  # checks the fields: no month 13, no hour 25
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 date (2024-01-31) or date-time (2024-01-31T09:30:00Z)") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def timestamp_span(text: str) -> tuple[datetime, datetime | None]:
    """The time a timestamp literal names: a date is the whole day, [midnight, next midnight); a date-time is an
    instant (None as its end)."""
    start = parse_timestamp(text)
    return (start, start + timedelta(days=1)) if _DATE.fullmatch(text.strip()) else (start, None)


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC, as stored and compared by the engines: `2024-01-01T00:00:00Z`."""
    utc = value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{utc.microsecond:06d}" if utc.microsecond else "") + "Z"


def typed(kind: MetadataType, raw: str | float | bool) -> MetadataValue:
    """`raw` (text, or a JSON number or boolean) as a value of `kind`; ValueError saying why it is not one."""
    if kind is MetadataType.STRING:
        if isinstance(raw, bool):
            return "true" if raw else "false"
        return raw if isinstance(raw, str) else _number_text(raw)
    if kind is MetadataType.BOOL:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise ValueError(f"{raw!r} is not a boolean (true or false)")
    if kind is MetadataType.NUMBER:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str) and _NUMBER.fullmatch(raw.strip()):
            return float(raw)
        raise ValueError(f"{raw!r} is not a number")
    if isinstance(raw, str):
        return parse_timestamp(raw)
    raise ValueError(f"{raw!r} is not a timestamp (an ISO 8601 date or date-time)")


def inferred(raw: str | float | bool) -> MetadataValue:
    """A value given without a type: a JSON number or boolean as such; text as a boolean, a number, a timestamp,
    or else a string, the first that reads it."""
    if not isinstance(raw, str):
        return typed(MetadataType.BOOL if isinstance(raw, bool) else MetadataType.NUMBER, raw)
    for kind in (MetadataType.BOOL, MetadataType.NUMBER, MetadataType.TIMESTAMP):
        try:
            return typed(kind, raw)
        except ValueError:
            continue
    return raw


def read_entry(spec: str, raw: str | float | bool) -> tuple[str, MetadataValue]:
    """(key, value) of `key=raw` or `key:type=raw` (type: string, number, bool or timestamp); ValueError naming
    what is wrong."""
    key, _, kind = spec.partition(":")
    key = key.strip()
    if (problem := key_problem(key)) is not None:
        raise ValueError(problem)
    kinds = {t.value: t for t in MetadataType}
    if kind and kind.strip().lower() not in kinds:
        raise ValueError(f"{key}: unknown type {kind!r} (one of {', '.join(kinds)})")
    try:
        value = typed(kinds[kind.strip().lower()], raw) if kind else inferred(raw)
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None
    if (problem := value_problem(value)) is not None:
        raise ValueError(f"{key}: {problem}")
    return key, value


def as_text(value: MetadataValue) -> str:
    """A value as the filter language and the CLI write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _number_text(value)
    if isinstance(value, datetime):
        return format_timestamp(value)
    return value


def _number_text(number: float) -> str:
    return str(int(number)) if float(number).is_integer() and abs(number) < 1e15 else repr(float(number))


def problems(metadata: Mapping[str, MetadataValue]) -> list[tuple[str, str]]:
    """(key, why) for each key or value of `metadata` that cannot be stored, and for too many keys."""
    found = [(key, why) for key in metadata if (why := key_problem(key)) is not None]
    found += [(key, why) for key, value in metadata.items() if (why := value_problem(value)) is not None]
    if len(metadata) > MAX_KEYS:
        found.append(("", f"at most {MAX_KEYS} keys per document"))
    return found
