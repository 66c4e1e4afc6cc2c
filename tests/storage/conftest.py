from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ragsvc.storage.database import Database


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database.open(tmp_path / "ragsvc.sqlite3")
    yield db
    db.close()
