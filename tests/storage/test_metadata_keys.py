"""The declared metadata keys on both backends: a declaration never changes, and of declarations racing for one key
exactly one lands."""

from __future__ import annotations

import asyncio

from ragsvc.metadata import MetadataType
from ragsvc.storage.backend import Backend
from ragsvc.storage.metadata_keys import MetadataKeyStore


async def test_declarations_race_and_one_type_stays(database: Backend) -> None:
    store = MetadataKeyStore(database)
    kinds = list(MetadataType)
    await asyncio.gather(*(store.declare("acme", {"year": kind, f"own{i}": kind}) for i, kind in enumerate(kinds * 3)))
    declared = await store.declared("acme")
    assert declared["year"] in kinds and len(declared) == 1 + len(kinds) * 3
    await store.declare("acme", {"year": MetadataType.STRING if declared["year"] is not MetadataType.STRING
                                 else MetadataType.NUMBER})  # fmt: skip
    assert (await store.declared("acme"))["year"] is declared["year"], "a declaration never changes"
    assert await store.declared("globex") == {}
