from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ragsvc.prompts import PromptTemplate
from ragsvc.storage.backend import Backend
from ragsvc.storage.templates import TemplateStore

SHORT = PromptTemplate(version="support-short", length_rule="- Two sentences.", user="Q: {query}\n{context}",
                       display_name="Support, short")  # fmt: skip


async def test_a_template_is_created_once_read_back_and_listed(database: Backend) -> None:
    store = TemplateStore(database)
    created = await store.create(SHORT)
    assert created is not None and created.template == SHORT
    assert created.created_at == created.updated_at
    assert abs(created.created_at - datetime.now(UTC)) < timedelta(seconds=5)
    assert await store.create(PromptTemplate(version="support-short", length_rule="")) is None, "the id is taken"
    assert await store.get("support-short") == created, "what is read back is what create returned"
    await store.create(PromptTemplate(version="a-first", length_rule=""))
    assert [stored.template.version for stored in await store.list()] == ["a-first", "support-short"]


async def test_update_replaces_the_text_and_keeps_the_creation_time(database: Backend) -> None:
    store = TemplateStore(database)
    created = await store.create(SHORT)
    assert created is not None
    changed = PromptTemplate(version="support-short", length_rule="", user="{query} {context}", display_name="S")
    updated = await store.update(changed)
    assert updated is not None and updated.template == changed
    assert updated.created_at == created.created_at and updated.updated_at >= created.updated_at
    assert await store.update(PromptTemplate(version="missing", length_rule="")) is None


async def test_delete(database: Backend) -> None:
    store = TemplateStore(database)
    await store.create(SHORT)
    assert await store.delete("support-short") is True
    assert await store.delete("support-short") is False
    assert await store.get("support-short") is None and await store.list() == []
