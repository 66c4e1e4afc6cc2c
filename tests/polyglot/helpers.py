"""What the polyglot tests share."""

from __future__ import annotations

import os

import pytest


def require_tools(missing: str | None) -> None:
    """Skip a test whose tools are not installed, unless POLYGLOT_REQUIRED (set by `make test`) says fail."""
    if missing is None:
        return
    if os.environ.get("POLYGLOT_REQUIRED"):
        pytest.fail(missing)
    pytest.skip(missing)
