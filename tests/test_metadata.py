"""Typed document metadata: how a value given as text gets its type, what a key and a value may be, timestamps, and
the source types' trust weights."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from ragsvc.metadata import (
    MAX_KEYS,
    MetadataType,
    as_text,
    format_timestamp,
    inferred,
    key_problem,
    parse_timestamp,
    problems,
    read_entry,
    timestamp_span,
    type_of,
)
from ragsvc.source_trust import DEFAULT_SOURCE_TYPE, SourceTrust, parse_weights


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("FALSE", False),
        ("1872", 1872.0),
        ("-3.5e2", -350.0),
        ("2024-01-01", datetime(2024, 1, 1, tzinfo=UTC)),
        ("2024-01-01T09:30:00+02:00", datetime(2024, 1, 1, 7, 30, tzinfo=UTC)),
        ("India", "India"),
        ("2024-13", "2024-13"),  # not a date, not a number: a string
        ("nan", "nan"),  # no special floats from text
        (True, True),
        (7, 7.0),
    ],
)
def test_a_value_without_a_type_is_the_first_type_that_reads_it(raw: str | float | bool, expected: object) -> None:
    value = inferred(raw)
    assert value == expected and type(value) is type(expected)


def test_a_named_type_wins_and_is_checked() -> None:
    assert read_entry("code:string", "007") == ("code", "007")
    assert read_entry("year", "007") == ("year", 7.0)
    assert read_entry("flag:bool", True) == ("flag", True)
    assert read_entry("when:timestamp", "2024-02-29") == ("when", datetime(2024, 2, 29, tzinfo=UTC))
    assert read_entry("n:number", 2) == ("n", 2.0)
    assert read_entry("s:string", True) == ("s", "true")
    for spec, raw, why in [
        ("year:number", "abc", "year: 'abc' is not a number"),
        ("flag:bool", "yes", "flag: 'yes' is not a boolean"),
        ("when:timestamp", "01/02/2024", "when: '01/02/2024' is not an ISO 8601 date"),
        ("when:timestamp", 3, "when: 3 is not a timestamp"),
        ("year:integer", "1", "year: unknown type 'integer' (one of string, number, bool, timestamp)"),
        ("1year", "1", "a metadata key is a letter or _"),
        ("and", "x", "'and' is a word of the filter language"),
        ("title", "x" * 513, "title: a string must be at most 512 characters"),
        ("big", 1e400, "big: a number must be finite"),
    ]:
        with pytest.raises(ValueError, match=re.escape(why)):
            read_entry(spec, raw)


def test_keys_and_documents_have_limits() -> None:
    assert key_problem("published_at") is None and key_problem("_x9") is None
    assert key_problem("a.b") and key_problem("") and key_problem("x" * 65) and key_problem("NOT")
    assert problems({f"k{i}": 1.0 for i in range(MAX_KEYS)}) == []
    assert problems({f"k{i}": 1.0 for i in range(MAX_KEYS + 1)}) == [("", f"at most {MAX_KEYS} keys per document")]
    assert [key for key, _ in problems({"ok": "x", "bad key": "x", "nan": float("nan")})] == ["bad key", "nan"]


def test_timestamps_are_utc_and_a_date_is_its_whole_day() -> None:
    assert parse_timestamp("2024-01-01T10:00") == datetime(2024, 1, 1, 10, tzinfo=UTC), "no offset: UTC"
    local = datetime(2024, 1, 1, 10, tzinfo=timezone(timedelta(hours=-5)))
    assert format_timestamp(local) == "2024-01-01T15:00:00Z"
    assert format_timestamp(datetime(2024, 1, 1, 0, 0, 0, 250000, tzinfo=UTC)) == "2024-01-01T00:00:00.250000Z"
    assert timestamp_span("2024-01-31") == (datetime(2024, 1, 31, tzinfo=UTC), datetime(2024, 2, 1, tzinfo=UTC))
    assert timestamp_span("2024-01-31T00:00:00Z") == (datetime(2024, 1, 31, tzinfo=UTC), None)
    for bad in ("20240101", "2024-1-1", "yesterday", "2024-01-01T25:00", "2024-02-30"):
        with pytest.raises(ValueError, match="is not an ISO 8601 date"):
            parse_timestamp(bad)


def test_values_read_back_as_written() -> None:
    for value in ("India", 1872.0, 2.5, True, datetime(2024, 5, 1, 12, tzinfo=UTC)):
        assert inferred(as_text(value)) == value if not isinstance(value, str) else as_text(value) == value
        assert type_of(value) is {str: MetadataType.STRING, float: MetadataType.NUMBER, bool: MetadataType.BOOL,
                                  datetime: MetadataType.TIMESTAMP}[type(value)]  # fmt: skip
    assert as_text(1872.0) == "1872" and as_text(2.5) == "2.5"


def test_source_types_weigh_as_r_003_08_says_and_an_upload_is_not_fully_trusted() -> None:
    trust = SourceTrust.default()
    assert trust.default_type == DEFAULT_SOURCE_TYPE == "user_upload"
    assert trust.weight("user_upload") == 0.5 and trust.weight("high_court") == 0.9
    assert trust.weight("statute") == trust.weight("supreme_court") == 1.0 and trust.weight("secondary") == 0.7
    custom = SourceTrust.parse("wiki=0.4, vendor_docs=1", "wiki")
    assert custom.types == ("wiki", "vendor_docs") and custom.weight("wiki") == 0.4
    for spec, why in [("wiki=1.5", "not type=weight"), ("Wiki=0.5", "not type=weight"), ("wiki", "not type=weight"),
                      ("", "lists no source type")]:  # fmt: skip
        with pytest.raises(ValueError, match=why):
            parse_weights(spec)
    with pytest.raises(ValueError, match="the default source type 'user_upload' is not in the table"):
        SourceTrust.parse("wiki=0.4")
