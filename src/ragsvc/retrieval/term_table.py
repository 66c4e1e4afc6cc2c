"""Document frequencies of the index terms, per tenant, kept exact on every write: the answerability gate's corpus
statistics become dictionary lookups instead of an engine count per question term.

A tenant's chunks are grouped by their set of tags, since visibility is decided by tags: a caller sees the
untagged group when the access policy shows untagged chunks, and every group sharing a tag with it. What a
caller sees is then a sum over its visible groups. A tenant's rows are loaded the first time its statistics are
asked for; from then on the engine keeps them in step with the shard: a write removes the written document's
chunks as they were, and adds them as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ragsvc.access import AccessPolicy
from ragsvc.domain import TermCounts


@dataclass(frozen=True, slots=True)
class TermRow:
    """What the table needs of one stored chunk: its tenant, its tags and its distinct index terms."""

    tenant_id: str
    tags: frozenset[str]
    terms: frozenset[str]


@dataclass(slots=True)
class _Group:
    chunks: int = 0  # chunks with at least one index term
    frequencies: Counter[str] = field(default_factory=Counter)


class TermTable:
    def __init__(self) -> None:
        self._tenants: dict[str, dict[frozenset[str], _Group]] = {}

    def holds(self, tenant_id: str) -> bool:
        """Whether the tenant's rows are loaded (only a loaded tenant's rows are kept in step)."""
        return tenant_id in self._tenants

    def load(self, tenant_id: str, rows: Iterable[TermRow]) -> None:
        """Hold the tenant, with `rows`, every stored chunk of it. The tenant's groups are built aside and published
        in one assignment: a reader in another thread sees the tenant either not held (and counts in the engine)
        or held with every row, never half loaded."""
        groups: dict[frozenset[str], _Group] = {}
        for row in rows:
            if row.tenant_id == tenant_id:
                _change(groups, row, 1)
        self._tenants[tenant_id] = groups

    def add(self, rows: Iterable[TermRow]) -> None:
        for row in rows:
            self._change(row, 1)

    def remove(self, rows: Iterable[TermRow]) -> None:
        for row in rows:
            self._change(row, -1)

    def counts(self, tenant_id: str, user_tags: Iterable[str], access: AccessPolicy, terms: Sequence[str]) -> TermCounts:
        """The statistics of `terms` over the chunks of `tenant_id` a caller with `user_tags` sees under `access`."""
        tags = frozenset(user_tags)
        visible = [group for group_tags, group in self._tenants.get(tenant_id, {}).items() if access.sees(group_tags, tags)]
        return TermCounts(
            sum(group.chunks for group in visible),
            {term: sum(group.frequencies[term] for group in visible) for term in terms},
        )

    def _change(self, row: TermRow, sign: int) -> None:
        groups = self._tenants.get(row.tenant_id)
        if groups is not None:
            _change(groups, row, sign)


def _change(groups: dict[frozenset[str], _Group], row: TermRow, sign: int) -> None:
    """Count `row` into (sign 1) or out of (sign -1) its tag group of `groups`."""
    if not row.terms:
        return
    group = groups.setdefault(row.tags, _Group())
    group.chunks += sign
    group.frequencies.update(dict.fromkeys(row.terms, sign))
    if sign < 0:
        for term in row.terms:
            if not group.frequencies[term]:
                del group.frequencies[term]
        if not group.chunks:
            del groups[row.tags]
