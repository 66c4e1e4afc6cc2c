"""The metadata filter language: what parses, what it means once resolved against a tenant's declared keys, and
every way an expression is refused (with what the refusal says)."""

from __future__ import annotations

import re

import pytest

from ragsvc.filters import (
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_EXPRESSION_CHARS,
    And,
    Condition,
    FilterError,
    Match,
    Not,
    Or,
    Range,
    keys_of,
    parse,
    resolve,
)
from ragsvc.metadata import MetadataType

S, N, B, T = MetadataType.STRING, MetadataType.NUMBER, MetadataType.BOOL, MetadataType.TIMESTAMP
DECLARED = {"jurisdiction": S, "year": N, "binding": B, "published_at": T}


def resolved(text: str) -> object:
    return resolve(parse(text), DECLARED)


def refusal(text: str, declared: dict[str, MetadataType] = DECLARED) -> str:
    with pytest.raises(FilterError) as caught:
        resolve(parse(text), declared)
    return str(caught.value)


def test_and_binds_tighter_than_or_and_not_tighter_than_both() -> None:
    tree = parse("a = 1 OR b = 2 and NOT c = 3")
    assert tree == Or((Condition("a", "=", ("1",)), And((Condition("b", "=", ("2",)), Not(Condition("c", "=", ("3",)))))))
    assert parse("(a = 1 OR b = 2) AND c = 3") == And(
        (Or((Condition("a", "=", ("1",)), Condition("b", "=", ("2",)))), Condition("c", "=", ("3",)))
    )
    assert parse("NOT NOT a=1") == Not(Not(Condition("a", "=", ("1",))))
    assert keys_of(parse("a = 1 OR (b IN (x, y) AND NOT c < 2)")) == {"a", "b", "c"}


def test_literals_are_words_or_quoted_strings() -> None:
    assert parse('jurisdiction IN (India,"Sri Lanka", "say \\"hi\\"", "back\\\\slash")') == Condition(
        "jurisdiction", "in", ("India", "Sri Lanka", 'say "hi"', "back\\slash")
    )
    assert parse("published_at >= 2024-01-01T09:30:00+02:00") == Condition("published_at", ">=", ("2024-01-01T09:30:00+02:00",))
    assert parse('x = "AND"') == Condition("x", "=", ("AND",)), "a quoted keyword is a value"


def test_strings_and_booleans_match_numbers_and_timestamps_take_ranges() -> None:
    assert resolved('jurisdiction = "Sri Lanka"') == Match("jurisdiction", S, ("Sri Lanka",))
    assert resolved("jurisdiction IN (India, UK, India)") == Match("jurisdiction", S, ("India", "UK"))
    assert resolved("jurisdiction != UK") == Not(Match("jurisdiction", S, ("UK",)))
    assert resolved("binding = TRUE") == Match("binding", B, ("true",))
    assert resolved("year = 1872") == Range("year", N, gte=1872.0, lte=1872.0)
    assert resolved("year > 1900 AND year <= 2000.5") == And((Range("year", N, gt=1900.0), Range("year", N, lte=2000.5)))
    assert resolved("year IN (1, 2)") == Or((Range("year", N, gte=1.0, lte=1.0), Range("year", N, gte=2.0, lte=2.0)))
    assert resolved('year = "7"') == Range("year", N, gte=7.0, lte=7.0), "the key's type reads the value"


def test_a_date_is_its_whole_day_and_a_date_time_an_instant() -> None:
    day, next_day = "2024-01-31T00:00:00Z", "2024-02-01T00:00:00Z"
    assert resolved("published_at = 2024-01-31") == Range("published_at", T, gte=day, lt=next_day)
    assert resolved("published_at >= 2024-01-31") == Range("published_at", T, gte=day)
    assert resolved("published_at > 2024-01-31") == Range("published_at", T, gte=next_day)
    assert resolved("published_at <= 2024-01-31") == Range("published_at", T, lt=next_day)
    assert resolved("published_at < 2024-01-31") == Range("published_at", T, lt=day)
    assert resolved("published_at > 2024-01-31T12:00:00+01:00") == Range("published_at", T, gt="2024-01-31T11:00:00Z")
    assert resolved("published_at = 2024-01-31T12:00") == Range(
        "published_at", T, gte="2024-01-31T12:00:00Z", lte="2024-01-31T12:00:00Z"
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("year >", "expected a value, found the end at character 7"),
        ("year 1872", "expected one of <= >= != = < > or IN after 'year', found '1872' at character 6"),
        ("(year < 3", "expected ')', found the end at character 10"),
        ("year < 3)", "expected AND, OR or the end of the expression, found ')' at character 9"),
        ("year = 1 AND", "expected a metadata key, found the end at character 13"),
        ('jurisdiction = "India', "the string starting at character 16 has no closing quote"),
        ("year == 3", "expected a value, found '=' at character 7"),
        ("year = 3 && binding = true", "unexpected character '&' at character 10"),
        ("1year = 3", "1year: a metadata key is a letter or _ then letters, digits or _, at most 64 characters"),
        ("year IN ()", "expected a value, found ')' at character 10"),
        ("year IN (1 2)", "expected ')', found '2' at character 12"),
    ],
)
def test_what_does_not_parse_says_what_and_where(text: str, why: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse(text)
    assert str(caught.value) == why


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a = " + "x" * MAX_EXPRESSION_CHARS, "at most 2000 characters"),
        ("NOT " * (MAX_DEPTH + 2) + "a = 1", f"deeper than {MAX_DEPTH}"),
        (" AND ".join(["a = 1"] * (MAX_CONDITIONS + 1)), f"at most {MAX_CONDITIONS} conditions"),
        ("a IN (" + ", ".join(map(str, range(101))) + ")", "IN lists at most 100 values"),
    ],
)
def test_expressions_are_bounded(text: str, why: str) -> None:
    with pytest.raises(FilterError, match=why):
        parse(text)


def test_a_key_the_tenant_never_declared_is_refused_by_name() -> None:
    why = refusal("jurisdicton = India AND year > 1900")
    assert why == "jurisdicton: no document of this tenant declares this metadata key " \
                  "(declared: binding, jurisdiction, published_at, year)"  # fmt: skip
    assert refusal("a = 1", {}) == "a: no document of this tenant declares this metadata key (declared: none)"
    both = refusal("a = 1 OR b = 2 OR a = 3")
    assert re.findall(r"(\w+): no document", both) == ["a", "b"], "every unknown key once"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("jurisdiction > India", "jurisdiction: > needs a number or timestamp key; this key is a string (use =, != or IN)"),
        ("binding <= true", "binding: <= needs a number or timestamp key; this key is a bool (use =, != or IN)"),
        ("binding = yes", "binding: 'yes' is not a boolean (true or false)"),
        ("year >= nineteen", "year: 'nineteen' is not a number"),
        ("published_at >= 2024", "published_at: '2024' is not an ISO 8601 date"),
        ("year IN (1, x)", "year: 'x' is not a number"),
    ],
)
def test_a_value_or_operator_the_keys_type_does_not_take_is_refused(text: str, why: str) -> None:
    assert refusal(text).startswith(why)
