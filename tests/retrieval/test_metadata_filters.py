"""Metadata filter expressions inside both engines, as a property: random expressions over documents with random
metadata select exactly the documents a reference evaluation of the expression selects (written here from the
language's definition, not from the resolver's tree), on qdrant-edge and on the Qdrant server engine (qdrant-client's
local mode), with the payload indexes of the keys created."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsvc.domain import Chunk, MetadataFilter, RetrievalQuery
from ragsvc.filters import parse, resolve
from ragsvc.metadata import MetadataType, MetadataValue, format_timestamp
from ragsvc.retrieval.base import IndexedChunk, VectorEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from tests.retrieval.conftest import ENGINE_KINDS, EngineKind

S, N, B, T = MetadataType.STRING, MetadataType.NUMBER, MetadataType.BOOL, MetadataType.TIMESTAMP
KEYS = {"genre": S, "year": N, "open": B, "published_at": T}
GENRES = ("act", "judgment", "memo", "Sri Lanka")
YEARS = (1872.0, 1950.0, 2000.0, 2024.5, -3.0)
DAYS = [datetime(2024, 1, 30, tzinfo=UTC) + timedelta(days=d) for d in range(3)]
DOCUMENTS = 14
TEXT = "The travel desk books flights for employees."


def documents() -> dict[str, dict[str, MetadataValue]]:
    """Each document's metadata: every key present three times in four, values from small pools (so that equal
    values and missing keys both occur)."""
    pick = random.Random(28)
    corpus = {}
    for n in range(DOCUMENTS):
        values: dict[str, MetadataValue] = {
            "genre": pick.choice(GENRES),
            "year": pick.choice(YEARS),
            "open": pick.random() < 0.5,
            "published_at": pick.choice(DAYS) + timedelta(hours=pick.choice((0, 9, 23))),
        }
        corpus[f"doc-{n:02d}"] = {k: v for k, v in values.items() if pick.random() < 0.75}
    return corpus


CORPUS = documents()


@dataclass(frozen=True)
class Leaf:
    key: str
    op: str  # = != < <= > >= in
    values: tuple[object, ...]

    def text(self) -> str:
        written = [_literal(v) for v in self.values]
        return f"{self.key} IN ({', '.join(written)})" if self.op == "in" else f"{self.key} {self.op} {written[0]}"

    def holds(self, metadata: dict[str, MetadataValue]) -> bool:
        if self.key not in metadata:
            return self.op == "!="  # != is NOT =, which a document without the key satisfies
        value = metadata[self.key]
        if self.op == "in":
            return any(Leaf(self.key, "=", (v,)).holds(metadata) for v in self.values)
        if self.op == "!=":
            return not Leaf(self.key, "=", self.values).holds(metadata)
        literal = self.values[0]
        if isinstance(literal, str) and KEYS[self.key] is T:  # a date: its whole day
            start = datetime.fromisoformat(literal).replace(tzinfo=UTC)
            end = start + timedelta(days=1)
            assert isinstance(value, datetime)
            return {"=": start <= value < end, ">=": value >= start, ">": value >= end,
                    "<=": value < end, "<": value < start}[self.op]  # fmt: skip
        return {"=": value == literal, "<": value < literal, "<=": value <= literal,  # type: ignore[operator]
                ">": value > literal, ">=": value >= literal}[self.op]  # type: ignore[operator]  # fmt: skip


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, float):
        return repr(value)
    return f'"{value}"' if " " in str(value) or not str(value).isalnum() else str(value)


@dataclass(frozen=True)
class Tree:
    op: str  # AND, OR, NOT
    parts: tuple[Tree | Leaf, ...]

    def text(self) -> str:
        inner = [f"({p.text()})" for p in self.parts]
        return f"NOT {inner[0]}" if self.op == "NOT" else f" {self.op} ".join(inner)

    def holds(self, metadata: dict[str, MetadataValue]) -> bool:
        results = [p.holds(metadata) for p in self.parts]
        return {"AND": all, "OR": any}[self.op](results) if self.op != "NOT" else not results[0]


instants = st.sampled_from(DAYS).flatmap(lambda day: st.sampled_from([day + timedelta(hours=h) for h in (0, 9, 23)]))
dates = st.sampled_from(DAYS).map(lambda day: day.date().isoformat())
leaves = st.one_of(
    st.builds(Leaf, st.just("genre"), st.sampled_from(["=", "!="]), st.tuples(st.sampled_from(GENRES))),
    st.builds(Leaf, st.just("genre"), st.just("in"), st.lists(st.sampled_from(GENRES), min_size=1, max_size=3).map(tuple)),
    st.builds(Leaf, st.just("year"), st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), st.tuples(st.sampled_from(YEARS))),
    st.builds(Leaf, st.just("year"), st.just("in"), st.lists(st.sampled_from(YEARS), min_size=1, max_size=3).map(tuple)),
    st.builds(Leaf, st.just("open"), st.sampled_from(["=", "!="]), st.tuples(st.booleans())),
    st.builds(Leaf, st.just("published_at"), st.sampled_from(["=", "<", "<=", ">", ">="]), st.tuples(dates | instants)),
)
trees = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.builds(Tree, st.sampled_from(["AND", "OR"]), st.lists(children, min_size=2, max_size=3).map(tuple)),
        st.builds(Tree, st.just("NOT"), st.tuples(children)),
    ),
    max_leaves=6,
)


@pytest.fixture(params=ENGINE_KINDS, ids=lambda kind: kind.name)
async def filled(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: MiniLMEmbedder
) -> AsyncIterator[tuple[VectorEngine, list[float]]]:
    kind: EngineKind = request.param
    engine = await kind.open(tmp_path / "engine")
    for key, type_ in KEYS.items():
        await engine.ensure_metadata_index(key, type_)
    [vector] = await embedder.embed_documents([TEXT])
    for document_id, metadata in CORPUS.items():
        chunk = Chunk(document_id, 0, TEXT, tenant_id="acme")
        await engine.replace_document("acme", document_id, [IndexedChunk(chunk, vector, metadata=metadata)])
    yield engine, await embedder.embed_query("Who books flights?")
    await engine.close()


def test_the_documents_exercise_every_kind_of_match() -> None:
    assert len({tuple(sorted(m)) for m in CORPUS.values()}) > 3, "documents lack different keys"
    assert {type(v) for m in CORPUS.values() for v in m.values()} == {str, float, bool, datetime}


async def test_engines_select_exactly_what_the_expression_means(filled: tuple[VectorEngine, list[float]]) -> None:
    """The expressions are drawn first (hypothesis runs synchronously), then each is queried."""
    engine, dense = filled
    cases: list[tuple[str, RetrievalQuery, set[str]]] = []

    @settings(max_examples=80, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
    @given(tree=trees)
    def draw(tree: Tree | Leaf) -> None:
        text = tree.text()
        where = resolve(parse(text), KEYS)
        query = RetrievalQuery("Who books flights?", tenant_id="acme", filters=MetadataFilter(expression=text, where=where))
        cases.append((text, query, {doc for doc, metadata in CORPUS.items() if tree.holds(metadata)}))

    draw()
    seen = {"some": 0, "none": 0, "all": 0}
    for text, query, expected in cases:
        got = {c.chunk.document_id for c in await engine.query(query, dense, 50)}
        assert got == expected, text
        seen["none" if not got else "all" if len(got) == DOCUMENTS else "some"] += 1
    assert seen["some"] > 20 and seen["none"] and seen["all"], seen
