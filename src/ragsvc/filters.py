"""The metadata filter language of Ask, AskStream and SimulateAsk (`RetrievalOptions.filter.expression`).

    published_at >= 2024-01-01 AND jurisdiction IN (India, "Sri Lanka") AND NOT binding = false

Grammar (keywords in any case; AND binds tighter than OR, NOT tighter than both, as in SQL):

    expression := or
    or         := and ("OR" and)*
    and        := unary ("AND" unary)*
    unary      := "NOT" unary | "(" or ")" | condition
    condition  := key op literal | key "IN" "(" literal ("," literal)* ")"
    op         := "=" | "!=" | "<" | "<=" | ">" | ">="
    literal    := a word of letters, digits and . _ : + - (2024-01-01, -3.5, India, true)
                | a "double-quoted string" (\\" and \\\\ inside)

What a literal means depends on the key's declared type (see `ragsvc.metadata`): a string key compares text (=,
!=, IN); a boolean key takes true or false; a number key reads a number and a timestamp key an ISO 8601 date or
date-time, and both also take ranges. A date literal is its whole day: `published_at = 2024-01-31` is any time
that day, `<= 2024-01-31` includes it and `> 2024-01-31` starts the day after. NOT (and !=) also matches documents
that do not carry the key.

Parsing (`parse`) needs nothing but the text; resolving (`resolve`) checks every key against the tenant's declared
keys and types, and turns literals into typed bounds: a key never declared, a literal its type cannot read, or a
range on a string is an error, never a filter that silently matches nothing. The resolved tree (`Match`, `Range`,
`And`, `Or`, `Not`) is what the engines render into their own filters (`retrieval.layout.render`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ragsvc.metadata import MetadataType, format_timestamp, key_problem, timestamp_span, typed

__all__ = [
    "MAX_CONDITIONS",
    "MAX_DEPTH",
    "MAX_EXPRESSION_CHARS",
    "And",
    "Condition",
    "FilterError",
    "Match",
    "Node",
    "Not",
    "Or",
    "Range",
    "Where",
    "keys_of",
    "parse",
    "resolve",
]

MAX_EXPRESSION_CHARS = 2000
MAX_DEPTH = 16  # nested NOT and parentheses
MAX_CONDITIONS = 64
MAX_IN_VALUES = 100
_OPERATORS = ("<=", ">=", "!=", "=", "<", ">")
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<op><=|>=|!=|=|<|>)|(?P<punct>[(),])|(?P<word>[A-Za-z0-9._:+\-]+))')


class FilterError(ValueError):
    """The expression cannot be parsed or resolved; `problems` are (what, why) pairs, what being "" for the
    expression as a whole or a key."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{what}: {why}" if what else why for what, why in problems))
        self.problems = problems


# -- the parsed tree ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Condition:
    """`key op literal` as written; `op` "in" holds each literal of the list."""

    key: str
    op: str
    literals: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class And:
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    part: Node


# -- the resolved tree's leaves ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Match:
    """The key holds one of `values` (strings; booleans as "true" / "false", how the engines store them)."""

    key: str
    type: MetadataType
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Range:
    """The key's value lies within the bounds set (numbers, or RFC 3339 UTC timestamps for a timestamp key)."""

    key: str
    type: MetadataType
    gt: float | str | None = None
    gte: float | str | None = None
    lt: float | str | None = None
    lte: float | str | None = None


Node = Condition | Match | Range | And | Or | Not
Where = Match | Range | And | Or | Not  # a resolved tree: no Condition left


# -- parsing -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # quoted, op, punct, word, end
    text: str
    at: int  # offset in the expression


def _tokens(text: str) -> list[_Token]:
    tokens = []
    at = 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        found = _TOKEN.match(text, at)
        if found is None or found.lastgroup is None:
            start = len(text) - len(text[at:].lstrip())
            if text[start] == '"':
                raise FilterError([("", f"the string starting at character {start + 1} has no closing quote")])
            raise FilterError([("", f"unexpected character {text[start]!r} at character {start + 1}")])
        start = found.start(found.lastgroup)
        tokens.append(_Token(found.lastgroup, found.group(found.lastgroup), start))
        at = found.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self._tokens = _tokens(text)
        self._at = 0
        self._conditions = 0

    def parse(self) -> Node:
        node = self._or(0)
        token = self._peek()
        if token.kind != "end":
            self._fail(token, "expected AND, OR or the end of the expression")
        return node

    def _peek(self) -> _Token:
        return self._tokens[self._at]

    def _next(self) -> _Token:
        token = self._tokens[self._at]
        self._at += 1
        return token

    def _keyword(self, word: str) -> bool:
        token = self._peek()
        if token.kind == "word" and token.text.upper() == word:
            self._at += 1
            return True
        return False

    def _fail(self, token: _Token, why: str) -> None:
        shown = repr(token.text) if token.kind != "end" else "the end"
        raise FilterError([("", f"{why}, found {shown} at character {token.at + 1}")])

    def _or(self, depth: int) -> Node:
        parts = [self._and(depth)]
        while self._keyword("OR"):
            parts.append(self._and(depth))
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def _and(self, depth: int) -> Node:
        parts = [self._unary(depth)]
        while self._keyword("AND"):
            parts.append(self._unary(depth))
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def _unary(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise FilterError([("", f"nested deeper than {MAX_DEPTH} levels of NOT and parentheses")])
        if self._keyword("NOT"):
            return Not(self._unary(depth + 1))
        token = self._peek()
        if token.kind == "punct" and token.text == "(":
            self._at += 1
            node = self._or(depth + 1)
            self._expect(")")
            return node
        return self._condition()

    def _expect(self, punct: str) -> None:
        token = self._next()
        if token.kind != "punct" or token.text != punct:
            self._fail(token, f"expected {punct!r}")

    def _condition(self) -> Condition:
        key = self._next()
        if key.kind != "word" or key.text.upper() in ("AND", "OR", "NOT", "IN"):
            self._fail(key, "expected a metadata key")
        if (problem := key_problem(key.text)) is not None:
            raise FilterError([(key.text, problem)])
        self._conditions += 1
        if self._conditions > MAX_CONDITIONS:
            raise FilterError([("", f"at most {MAX_CONDITIONS} conditions")])
        if self._keyword("IN"):
            self._expect("(")
            literals = [self._literal()]
            while self._peek().kind == "punct" and self._peek().text == ",":
                self._at += 1
                literals.append(self._literal())
            self._expect(")")
            if len(literals) > MAX_IN_VALUES:
                raise FilterError([(key.text, f"IN lists at most {MAX_IN_VALUES} values")])
            return Condition(key.text, "in", tuple(literals))
        op = self._next()
        if op.kind != "op":
            self._fail(op, f"expected one of {' '.join(_OPERATORS)} or IN after {key.text!r}")
        return Condition(key.text, op.text, (self._literal(),))

    def _literal(self) -> str:
        token = self._next()
        if token.kind == "quoted":
            return re.sub(r"\\(.)", r"\1", token.text[1:-1])
        if token.kind != "word" or token.text.upper() in ("AND", "OR", "NOT", "IN"):
            self._fail(token, "expected a value")
        return token.text


def parse(text: str) -> Node:
    """The tree of `text`; FilterError saying what is wrong and where."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise FilterError([("", f"must be at most {MAX_EXPRESSION_CHARS} characters")])
    if not text.strip():
        raise FilterError([("", "is empty")])
    return _Parser(text).parse()


def keys_of(node: Node) -> set[str]:
    """Every key the tree names."""
    return {condition.key for condition in _conditions(node)}


def _conditions(node: Node) -> Iterator[Condition]:
    if isinstance(node, Condition):
        yield node
    elif isinstance(node, And | Or):
        for part in node.parts:
            yield from _conditions(part)
    elif isinstance(node, Not):
        yield from _conditions(node.part)


# -- resolving -------------------------------------------------------------------------------------------------


def resolve(node: Node, declared: Mapping[str, MetadataType]) -> Where:
    """The tree with each condition typed by its key's declared type; FilterError naming every key that is not
    declared, and every literal or operator its key's type does not take."""
    problems: list[tuple[str, str]] = []
    where = _resolve(node, declared, problems)
    if problems:
        raise FilterError(list(dict.fromkeys(problems)))
    return where


def _resolve(node: Node, declared: Mapping[str, MetadataType], problems: list[tuple[str, str]]) -> Where:
    if isinstance(node, And):
        return And(tuple(_resolve(part, declared, problems) for part in node.parts))
    if isinstance(node, Or):
        return Or(tuple(_resolve(part, declared, problems) for part in node.parts))
    if isinstance(node, Not):
        return Not(_resolve(node.part, declared, problems))
    if isinstance(node, Condition):
        kind = declared.get(node.key)
        if kind is None:
            known = ", ".join(sorted(declared)[:20]) or "none"
            problems.append((node.key, f"no document of this tenant declares this metadata key (declared: {known})"))
            return And(())
        try:
            return _typed(node, kind)
        except ValueError as exc:
            problems.append((node.key, str(exc)))
            return And(())
    return node  # already resolved


def _typed(condition: Condition, kind: MetadataType) -> Where:
    key, op = condition.key, condition.op
    if op == "!=":
        return Not(_typed(Condition(key, "=", condition.literals), kind))
    if op == "in":
        parts = [_typed(Condition(key, "=", (literal,)), kind) for literal in condition.literals]
        if all(isinstance(part, Match) for part in parts):
            return Match(key, kind, tuple(dict.fromkeys(v for part in parts if isinstance(part, Match) for v in part.values)))
        return parts[0] if len(parts) == 1 else Or(tuple(parts))
    [literal] = condition.literals
    if kind in (MetadataType.STRING, MetadataType.BOOL):
        if op != "=":
            raise ValueError(f"{op} needs a number or timestamp key; this key is a {kind.value} (use =, != or IN)")
        value = typed(kind, literal)
        return Match(key, kind, ("true" if value else "false",) if kind is MetadataType.BOOL else (str(value),))
    if kind is MetadataType.NUMBER:
        number = typed(kind, literal)
        assert isinstance(number, float)
        return _range(key, kind, op, number, None)
    start, end = timestamp_span(literal)
    return _range(key, kind, op, format_timestamp(start), format_timestamp(end) if end is not None else None)


def _range(key: str, kind: MetadataType, op: str, start: float | str, end: str | None) -> Range:
    """The range of `op start` where the literal names a point (`end` None) or the span [start, end)."""
    table: dict[str, dict[str, float | str]]
    if end is None:
        table = {"=": {"gte": start, "lte": start}, "<": {"lt": start}, "<=": {"lte": start},
                 ">": {"gt": start}, ">=": {"gte": start}}  # fmt: skip
    else:
        table = {"=": {"gte": start, "lt": end}, "<": {"lt": start}, "<=": {"lt": end},
                 ">": {"gte": end}, ">=": {"gte": start}}  # fmt: skip
    return Range(key, kind, **table[op])
