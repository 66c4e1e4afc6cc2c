"""The answer cache (R-003-05) and the idempotent replays: one interface, `AnswerStore`, with two implementations:
`MemoryAnswerCache` here (an LRU with a TTL, per process: the default) and `ragsvc.shared.cache.RedisAnswerCache`
(shared by replicas, when RAG_REDIS_URL is set). Both are keyed by everything that shapes an answer.

The key is the SHA-256 of what writes the server's answers (the reader's fingerprint, `Reader.fingerprint`: RAG_READER
and, for the trained reader, its model's sha256 and its settings; and `Settings.answer_fingerprint`, the retrieval,
generation, budget and trust settings), the tenant, the normalised query (control characters stripped, whitespace
collapsed, case folded), the template, top_k, the citation style, the tags (sorted), the metadata filters (the
expression as resolved), the model, the mode and selection, and the remaining knobs that change an answer (score
threshold, strictness, temperature, seed, search mode, response style, citation policy). Tenant and tags are part
of the key, so an answer is never served to another tenant or tag set; the reader and the settings are, so that
replicas sharing the Redis cache with another reader, model or settings (a rolling upgrade, a new CITE level) never
serve each other's answers, nor a server restarted with other settings the answers written before.

What is cached: grounded answers, CITEd or ROUTEd (the action is kept with the answer: a cached ROUTE is routed
again). The trained reader CITEs only from a P(right) chosen for 95% precision, which most answers do not clear;
keeping ROUTEd answers out left the cache empty under the defaults. Refusals are not cached: the gate refusals
(NO_CHUNKS, SCORE_GATE) cost no LLM call, so caching them saves little, and the others (UNSUPPORTED_ANSWER,
INVALID_CITATIONS) come from one unlucky generation that a new call may well get right. Questions with chat
history or a session, dry runs and explain requests bypass the cache.

Idempotency (R-003-03, with Stripe's and AIP-155's semantics): an answer recorded for an idempotency key is bound
to the caller that sent it (`Question.caller`: its key, or its peer without authentication) in its tenant, and
to the fingerprint of its request (`request_fingerprint`: every field that changes the answer, the effective tags
included, never the request id). The same key from the same caller with the same request replays the answer,
whatever it was and whichever reader now serves (the reader is in neither the replay key nor the fingerprint),
until the replay store's TTL; from another caller it is another key (its own fresh answer, recorded for it); from
the same caller with another request it is refused (`IdempotencyKeyReused`).

Invalidation: any ingest or delete in a tenant drops that tenant's entries (`invalidate_tenant`), a template
change drops the entries written from it (`invalidate_template`), a change of the ranking weights drops every
entry (`clear`). A per-tenant generation counter keeps an answer that was being computed while the tenant
changed from being stored afterwards.

Erasure: each entry remembers the caller whose request wrote it (`Question.caller`), and `erase_caller` drops every
entry a caller wrote (in one tenant, or in all), for AdminService.EraseCaller. An entry another caller was served
from (a cache hit) stays its writer's: a hit stores nothing.

Keys are strings the stores never look into: who may read an entry back is decided where its key is made
(`cache_key`: tenant and effective tags, so callers that read the same evidence share entries; `replay_key`: the
caller). Each entry keeps the fingerprint of the request that wrote it, which the service compares on a replay.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ragsvc.domain import Answer, Question, RefusalReason
from ragsvc.sanitize import clean_text


@dataclass(frozen=True, slots=True)
class Recorded:
    """A stored answer and the fingerprint of the request that it answered."""

    answer: Answer
    fingerprint: str


@dataclass(frozen=True, slots=True)
class _Entry:
    recorded: Recorded
    tenant_id: str
    caller: str  # whose request wrote it
    templates: frozenset[str]  # the template id the request named and the version the answer was written from
    expires_at: float


def normalise_query(query: str) -> str:
    return clean_text(query).casefold()


def cache_key(question: Question, fingerprint: str) -> str:
    """The cache key of a validated question (tenant resolved, text cleaned), answered by a server whose reader and
    settings have `fingerprint` (`Reader.fingerprint` and `Settings.answer_fingerprint`)."""
    return _digest([fingerprint, question.tenant_id, *_answer_shaping(question)])


def request_fingerprint(question: Question) -> str:
    """What a request asks, canonically: every field that changes its answer (the effective tags, history,
    session and explain/dry-run included); not its request id, idempotency key, tenant or caller, nor the reader:
    a replay returns the answer recorded whichever reader now serves (AIP-155), and is refused only for another
    request."""
    history = [[message.role.value, message.content] for message in question.chat_history]
    extra = [history, question.session_id, question.dry_run, question.explain, question.follow_up_count]
    return _digest([*_answer_shaping(question), *extra])


def _answer_shaping(question: Question) -> list[object]:
    """The fields of a question that shape a cacheable answer (the tenant aside)."""
    filters = question.filters
    return [
        normalise_query(question.query),
        question.template_id,
        question.top_k,
        question.citation_style.value,
        sorted(set(question.user_tags)),
        [
            sorted(filters.source_urls),
            sorted(filters.page_titles),
            sorted(filters.section_headings),
            repr(filters.where) if filters.where is not None else filters.expression,
        ],
        question.model,
        question.mode.value,
        question.selected_text,
        question.score_threshold,
        question.strictness.value,
        question.temperature,
        question.seed,
        question.search_mode.value,
        question.response_style.value if question.response_style is not None else None,
        question.citation_policy.value if question.citation_policy is not None else None,
    ]


def _digest(parts: list[object]) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


def bypasses_cache(question: Question) -> bool:
    """Questions whose answer depends on more than the key, or that ask for more than the answer."""
    return bool(question.chat_history or question.session_id or question.dry_run or question.explain)


def is_cacheable(answer: Answer) -> bool:
    return answer.grounded and answer.refusal is RefusalReason.NONE


def keeps_every_answer(answer: Answer) -> bool:
    """What the replay store admits: every answer (a retried request gets the answer it was given, refusals
    included)."""
    return True


def replay_key(question: Question) -> str:
    """The key of an idempotent retry: the idempotency key of this caller, in its tenant (not the reader: a retry
    gets the answer it was given, whichever reader now serves)."""
    return _digest([question.tenant_id, question.caller, question.idempotency_key])


class AnswerStore(Protocol):
    """Answers by key: the answer cache, and the idempotent replays (another instance, admitting every answer)."""

    async def get(self, key: str) -> Recorded | None:
        """The answer stored under `key`, None when there is none (or it expired)."""
        ...

    async def generation(self, tenant_id: str) -> int:
        """The tenant's current generation, raised by every invalidation of the tenant and of any template: take it
        before computing an answer, hand it to `put` (an answer computed across a change is not stored)."""
        ...

    async def put(self, key: str, answer: Answer, *, question: Question, generation: int) -> bool:
        """Store `answer` unless it is not admitted or the tenant changed since `generation`; True if stored."""
        ...

    async def invalidate_tenant(self, tenant_id: str) -> int:
        """Drop every entry of `tenant_id` (after an ingest or delete there); returns how many."""
        ...

    async def invalidate_template(self, template_id: str) -> int:
        """Drop every entry written from template `template_id` (after it changed); returns how many."""
        ...

    async def clear(self) -> None:
        """Drop every entry (after the ranking weights changed)."""
        ...

    async def erase_caller(self, caller: str, tenant_id: str | None = None) -> int:
        """Drop every entry `caller`'s requests wrote (in `tenant_id`; None: in every tenant); returns how many.
        Raises SharedStateUnavailable when the store cannot be reached (nothing may be left behind unsaid)."""
        ...


class MemoryAnswerCache:
    """The `AnswerStore` of one process. `admits` says which answers are kept: cacheable ones for the answer cache,
    every one for idempotent replays (a retried request gets the answer it was given, refusals included)."""

    def __init__(
        self,
        *,
        max_entries: int,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
        admits: Callable[[Answer], bool] = is_cacheable,
    ) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._clock = clock
        self._admits = admits
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._generations: dict[str, int] = {}
        self._template_changes = 0  # part of every tenant's generation (`_generation`)

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: str) -> Recorded | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires_at <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry.recorded

    async def generation(self, tenant_id: str) -> int:
        return self._generation(tenant_id)

    async def put(self, key: str, answer: Answer, *, question: Question, generation: int) -> bool:
        if not self._admits(answer) or generation != self._generation(question.tenant_id):
            return False
        templates = frozenset(t for t in (question.template_id, answer.template_version) if t)
        recorded = Recorded(answer, request_fingerprint(question))
        self._entries[key] = _Entry(recorded, question.tenant_id, question.caller, templates, self._clock() + self.ttl_s)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return True

    async def invalidate_tenant(self, tenant_id: str) -> int:
        self._generations[tenant_id] = self._generation(tenant_id) + 1
        return self._drop(lambda entry: entry.tenant_id == tenant_id)

    async def invalidate_template(self, template_id: str) -> int:
        self._template_changes += 1
        return self._drop(lambda entry: template_id in entry.templates)

    async def clear(self) -> None:
        self._entries.clear()

    async def erase_caller(self, caller: str, tenant_id: str | None = None) -> int:
        return self._drop(lambda entry: entry.caller == caller and tenant_id in (None, entry.tenant_id))

    def _generation(self, tenant_id: str) -> int:
        return self._generations.get(tenant_id, 0) + self._template_changes

    def _drop(self, matches: Callable[[_Entry], bool]) -> int:
        keys = [key for key, entry in self._entries.items() if matches(entry)]
        for key in keys:
            del self._entries[key]
        return len(keys)
