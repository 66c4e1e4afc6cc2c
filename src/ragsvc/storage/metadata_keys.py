"""The metadata keys of each tenant and their types, as documents declared them at ingest.

A key is declared once per tenant: the first declaration stays (INSERT ... ON CONFLICT DO NOTHING, so of two
replicas declaring one key at once, the one whose row lands first wins, and the other reads its type back).
Declarations are never changed or removed, so a replica may keep what it read.
"""

from __future__ import annotations

from collections.abc import Mapping

from ragsvc.metadata import MetadataType
from ragsvc.storage.backend import Backend, utc_now

__all__ = ["MetadataKeyStore"]


class MetadataKeyStore:
    def __init__(self, database: Backend) -> None:
        self._db = database

    async def declared(self, tenant_id: str) -> dict[str, MetadataType]:
        """Every key the tenant declared, with its type."""
        rows = await self._db.fetch_all("SELECT name, type FROM metadata_keys WHERE tenant_id = ?", (tenant_id,))
        return {row["name"]: MetadataType(row["type"]) for row in rows}

    async def declare(self, tenant_id: str, keys: Mapping[str, MetadataType]) -> None:
        """Record the keys the tenant has not declared yet; a key declared before keeps its type."""
        now = utc_now()
        await self._db.execute_many(
            "INSERT INTO metadata_keys (tenant_id, name, type, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, name) DO NOTHING",
            [(tenant_id, name, kind.value, now) for name, kind in sorted(keys.items())],
        )
