"""Each tenant's metadata keys, declared at ingest in the records database (both kinds), as two replicas sharing it
see them: the first type given wins, a replica resolves a key another one declared, and an undeclared key or a bad
expression is an InvalidRequest naming `retrieval.filter.expression`. The embedded engine gets each key's payload
index (read back from the shard's own schema)."""

from __future__ import annotations

from pathlib import Path

import pytest
import qdrant_edge as qe

from ragsvc.domain import MetadataFilter
from ragsvc.errors import InvalidRequest
from ragsvc.filters import Range
from ragsvc.metadata import MetadataType
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.schema import EXPRESSION_FIELD, MetadataSchema
from ragsvc.storage.backend import Backend
from ragsvc.storage.metadata_keys import MetadataKeyStore

S, N, B, T = MetadataType.STRING, MetadataType.NUMBER, MetadataType.BOOL, MetadataType.TIMESTAMP


async def test_the_first_declaration_of_a_key_wins_on_every_replica(database: Backend, tmp_path: Path) -> None:
    engine = EdgeEngine.open(tmp_path / "shard")
    try:
        first, second = (MetadataSchema(MetadataKeyStore(database), engine) for _ in range(2))
        assert await first.declare("acme", {"year": N, "court": S}) == {}
        assert await second.declare("acme", {"year": S, "open": B}) == {"year": N}, "the other replica's type stays"
        assert await second.declare("acme", {"open": B}) == {}
        assert await second.declare("globex", {"year": S}) == {}, "tenants declare keys of their own"
        assert await first.declared("acme") == {"year": N, "court": S, "open": B}
        assert await MetadataKeyStore(database).declared("globex") == {"year": S}

        # The first replica never saw `open` declared: it reads the keys again before refusing one.
        resolved = await first.resolve("acme", MetadataFilter(expression="open = true AND year > 1900"))
        assert resolved.where is not None and resolved.expression == "open = true AND year > 1900"
        assert (await first.resolve("acme", MetadataFilter(expression="year >= 2"))).where == Range("year", N, gte=2.0)
        assert await first.resolve("acme", MetadataFilter()) == MetadataFilter(), "no expression, nothing to resolve"
    finally:
        await engine.close()


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("yaer > 1900", "yaer: no document of this tenant declares this metadata key (declared: court, year)"),
        ("court > x", "court: > needs a number or timestamp key; this key is a string (use =, != or IN)"),
        ("year >", "expected a value, found the end at character 7"),
    ],
)
async def test_filters_that_cannot_be_applied_are_invalid_requests_naming_the_field(
    records: Backend, engine: EdgeEngine, expression: str, why: str
) -> None:
    schema = MetadataSchema(MetadataKeyStore(records), engine)
    await schema.declare("acme", {"year": N, "court": S})
    with pytest.raises(InvalidRequest) as caught:
        await schema.resolve("acme", MetadataFilter(expression=expression))
    assert [(v.field, v.description) for v in caught.value.violations] == [(EXPRESSION_FIELD, why)]


async def test_declared_keys_get_their_payload_index_in_the_embedded_engine(records: Backend, tmp_path: Path) -> None:
    engine = EdgeEngine.open(tmp_path / "shard")
    schema = MetadataSchema(MetadataKeyStore(records), engine)
    await schema.declare("acme", {"court": S, "year": N, "open": B, "published_at": T})
    assert await schema.declare("acme", {"year": S}) == {"year": N}  # a refused type gets no index
    await engine.close()
    shard = qe.EdgeShard.load(str(tmp_path / "shard"))
    try:
        indexes = {name: info.data_type for name, info in shard.info().payload_schema.items() if name.startswith("meta.")}
    finally:
        shard.close()
    assert indexes == {
        "meta.s.court": qe.PayloadSchemaType.Keyword,
        "meta.n.year": qe.PayloadSchemaType.Float,
        "meta.b.open": qe.PayloadSchemaType.Keyword,  # booleans are stored as keywords (see layout)
        "meta.t.published_at": qe.PayloadSchemaType.Datetime,
    }


async def test_a_refused_document_declares_none_of_its_keys(records: Backend, engine: EdgeEngine) -> None:
    schema = MetadataSchema(MetadataKeyStore(records), engine)
    await schema.declare("acme", {"year": N})
    assert await schema.declare("acme", {"year": S, "code": S}) == {"year": N}
    assert await schema.declared("acme") == {"year": N}, "code came with a refused document"
