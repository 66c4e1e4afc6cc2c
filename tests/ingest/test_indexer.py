from __future__ import annotations

import dataclasses
import hashlib

import pytest

from ragsvc.budget import COUNTED_ENCODING
from ragsvc.domain import MetadataFilter, RetrievalQuery, SourceDocument
from ragsvc.encodings import get_encoding
from ragsvc.errors import RetrievalUnavailable
from ragsvc.ingest.indexer import EMBED_BATCH, Indexer
from ragsvc.prompts import fenced
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.schema import MetadataSchema
from ragsvc.source_trust import SourceTrust
from ragsvc.storage.backend import Backend
from ragsvc.storage.metadata_keys import MetadataKeyStore

GUIDE = """# Backup guide

The storage cluster takes a snapshot backup every night at 2 am. Snapshots are kept for thirty days.

## Restoring

To restore a snapshot, open the console, pick the date and confirm. Restores of large volumes take an hour.
""" + "\n".join(f"Step {i}: verify checksum {i} of the restored volume before reopening it." for i in range(40))


def guide(**fields: object) -> SourceDocument:
    defaults: dict[str, object] = {
        "document_id": "backup-guide",
        "name": "backup-guide.md",
        "content": GUIDE.encode(),
        "media_type": "text/markdown",
        "tenant_id": "acme",
        "tags": ("ops",),
        "source_url": "https://wiki.example/backups",
        "title": "Backup guide",
        "trust": 0.9,
        "published_at": "2025-03-01",
    }
    return SourceDocument(**{**defaults, **fields})  # type: ignore[arg-type]


@pytest.fixture
def schema(engine: EdgeEngine, records: Backend) -> MetadataSchema:
    return MetadataSchema(MetadataKeyStore(records), engine)


@pytest.fixture
def indexer(embedder: MiniLMEmbedder, engine: EdgeEngine, schema: MetadataSchema) -> Indexer:
    return Indexer(embedder, engine, schema, sources=SourceTrust.default(), chunk_tokens=80, overlap_tokens=16)


async def test_ingesting_twice_gives_the_same_chunks(indexer: Indexer, engine: EdgeEngine) -> None:
    first = await indexer.ingest(guide())
    second = await indexer.ingest(guide(title="Backup guide, 2026"))

    assert first.error == "" and not first.unchanged
    assert first.chunks_created == first.chunks_indexed > 3
    assert (second.chunks_created, second.chunks_indexed) == (first.chunks_created, first.chunks_indexed)
    assert second.elapsed_ms > 0
    assert await engine.count("acme") == first.chunks_created


async def test_an_unchanged_document_is_skipped_and_recorded_with_its_source(
    indexer: Indexer, engine: EdgeEngine, embedder: MiniLMEmbedder, schema: MetadataSchema
) -> None:
    first = await indexer.ingest(guide())
    again = await indexer.ingest(guide())

    assert again.unchanged and (again.chunks_created, again.chunks_indexed, again.error) == (0, 0, "")
    stored = await engine.get_document("acme", "backup-guide")
    assert stored is not None and stored.chunks == first.chunks_indexed and stored.source is not None
    assert stored.source.content_sha256 == hashlib.sha256(GUIDE.encode()).hexdigest()
    assert (stored.source.content_bytes, stored.source.media_type) == (len(GUIDE.encode()), "text/markdown")
    assert stored.source.fingerprint == indexer.source(indexer.completed(guide())).fingerprint
    # Anything the chunks are made from counts as a change: the content, the metadata, the chunk settings.
    for changed in (
        guide(content=GUIDE.encode() + b"\nOne more line."),
        guide(tags=("ops", "sre")),
        guide(tags=("ops", "sre"), confidential=True),
        guide(tags=("ops", "sre"), confidential=True, metadata={"region": "eu"}),
    ):
        assert not (await indexer.ingest(changed)).unchanged
    other_settings = Indexer(embedder, engine, schema, sources=SourceTrust.default(), chunk_tokens=60, overlap_tokens=16)
    assert not (await other_settings.ingest(guide(tags=("ops", "sre"), confidential=True))).unchanged


async def test_chunks_carry_the_documents_metadata(indexer: Indexer, engine: EdgeEngine, embedder: MiniLMEmbedder) -> None:
    result = await indexer.ingest(guide())
    query = RetrievalQuery(
        "how do I restore a snapshot",
        tenant_id="acme",
        user_tags=("ops",),
        filters=MetadataFilter(section_headings=("Restoring",)),
    )

    found = await engine.query(query, await embedder.embed_query(query.text), 50)

    assert found
    chunk = found[0].chunk
    assert (chunk.document_id, chunk.document_name) == ("backup-guide", "backup-guide.md")
    assert chunk.page_title == "Backup guide"
    assert (chunk.tenant_id, chunk.tags, chunk.source_url) == ("acme", ("ops",), "https://wiki.example/backups")
    assert (chunk.section, chunk.trust, chunk.published_at) == ("Restoring", 0.9, "2025-03-01")
    assert "restore" in chunk.text
    assert sorted(c.chunk.chunk_index for c in found) == list(range(1, result.chunks_created))
    # Each chunk's text between its prompt fences, counted once at ingest in the encoding the budget reads.
    encoding = get_encoding(COUNTED_ENCODING)
    assert [c.chunk.token_count for c in found] == [len(encoding.encode(fenced(c.chunk.text))) for c in found]


async def test_reingesting_a_shorter_version_removes_the_rest(indexer: Indexer, engine: EdgeEngine) -> None:
    await indexer.ingest(guide())

    result = await indexer.ingest(guide(content=b"# Backup guide\nBackups run nightly."))

    assert result.chunks_created == 1
    assert await engine.count("acme") == 1


async def test_delete_removes_every_chunk(indexer: Indexer, engine: EdgeEngine) -> None:
    created = (await indexer.ingest(guide())).chunks_created
    await indexer.ingest(guide(document_id="other", content=b"Another document."))

    assert await indexer.delete("acme", "backup-guide") == created
    assert await indexer.delete("acme", "backup-guide") == 0
    assert await engine.count("acme") == 1


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"media_type": "application/vnd.ms-excel"}, "media_type"),
        ({"content": b"\x89PNG\r\n\x1a\n\x00\x00", "media_type": "text/plain"}, "looks like a PNG image"),
        ({"content": b"   \n\n"}, "no text"),
    ],
)
async def test_an_unreadable_document_is_a_per_document_error(
    indexer: Indexer, engine: EdgeEngine, fields: dict[str, object], error: str
) -> None:
    result = await indexer.ingest(guide(**fields))

    assert error in result.error
    assert (result.document_id, result.chunks_created, result.chunks_indexed) == ("backup-guide", 0, 0)
    assert await engine.count() == 0


async def test_engine_failures_propagate(indexer: Indexer, engine: EdgeEngine) -> None:
    await engine.close()

    with pytest.raises(RetrievalUnavailable):
        await indexer.ingest(guide())


def test_the_overlap_must_be_smaller_than_the_chunk(embedder: MiniLMEmbedder, engine: EdgeEngine, schema: MetadataSchema) -> None:
    with pytest.raises(ValueError, match="need chunk_tokens > overlap_tokens >= 0"):
        Indexer(embedder, engine, schema, sources=SourceTrust.default(), chunk_tokens=50, overlap_tokens=50)


async def test_many_documents_at_once_are_indexed_as_one_by_one(
    indexer: Indexer, engine: EdgeEngine, embedder: MiniLMEmbedder
) -> None:
    """Ingested together, the chunks of several documents share the embedder's batches (EMBED_BATCH, across
    documents) while the next documents are read: each document ends up as when ingested alone, with its own
    result in the documents' order, a bad one reported without failing the others."""
    copies = [guide(document_id=f"guide-{i}", content=GUIDE.encode() + f"\nCopy {i}.".encode()) for i in range(6)]
    bad = guide(document_id="sheet", media_type="application/vnd.ms-excel")
    documents = [copies[0], bad, *copies[1:], guide(document_id="short", content=b"# Note\nBackups run nightly.")]
    assert sum(len(indexer.chunks(d)[0]) for d in (*copies, documents[-1])) > EMBED_BATCH  # spans batches

    together = await indexer.ingest_many(documents)
    alone = [await indexer.ingest(dataclasses.replace(d, tenant_id="solo")) for d in documents]

    assert [r.document_id for r in together] == [d.document_id for d in documents]
    assert [(r.chunks_created, r.chunks_indexed, r.unchanged) for r in together] == [
        (r.chunks_created, r.chunks_indexed, r.unchanged) for r in alone
    ]
    assert "media_type" in together[1].error and not any(r.error for r in together[:1] + together[2:])
    assert await engine.count("acme") == await engine.count("solo") == sum(r.chunks_indexed for r in together)
    question = "how long does restoring a large volume take"
    dense = await embedder.embed_query(question)
    scores = {}
    for tenant in ("acme", "solo"):  # every chunk (the copies' chunks tie: compared by id, not by rank)
        found = await engine.query(RetrievalQuery(question, tenant_id=tenant, user_tags=("ops",)), dense, 500)
        scores[tenant] = {(c.chunk.document_id, c.chunk.chunk_index): c.score for c in found}
    assert len(scores["acme"]) == await engine.count("acme")
    assert scores["acme"] == pytest.approx(scores["solo"], abs=1e-4)

    again = await indexer.ingest_many(documents)
    assert [r.unchanged for r in again] == [True, False, *[True] * 6]
    assert await engine.count("acme") == sum(r.chunks_indexed for r in together)


async def test_documents_of_one_id_twice_in_one_call_are_refused(indexer: Indexer) -> None:
    with pytest.raises(ValueError, match="distinct"):
        await indexer.ingest_many([guide(), guide(title="again")])
