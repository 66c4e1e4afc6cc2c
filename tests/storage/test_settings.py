from __future__ import annotations

from ragsvc.storage.backend import Backend
from ragsvc.storage.settings import RANKING_WEIGHTS, SettingStore


async def test_a_setting_is_stored_as_json_and_overwritten(database: Backend) -> None:
    store = SettingStore(database)
    assert await store.get(RANKING_WEIGHTS) is None
    await store.put(RANKING_WEIGHTS, {"similarity_weight": 0.6, "recency_weight": 0.3, "trust_weight": 0.1})
    await store.put("other", [1, "two", None])
    await store.put(RANKING_WEIGHTS, {"similarity_weight": 1.0, "recency_weight": 0.0, "trust_weight": 0.0})
    assert await store.get(RANKING_WEIGHTS) == {"similarity_weight": 1.0, "recency_weight": 0.0, "trust_weight": 0.0}
    assert await store.get("other") == [1, "two", None]
