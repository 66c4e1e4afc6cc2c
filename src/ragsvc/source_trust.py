"""Source types and their trust weights (R-003-08's source trust scores), the `trust` part of the ranking.

Each document has a source type (its `source_type` metadata key); the type's weight, 0 to 1, is the document's
trust unless the document sets `trust` itself. A document that names no type gets the server's default type,
`user_upload` unless configured otherwise (RAG_DEFAULT_SOURCE_TYPE), so an upload does not count as fully
trusted by default. The table is RAG_SOURCE_TRUST: `type=weight,...`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["DEFAULT_SOURCE_TRUST", "DEFAULT_SOURCE_TYPE", "SourceTrust", "parse_weights"]

# R-003-08's scores (Supreme Court 1.0, High Court 0.9, Acts/Statutes 1.0, secondary sources 0.7, user uploads
# 0.5), plus `official` for a publisher's own documents.
DEFAULT_SOURCE_TRUST = "official=1.0,supreme_court=1.0,high_court=0.9,statute=1.0,secondary=0.7,user_upload=0.5"
DEFAULT_SOURCE_TYPE = "user_upload"
_NAME = re.compile(r"[a-z0-9_]{1,64}")


class SourceTrust:
    """The trust weight of each source type, and the type of a document that names none."""

    def __init__(self, weights: Mapping[str, float], default_type: str = DEFAULT_SOURCE_TYPE) -> None:
        if default_type not in weights:
            raise ValueError(f"the default source type {default_type!r} is not in the table ({', '.join(weights)})")
        self._weights = dict(weights)
        self.default_type = default_type

    @classmethod
    def parse(cls, spec: str, default_type: str = DEFAULT_SOURCE_TYPE) -> SourceTrust:
        """The table `spec` (see `parse_weights`) with `default_type`; ValueError saying what is wrong."""
        return cls(parse_weights(spec), default_type)

    @classmethod
    def default(cls) -> SourceTrust:
        return cls.parse(DEFAULT_SOURCE_TRUST)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SourceTrust) and (other._weights, other.default_type) == (self._weights, self.default_type)

    def __hash__(self) -> int:
        return hash((frozenset(self._weights.items()), self.default_type))

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(self._weights)

    def weight(self, source_type: str) -> float:
        """The weight of `source_type` (KeyError when the table has no such type)."""
        return self._weights[source_type]


def parse_weights(spec: str) -> dict[str, float]:
    """`type=weight,...` (types in lower case letters, digits and _; weights 0 to 1) as a table; ValueError naming the
    first bad entry."""
    weights: dict[str, float] = {}
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        name, _, weight = entry.partition("=")
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if not _NAME.fullmatch(name.strip()) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{entry!r} is not type=weight (a type of a-z, 0-9 and _; a weight from 0 to 1)")
        weights[name.strip()] = value
    if not weights:
        raise ValueError("lists no source type")
    return weights
