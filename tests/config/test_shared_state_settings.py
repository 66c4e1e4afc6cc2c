"""The settings of shared state: where the records live (SQLite or PostgreSQL) and Redis; URLs are secrets
(they carry passwords), so a refusal never quotes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsvc.config import Settings
from ragsvc.errors import InvalidRequest

PG_URL = "postgresql://ragsvc:pa55word@db:5432/ragsvc"


def test_the_records_are_in_sqlite_unless_a_postgresql_url_is_set(tmp_path: Path) -> None:
    records = Settings.of().records
    assert records.database_location(tmp_path) == tmp_path / "ragsvc.sqlite3"
    assert Settings.of(database_path="/srv/records.db").records.database_location(tmp_path) == "/srv/records.db"
    assert Settings.from_env({"RAG_DATABASE_URL": PG_URL}).records.database_location(tmp_path) == PG_URL
    assert "pa55word" not in repr(Settings.from_env({"RAG_DATABASE_URL": PG_URL}))


@pytest.mark.parametrize(
    ("environ", "refused"),
    [
        ({"RAG_DATABASE_URL": "mysql://ragsvc:pa55word@db/ragsvc"}, ["RAG_DATABASE_URL"]),
        ({"RAG_DATABASE_URL": PG_URL, "RAG_DB_PATH": "/srv/records.db"}, ["RAG_DB_PATH"]),
        ({"RAG_DATABASE_POOL_MIN_SIZE": "20", "RAG_DATABASE_POOL_MAX_SIZE": "10"}, ["RAG_DATABASE_POOL_MIN_SIZE"]),
        ({"RAG_DATABASE_POOL_MAX_SIZE": "0"}, ["RAG_DATABASE_POOL_MAX_SIZE"]),
        ({"RAG_AUDIT_RETENTION_DAYS": "-1"}, ["RAG_AUDIT_RETENTION_DAYS"]),
        ({"RAG_RETENTION_INTERVAL_SECONDS": "0"}, ["RAG_RETENTION_INTERVAL_SECONDS"]),
        ({"RAG_REDIS_URL": "http://:pa55word@cache:6379"}, ["RAG_REDIS_URL"]),
        ({"RAG_REDIS_TIMEOUT_SECONDS": "0"}, ["RAG_REDIS_TIMEOUT_SECONDS"]),
        ({"RAG_CHANGES_POLL_SECONDS": "0"}, ["RAG_CHANGES_POLL_SECONDS"]),
    ],
)
def test_bad_values_are_refused_and_urls_never_quoted(environ: dict[str, str], refused: list[str]) -> None:
    with pytest.raises(InvalidRequest) as caught:
        Settings.from_env(environ)
    assert [v.field for v in caught.value.violations] == refused
    assert "pa55word" not in str(caught.value)


def test_redis_urls_of_every_kind_are_accepted() -> None:
    for url in ("redis://cache:6379/0", "rediss://:pa55word@cache:6380/1", "unix:///run/redis.sock"):
        assert Settings.from_env({"RAG_REDIS_URL": url}).shared.redis_url.get_secret_value() == url
