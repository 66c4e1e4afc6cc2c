"""The template catalog without a transport, on both records backends: the database first, then the registry the
pipeline renders from; every change drops the cached answers written from the template and is announced, and
another replica's `reload` applies it (AdminService over a channel: tests/server/test_admin.py; the change feed
between two real servers: tests/server/test_replicas.py)."""

from __future__ import annotations

import pytest

from ragsvc import domain
from ragsvc.answering.cache import MemoryAnswerCache
from ragsvc.errors import AlreadyExists, BuiltInTemplate, InvalidRequest, NotFound
from ragsvc.management.templates import TemplateCatalog, TemplateChange
from ragsvc.prompts import BUILT_INS, TemplateRegistry
from ragsvc.storage.backend import Backend
from ragsvc.storage.templates import TemplateStore

USER = "Question for the on-call engineer:\n{query}\n\nWhat the runbooks say:\n{context}"
QUESTION = domain.Question(query="What happens on SIGTERM?", tenant_id="default", template_id="ops")
CITED = domain.Answer(text="It drains [#1].", grounded=True, action=domain.Action.CITE, template_version="ops")


@pytest.fixture
def registry() -> TemplateRegistry:
    return TemplateRegistry()


@pytest.fixture
def cache() -> MemoryAnswerCache:
    return MemoryAnswerCache(max_entries=10, ttl_s=60)


@pytest.fixture
def announced() -> list[str]:
    return []


@pytest.fixture
def catalog(database: Backend, registry: TemplateRegistry, cache: MemoryAnswerCache, announced: list[str]) -> TemplateCatalog:
    async def announce() -> None:
        announced.append("templates")

    return TemplateCatalog(registry, TemplateStore(database), cache, announce=announce)


async def test_a_created_template_is_stored_and_rendered_from_at_once(
    catalog: TemplateCatalog, registry: TemplateRegistry, database: Backend
) -> None:
    created = await catalog.create("ops", "Ops", "- Answer like a runbook.", USER)
    assert not created.built_in and created.stored is not None
    assert registry.get("ops") == created.template and BUILT_INS.get("ops") is None
    assert (await catalog.get("ops")).template.user == USER
    assert [entry.template.version for entry in await catalog.list()][-1] == "ops"

    fresh = TemplateRegistry()  # another server on the same database loads it at start
    assert await TemplateCatalog(fresh, TemplateStore(database)).load() == 1
    assert fresh.get("ops") == created.template


async def test_built_ins_are_listed_first_and_read_only(catalog: TemplateCatalog) -> None:
    entries = await catalog.list()
    assert [e.template.version for e in entries[:3]] == ["rag-v1", "rag-v1-terse", "rag-v1-detailed"]
    assert all(e.built_in for e in entries[:3]) and (await catalog.get("rag-v1")).built_in
    with pytest.raises(BuiltInTemplate):
        await catalog.update("rag-v1", TemplateChange(user_prompt=USER))
    with pytest.raises(BuiltInTemplate):
        await catalog.delete("rag-v1")
    with pytest.raises(AlreadyExists):
        await catalog.create("rag-v1", "Mine", "", USER)


async def test_refusals_name_the_request_fields(catalog: TemplateCatalog) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await catalog.create("Bad_Id", "x", "", "Question: {query}")
    assert [v.field for v in caught.value.violations] == ["prompt_template_id", "prompt_template.user_prompt"]
    await catalog.create("ops", "Ops", "", USER)
    with pytest.raises(AlreadyExists):
        await catalog.create("ops", "Ops", "", USER)
    with pytest.raises(InvalidRequest) as caught:
        await catalog.update("ops", TemplateChange(user_prompt="{context} only"))
    assert [v.field for v in caught.value.violations] == ["prompt_template.user_prompt"]
    for missing in (catalog.get("never"), catalog.update("never", TemplateChange(display_name="x")), catalog.delete("never")):
        with pytest.raises(NotFound):
            await missing


async def test_update_and_delete_drop_the_templates_cached_answers(
    catalog: TemplateCatalog, registry: TemplateRegistry, cache: MemoryAnswerCache, announced: list[str]
) -> None:
    await catalog.create("ops", "Ops", "- Answer like a runbook.", USER)
    await cache.put("ops-answer", CITED, question=QUESTION, generation=await cache.generation(QUESTION.tenant_id))

    updated, dropped = await catalog.update("ops", TemplateChange(user_prompt="Runbook lookup: {query}\n\n{context}"))
    assert dropped == 1 and len(cache) == 0
    assert updated.template.display_name == "Ops", "fields the change leaves out keep their value"
    assert registry.get("ops").user.startswith("Runbook lookup:")

    await cache.put("ops-answer", CITED, question=QUESTION, generation=await cache.generation(QUESTION.tenant_id))
    assert await catalog.delete("ops") == 1
    assert registry.get("ops") is None
    with pytest.raises(NotFound):
        await catalog.get("ops")
    assert announced == ["templates"] * 3, "create, update and delete, each announced once"


async def test_a_reload_applies_another_replicas_changes(
    catalog: TemplateCatalog, registry: TemplateRegistry, cache: MemoryAnswerCache, database: Backend
) -> None:
    await catalog.create("ops", "Ops", "", USER)
    await catalog.create("kept", "Kept", "", USER)
    await cache.put("ops-answer", CITED, question=QUESTION, generation=await cache.generation(QUESTION.tenant_id))
    other = TemplateCatalog(TemplateRegistry(), TemplateStore(database))  # another replica on the same database
    await other.load()
    await other.update("ops", TemplateChange(user_prompt="Runbook lookup: {query}\n\n{context}"))
    await other.create("new", "New", "", USER)
    await other.delete("kept")

    assert await catalog.reload() == ["kept", "new", "ops"]
    assert registry.get("ops").user.startswith("Runbook lookup:")
    assert registry.get("new") is not None and registry.get("kept") is None
    assert len(cache) == 0, "answers cached here from the old template are dropped"
    assert await catalog.reload() == [], "nothing changed since"
