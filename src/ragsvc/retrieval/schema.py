"""Each tenant's metadata keys and their types: declared at ingest, checked by every filter expression.

The first document of a tenant to carry a key fixes its type, in the records database (`MetadataKeyStore`:
SQLite, or PostgreSQL shared by every replica); a later document giving the key another type is refused. The
engine gets the key's payload index when it is first declared through this process. A filter expression is
resolved against the declared keys (`ragsvc.filters.resolve`): a key the tenant never declared, or a literal its
type cannot read, is INVALID_ARGUMENT naming it, never a filter that silently matches nothing.

Declarations never change, so what this process read of them stays true: a key it does not know yet is looked up
again (another replica may have declared it) before it is refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping

from ragsvc.domain import MetadataFilter
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.filters import FilterError, keys_of, parse, resolve
from ragsvc.metadata import MetadataType
from ragsvc.retrieval.base import VectorEngine
from ragsvc.storage.metadata_keys import MetadataKeyStore

__all__ = ["EXPRESSION_FIELD", "MetadataSchema"]

EXPRESSION_FIELD = "retrieval.filter.expression"  # the request field a filter expression comes in


class MetadataSchema:
    def __init__(self, store: MetadataKeyStore, engine: VectorEngine) -> None:
        self._store = store
        self._engine = engine
        self._known: dict[str, dict[str, MetadataType]] = {}  # by tenant, as last read
        self._indexed: set[tuple[str, MetadataType]] = set()  # payload indexes made sure of by this process
        self._lock = asyncio.Lock()

    async def declared(self, tenant_id: str) -> dict[str, MetadataType]:
        """Every key the tenant declared, with its type (read again from the database)."""
        known = await self._store.declared(tenant_id)
        self._known[tenant_id] = known
        return dict(known)

    async def declare(self, tenant_id: str, keys: Mapping[str, MetadataType]) -> dict[str, MetadataType]:
        """Declare the keys the tenant has not declared yet, and make sure of the payload index of each; returns
        the keys the tenant declared before with another type (with that type), which the caller refuses: then
        nothing is declared."""
        async with self._lock:  # one declaration at a time: the first of two equal ones finds the second's work done
            known = self._known.get(tenant_id, {})
            if not keys.keys() <= known.keys():
                known = await self.declared(tenant_id)  # another replica may have declared them
            new = {key: kind for key, kind in keys.items() if key not in known}
            if new and not _conflicts(keys, known):
                await self._store.declare(tenant_id, new)
                known = await self.declared(tenant_id)  # a replica declaring one of them meanwhile won
            if conflicts := _conflicts(keys, known):
                return conflicts
            for key, kind in sorted(keys.items(), key=lambda item: item[0]):
                if (key, kind) not in self._indexed:
                    await self._engine.ensure_metadata_index(key, kind)
                    self._indexed.add((key, kind))
        return {}

    async def resolve(self, tenant_id: str, filters: MetadataFilter) -> MetadataFilter:
        """`filters` with its expression resolved against the tenant's keys (unchanged when it has none).
        InvalidRequest naming `retrieval.filter.expression`: the expression cannot be parsed, names a key the
        tenant never declared, or compares a key with what its type cannot be."""
        if not filters.expression:
            return filters
        try:
            tree = parse(filters.expression)
            known = self._known.get(tenant_id, {})
            if not keys_of(tree) <= known.keys():
                known = await self.declared(tenant_id)
            where = resolve(tree, known)
        except FilterError as exc:
            raise InvalidRequest(
                [FieldViolation(EXPRESSION_FIELD, f"{what}: {why}" if what else why) for what, why in exc.problems]
            ) from None
        return dataclasses.replace(filters, where=where)


def _conflicts(keys: Mapping[str, MetadataType], known: Mapping[str, MetadataType]) -> dict[str, MetadataType]:
    """The keys `known` holds with another type, with that type."""
    return {key: known[key] for key, kind in keys.items() if key in known and known[key] is not kind}
