"""The embedded engine's term table stays exact: after any sequence of document replacements and deletions its
counts match a count over the chunks stored, for every visibility, whenever a tenant's rows were first loaded,
and so does the table of a reopened engine."""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsvc.access import AccessPolicy
from ragsvc.domain import Chunk, RetrievalQuery, TermCounts
from ragsvc.reading.text import index_terms
from ragsvc.retrieval.base import IndexedChunk
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.layout import indexed_text
from ragsvc.retrieval.term_table import TermRow, TermTable

WORDS = ["refund", "invoice", "carrier", "parcel", "tariff", "ledger", "quota", "velvet"]
TAGS = ["hr", "finance", "ops"]
TENANTS = ["acme", "globex"]
DIMENSION = 4

chunk_texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=5).map(" ".join)
tag_sets = st.sets(st.sampled_from(TAGS), max_size=2).map(lambda tags: tuple(sorted(tags)))
replace = st.tuples(
    st.just("replace"), st.sampled_from(TENANTS), st.sampled_from(["d1", "d2", "d3"]),
    st.lists(st.tuples(chunk_texts, tag_sets), max_size=3),
)  # fmt: skip
delete = st.tuples(st.just("delete"), st.sampled_from(TENANTS), st.sampled_from(["d1", "d2", "d3"]), st.just([]))


def expected(stored: dict[tuple[str, str], list[Chunk]], query: RetrievalQuery, access: AccessPolicy) -> TermCounts:
    """The statistics counted over the stored chunks the query's caller sees."""
    seen = [
        set(index_terms(indexed_text(chunk)))
        for (tenant, _), chunks in stored.items()
        for chunk in chunks
        if tenant == query.tenant_id and ((access.untagged_visible and not chunk.tags) or set(chunk.tags) & set(query.user_tags))
    ]
    with_terms = [terms for terms in seen if terms]
    return TermCounts(len(with_terms), {word: sum(word in terms for terms in with_terms) for word in WORDS})


def queries(tenants: list[str]) -> list[RetrievalQuery]:
    return [RetrievalQuery("q", tenant, user_tags=tags) for tenant in tenants for tags in ((), ("hr",), ("finance", "ops"))]


async def check(
    engine: EdgeEngine, stored: dict[tuple[str, str], list[Chunk]], access: AccessPolicy, tenants: list[str] = TENANTS
) -> None:
    for query in queries(tenants):  # the first question of a tenant is counted by the engine, while it loads
        assert await engine.term_counts(query, WORDS) == expected(stored, query, access), query
    await asyncio.gather(*engine._loading.values())
    for query in queries(tenants):
        assert engine._terms.holds(query.tenant_id)
        assert await engine.term_counts(query, WORDS) == expected(stored, query, access), query


async def run(operations: list[tuple[str, str, str, list[tuple[str, tuple[str, ...]]]]], path: Path) -> None:
    access = AccessPolicy(untagged_visible=True)
    rng = random.Random(0)
    stored: dict[tuple[str, str], list[Chunk]] = {}
    engine = EdgeEngine.open(path, DIMENSION, access=access)
    try:
        for kind, tenant, document, chunks in operations:
            if kind == "delete":
                await engine.delete_document(tenant, document)
                stored.pop((tenant, document), None)
                continue
            made = [
                Chunk(tenant_id=tenant, document_id=document, chunk_index=i, text=text, document_name=document, tags=tags)
                for i, (text, tags) in enumerate(chunks)
            ]
            indexed = [IndexedChunk(c, [rng.random() + 0.1 for _ in range(DIMENSION)]) for c in made]
            await engine.replace_document(tenant, document, indexed)
            stored[(tenant, document)] = made
            if rng.random() < 0.5:  # a tenant's rows are loaded when first asked for: at any point of the writes
                await check(engine, stored, access, [tenant])
        await check(engine, stored, access)
    finally:
        await engine.close()
    reopened = EdgeEngine.open(path, DIMENSION, access=access)  # its table is read from the shard
    try:
        await check(reopened, stored, access)
    finally:
        await reopened.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(replace, delete), min_size=1, max_size=8))
def test_the_term_table_matches_a_count_over_the_stored_chunks(operations) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(run(operations, Path(directory) / "engine"))


def test_removing_what_was_added_leaves_nothing_and_only_loaded_tenants_are_kept() -> None:
    rows = [TermRow("acme", frozenset({"hr"}), frozenset({"refund", "tariff"})), TermRow("acme", frozenset(), frozenset())]
    table = TermTable()
    table.load("acme", rows)
    table.add([TermRow("globex", frozenset(), frozenset({"refund"}))])  # not loaded: its rows come with its load
    assert table.counts("acme", ["hr"], AccessPolicy(), ["refund"]) == TermCounts(1, {"refund": 1})
    assert not table.holds("globex")
    table.remove(rows)
    assert table.counts("acme", ["hr"], AccessPolicy(), ["refund"]) == TermCounts(0, {"refund": 0})
    assert table._tenants == {"acme": {}}, "no empty group is kept"


def test_a_tenant_being_loaded_is_not_held_until_every_row_is_counted() -> None:
    """Counts read in another thread while the rows load come from the engine, never from a half-filled table
    (a half-filled one gave the reader other term weights, so the same question scored differently)."""
    table = TermTable()
    seen_while_loading = []

    def rows() -> Iterator[TermRow]:
        for terms in ({"refund"}, {"refund", "tariff"}, {"tariff"}):
            seen_while_loading.append(table.holds("acme"))
            yield TermRow("acme", frozenset(), frozenset(terms))

    table.load("acme", rows())

    assert seen_while_loading == [False, False, False]
    assert table.counts("acme", [], AccessPolicy(), ["refund", "tariff"]) == TermCounts(3, {"refund": 2, "tariff": 2})
