"""Custom prompt templates (R-003-10, R-003-21), beside the built-ins that never change.

A custom template is written to the database first (`storage/templates.py`), then to the registry the pipeline
renders from; every change drops the cached answers written from it and is announced to the other replicas
(`announce`: ragsvc.shared.changes, when RAG_REDIS_URL is set), which `reload` the stored set. The built-ins can
be neither changed nor deleted (BuiltInTemplate), and no custom template may take a built-in's id
(AlreadyExists). A user prompt that
does not render with {query} and {context} is INVALID_ARGUMENT naming the placeholder. Field names in errors
are those of AdminService's PromptTemplate message (`prompt_template.user_prompt`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from ragsvc.answering.cache import AnswerStore
from ragsvc.domain import CitationPolicy, ResponseStyle
from ragsvc.errors import AlreadyExists, BuiltInTemplate, FieldViolation, InvalidRequest, NotFound
from ragsvc.prompts import DEFAULT_LANGUAGE, PromptTemplate, TemplateRegistry, stop_violations, user_prompt_violations
from ragsvc.storage.templates import StoredTemplate, TemplateStore

CHANGES_TOPIC = "templates"  # the change feed's topic of template changes
TEMPLATE_ID = re.compile(r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?")
TEMPLATE_FIELDS = ("display_name", "instructions", "user_prompt")  # what an update without a mask changes
VALUE_FIELDS = (*TEMPLATE_FIELDS, "language", "stop_sequences")  # fields an update gives as plain values
UPDATABLE_FIELDS = (*VALUE_FIELDS, "response_style", "citation_policy")
LANGUAGE = re.compile(r"[a-z]{2,3}")  # an ISO 639 code, as the language detector reports it
LIMITS = {"display_name": 200, "instructions": 2000, "user_prompt": 8000}


@dataclass(frozen=True, slots=True)
class TemplateEntry:
    """A template as AdminService shows it: `stored` (with its times) for a custom one, None for a built-in."""

    template: PromptTemplate
    stored: StoredTemplate | None

    @property
    def built_in(self) -> bool:
        return self.stored is None


@dataclass(frozen=True, slots=True)
class TemplateChange:
    """The fields an update sets (None: keep the current value)."""

    display_name: str | None = None
    instructions: str | None = None
    user_prompt: str | None = None
    language: str | None = None
    stop_sequences: tuple[str, ...] | None = None
    response_style: ResponseStyle | None = None
    sets_response_style: bool = False  # response_style is set (None then means: no style)
    citation_policy: CitationPolicy | None = None  # with `sets_citation_policy`; None: the server's default
    sets_citation_policy: bool = False


class TemplateCatalog:
    def __init__(
        self,
        registry: TemplateRegistry,
        store: TemplateStore,
        cache: AnswerStore | None = None,
        *,
        announce: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self._registry = registry
        self._store = store
        self._cache = cache
        self._announce = announce  # tells the other replicas that the templates changed
        self._lock = asyncio.Lock()  # one change at a time: the database and the registry stay in step

    async def load(self) -> int:
        """At start: the stored custom templates into the registry; returns how many."""
        stored = await self._store.list()
        self._registry.replace_custom([s.template for s in stored])
        return len(stored)

    async def reload(self) -> list[str]:
        """After another replica changed the templates: the stored set into the registry again, and the cached
        answers of each template that changed dropped (another replica may have cached some before it heard of
        the change); returns the ids of those templates."""
        async with self._lock:
            before = {t.version: t for t in self._registry.all() if not self._registry.is_built_in(t.version)}
            stored = await self._store.list()
            self._registry.replace_custom([s.template for s in stored])
            after = {s.template.version: s.template for s in stored}
            changed = sorted(i for i in before.keys() | after.keys() if before.get(i) != after.get(i))
            for template_id in changed:
                await self._invalidate(template_id)
        return changed

    async def get(self, template_id: str) -> TemplateEntry:
        if self._registry.is_built_in(template_id):
            template = self._registry.get(template_id)
            if template is not None:
                return TemplateEntry(template, None)
        stored = await self._store.get(template_id)
        if stored is None:
            raise NotFound(f"no prompt template {template_id!r}", metadata={"template_id": template_id})
        return TemplateEntry(stored.template, stored)

    async def list(self) -> list[TemplateEntry]:
        """The built-ins in their order, then the custom templates by id."""
        built_ins = [TemplateEntry(t, None) for t in self._registry.all() if self._registry.is_built_in(t.version)]
        return built_ins + [TemplateEntry(s.template, s) for s in await self._store.list()]

    async def create(
        self,
        template_id: str,
        display_name: str,
        instructions: str,
        user_prompt: str,
        *,
        language: str = "",
        response_style: ResponseStyle | None = None,
        stop_sequences: Sequence[str] = (),
        citation_policy: CitationPolicy | None = None,
    ) -> TemplateEntry:
        violations: list[FieldViolation] = []
        if not TEMPLATE_ID.fullmatch(template_id):
            violations.append(
                FieldViolation(
                    "prompt_template_id",
                    "lower-case letters, digits and hyphens, starting with a letter and not ending with a hyphen, "
                    "at most 63 characters",
                )
            )
        template = PromptTemplate(
            version=template_id,
            length_rule=instructions,
            user=user_prompt,
            display_name=display_name,
            language=language or DEFAULT_LANGUAGE,
            response_style=response_style,
            stop=tuple(stop_sequences),
            citation_policy=citation_policy,
        )
        violations += _violations(template, UPDATABLE_FIELDS)
        if violations:
            raise InvalidRequest(violations)
        async with self._lock:
            if self._registry.is_built_in(template_id):
                raise AlreadyExists(f"{template_id!r} is a built-in template", metadata={"template_id": template_id})
            stored = await self._store.create(template)
            if stored is None:
                raise AlreadyExists(f"a prompt template {template_id!r} exists", metadata={"template_id": template_id})
            self._registry.put(template)
        await self._announced()
        return TemplateEntry(template, stored)

    async def update(self, template_id: str, change: TemplateChange) -> tuple[TemplateEntry, int]:
        """The changed template and how many cached answers it dropped."""
        async with self._lock:
            current = (await self._custom(template_id)).template
            template = dataclasses.replace(
                current,
                display_name=current.display_name if change.display_name is None else change.display_name,
                length_rule=current.length_rule if change.instructions is None else change.instructions,
                user=current.user if change.user_prompt is None else change.user_prompt,
                language=current.language if change.language is None else change.language or DEFAULT_LANGUAGE,
                response_style=change.response_style if change.sets_response_style else current.response_style,
                stop=current.stop if change.stop_sequences is None else change.stop_sequences,
                citation_policy=change.citation_policy if change.sets_citation_policy else current.citation_policy,
            )
            changed = [name for name in VALUE_FIELDS if getattr(change, name) is not None]
            if violations := _violations(template, changed):
                raise InvalidRequest(violations)
            stored = await self._store.update(template)
            if stored is None:  # deleted meanwhile by another server on the same database
                raise NotFound(f"no prompt template {template_id!r}", metadata={"template_id": template_id})
            self._registry.put(template)
            dropped = await self._invalidate(template_id)
        await self._announced()
        return TemplateEntry(template, stored), dropped

    async def delete(self, template_id: str) -> int:
        """Delete a custom template; returns how many cached answers it dropped."""
        async with self._lock:
            await self._custom(template_id)
            await self._store.delete(template_id)
            self._registry.remove(template_id)
            dropped = await self._invalidate(template_id)
        await self._announced()
        return dropped

    async def _custom(self, template_id: str) -> StoredTemplate:
        """The custom template `template_id`: BuiltInTemplate for a built-in, NotFound for none."""
        if self._registry.is_built_in(template_id):
            raise BuiltInTemplate(
                f"{template_id!r} is a built-in template: it cannot be changed or deleted (create a custom one)",
                metadata={"template_id": template_id},
            )
        stored = await self._store.get(template_id)
        if stored is None:
            raise NotFound(f"no prompt template {template_id!r}", metadata={"template_id": template_id})
        return stored

    async def _invalidate(self, template_id: str) -> int:
        return await self._cache.invalidate_template(template_id) if self._cache is not None else 0

    async def _announced(self) -> None:
        if self._announce is not None:
            await self._announce()


def _violations(template: PromptTemplate, fields: Iterable[str]) -> list[FieldViolation]:
    """What is wrong with the given fields of a template, named as fields of the request."""
    prefix = "prompt_template."
    values = {"display_name": template.display_name, "instructions": template.length_rule, "user_prompt": template.user}
    found = [
        FieldViolation(prefix + field, f"at most {LIMITS[field]} characters, got {len(values[field])}")
        for field in fields
        if field in LIMITS and len(values[field]) > LIMITS[field]
    ]
    if "user_prompt" in fields:
        found += user_prompt_violations(template.user, prefix + "user_prompt")
    if "language" in fields and not LANGUAGE.fullmatch(template.language):
        found.append(FieldViolation(prefix + "language", "an ISO 639 code of 2 or 3 lower-case letters, e.g. \"de\""))
    if "stop_sequences" in fields:
        found += stop_violations(template.stop, prefix + "stop_sequences")
    return found
