"""Settings changed at run time (AdminService) and kept in the service's database: a JSON value per name.

A stored value overrides the environment's at the next start, so that a change made through the admin API
survives restarts; today that is the ranking weights (`ranking_weights`).
"""

from __future__ import annotations

import json
from typing import Any

from ragsvc.storage.backend import Backend, utc_now

RANKING_WEIGHTS = "ranking_weights"


class SettingStore:
    def __init__(self, database: Backend) -> None:
        self._db = database

    async def get(self, name: str) -> Any | None:
        """The stored value of `name` (decoded JSON), None when none is stored."""
        rows = await self._db.fetch_all("SELECT value FROM settings WHERE name = ?", (name,))
        return json.loads(rows[0]["value"]) if rows else None

    async def put(self, name: str, value: Any) -> None:
        await self._db.execute(
            "INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (name, json.dumps(value), utc_now()),
        )
