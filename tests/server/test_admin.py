"""AdminService over a real channel: prompt templates (CRUD, refusals, persistence across a restart, cache
invalidation), ranking weights (validation, effect on the next query, persistence), SimulateAsk, and the admin
scope when auth is on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import field_mask_pb2

from ragsvc.prompts import BUILT_INS
from ragsvc.retrieval.quality import RankingWeights
from ragsvc.server.app import RagServer
from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import admin_service_pb2_grpc, rag_service_pb2_grpc
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.rpc_details import Details, details_of
from tests.support.servers import Stubs, connected, running_server

QUESTION = "What happens on SIGTERM?"
USER = "Question for the on-call engineer:\n{query}\n\nWhat the runbooks say:\n{context}"


def template(
    user: str = USER, *, instructions: str = "- Answer like a runbook.", display_name: str = "Ops"
) -> admin_pb.PromptTemplate:
    return admin_pb.PromptTemplate(display_name=display_name, instructions=instructions, user_prompt=user)


async def refused(call: object) -> Details:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return details_of(caught.value)


def violations(details: Details) -> dict[str, str]:
    assert details.bad_request is not None, details
    return {v.field: v.description for v in details.bad_request.field_violations}


@pytest.fixture(scope="module")
async def admin_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    # Every grounded answer CITEd, so cacheable whatever the reader's calibration.
    async with running_server(tmp_path_factory.mktemp("admin-data"), cache_max_entries=100) as server:
        yield server


@pytest.fixture(scope="module")
async def admin_stubs(admin_server: RagServer) -> AsyncIterator[Stubs]:
    async with connected(admin_server) as stubs:
        yield stubs


@pytest.fixture(scope="module")
def admin(admin_stubs: Stubs) -> admin_service_pb2_grpc.AdminServiceStub:
    return admin_stubs.admin


@pytest.fixture(scope="module")
def rag(admin_stubs: Stubs) -> rag_service_pb2_grpc.RagServiceStub:
    return admin_stubs.rag


def simulate(
    query: str = QUESTION, template_id: str = "", *, score_threshold: float | None = None, **fields: object
) -> admin_pb.SimulateAskRequest:
    retrieval = pb.RetrievalOptions(score_threshold=score_threshold) if score_threshold is not None else None
    generation = pb.GenerationOptions(template_id=template_id)
    return admin_pb.SimulateAskRequest(request=pb.AskRequest(query=query, generation=generation, retrieval=retrieval, **fields))


def user_message(response: admin_pb.SimulateAskResponse) -> str:
    return response.answer.explanation.prompt[-1].content


async def test_the_built_in_templates_are_listed_and_read_only(admin: admin_service_pb2_grpc.AdminServiceStub) -> None:
    listed = await admin.ListPromptTemplates(admin_pb.ListPromptTemplatesRequest(), timeout=10)
    names = [t.name for t in listed.prompt_templates]
    assert names[:3] == ["promptTemplates/rag-v1", "promptTemplates/rag-v1-terse", "promptTemplates/rag-v1-detailed"]
    assert all(t.built_in for t in listed.prompt_templates[:3]) and not listed.next_page_token
    terse = (
        await admin.GetPromptTemplate(admin_pb.GetPromptTemplateRequest(name="promptTemplates/rag-v1-terse"))
    ).prompt_template
    assert terse.built_in and terse.response_style == pb.RESPONSE_STYLE_CONCISE and "{query}" in terse.user_prompt

    deleted = await refused(admin.DeletePromptTemplate(admin_pb.DeletePromptTemplateRequest(name="promptTemplates/rag-v1")))
    assert (deleted.code, deleted.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "BUILT_IN_TEMPLATE")
    changed = await refused(
        admin.UpdatePromptTemplate(
            admin_pb.UpdatePromptTemplateRequest(
                prompt_template=admin_pb.PromptTemplate(name="promptTemplates/rag-v1", user_prompt=USER)
            )
        )
    )
    assert (changed.code, changed.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "BUILT_IN_TEMPLATE")
    shadowed = await refused(
        admin.CreatePromptTemplate(admin_pb.CreatePromptTemplateRequest(prompt_template_id="rag-v1", prompt_template=template()))
    )
    assert shadowed.code == grpc.StatusCode.ALREADY_EXISTS
    assert (
        await admin.GetPromptTemplate(admin_pb.GetPromptTemplateRequest(name="promptTemplates/rag-v1"))
    ).prompt_template.built_in


async def test_templates_that_cannot_render_or_do_not_exist_are_refused(
    admin: admin_service_pb2_grpc.AdminServiceStub,
) -> None:
    missing = await refused(
        admin.CreatePromptTemplate(
            admin_pb.CreatePromptTemplateRequest(prompt_template_id="no-context", prompt_template=template("Question: {query}"))
        )
    )
    assert (missing.code, missing.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_ERROR")
    assert violations(missing) == {"prompt_template.user_prompt": "missing the required placeholder {context}"}
    for user, expected in (
        ("{query} {context} {tenant}", "unknown placeholder {tenant}"),
        ("{query} {context} {", "cannot be rendered"),
    ):
        bad = await refused(
            admin.CreatePromptTemplate(
                admin_pb.CreatePromptTemplateRequest(prompt_template_id="bad", prompt_template=template(user))
            )
        )
        assert expected in violations(bad)["prompt_template.user_prompt"]
    bad_id = await refused(
        admin.CreatePromptTemplate(admin_pb.CreatePromptTemplateRequest(prompt_template_id="Bad_Id", prompt_template=template()))
    )
    assert "prompt_template_id" in violations(bad_id)

    for call in (
        admin.GetPromptTemplate(admin_pb.GetPromptTemplateRequest(name="promptTemplates/nope")),
        admin.DeletePromptTemplate(admin_pb.DeletePromptTemplateRequest(name="promptTemplates/nope")),
        admin.UpdatePromptTemplate(
            admin_pb.UpdatePromptTemplateRequest(
                prompt_template=admin_pb.PromptTemplate(name="promptTemplates/nope", user_prompt=USER)
            )
        ),
        admin.SimulateAsk(simulate(template_id="nope")),
    ):
        assert (await refused(call)).code == grpc.StatusCode.NOT_FOUND
    bad_name = await refused(admin.GetPromptTemplate(admin_pb.GetPromptTemplateRequest(name="rag-v1")))
    assert "name" in violations(bad_name)


async def test_a_template_update_changes_the_simulation_and_drops_its_cached_answers(
    admin: admin_service_pb2_grpc.AdminServiceStub, rag: rag_service_pb2_grpc.RagServiceStub
) -> None:
    created = await admin.CreatePromptTemplate(
        admin_pb.CreatePromptTemplateRequest(prompt_template_id="ops-runbook", prompt_template=template()), timeout=10
    )
    assert created.prompt_template.name == "promptTemplates/ops-runbook" and not created.prompt_template.built_in
    assert created.prompt_template.create_time.seconds > 0
    duplicate = await refused(
        admin.CreatePromptTemplate(
            admin_pb.CreatePromptTemplateRequest(prompt_template_id="ops-runbook", prompt_template=template())
        )
    )
    assert duplicate.code == grpc.StatusCode.ALREADY_EXISTS

    before = await admin.SimulateAsk(simulate(template_id="ops-runbook"), timeout=30)
    assert before.answer.prompt_template_version == "ops-runbook" and not before.answer.text
    assert user_message(before).startswith("Question for the on-call engineer:\nWhat happens on SIGTERM?")
    assert "- Answer like a runbook." in before.answer.explanation.prompt[0].content
    assert before.answer.explanation.packed_chunks and before.answer.context_chunks_used > 0
    assert before.model == "extractive" and before.estimated_tokens > before.answer.explanation.prompt_tokens > 0

    ask = pb.AskRequest(query=QUESTION, generation=pb.GenerationOptions(template_id="ops-runbook"))
    first = (await rag.Ask(ask, timeout=30)).answer
    assert first.grounded and first.prompt_template_version == "ops-runbook" and not first.flags.cache_hit
    assert (await rag.Ask(ask, timeout=30)).answer.flags.cache_hit
    other = pb.AskRequest(query=QUESTION)  # another template's cached answer stays
    await rag.Ask(other, timeout=30)
    assert (await rag.Ask(other, timeout=30)).answer.flags.cache_hit

    updated = await admin.UpdatePromptTemplate(
        admin_pb.UpdatePromptTemplateRequest(
            prompt_template=admin_pb.PromptTemplate(
                name="promptTemplates/ops-runbook", user_prompt="Runbook lookup: {query}\n\n{context}"
            ),
            update_mask=field_mask_pb2.FieldMask(paths=["user_prompt"]),
        ),
        timeout=10,
    )
    assert updated.cached_answers_dropped == 1
    assert updated.prompt_template.display_name == "Ops", "fields outside the mask keep their value"
    assert updated.prompt_template.user_prompt == "Runbook lookup: {query}\n\n{context}"
    after = await admin.SimulateAsk(simulate(template_id="ops-runbook"), timeout=30)
    assert user_message(after).startswith("Runbook lookup: What happens on SIGTERM?")
    assert not (await rag.Ask(ask, timeout=30)).answer.flags.cache_hit, "the update dropped the cached answer"
    assert (await rag.Ask(other, timeout=30)).answer.flags.cache_hit

    refusal = await refused(
        admin.UpdatePromptTemplate(
            admin_pb.UpdatePromptTemplateRequest(
                prompt_template=admin_pb.PromptTemplate(name="promptTemplates/ops-runbook", user_prompt="{context} only"),
                update_mask=field_mask_pb2.FieldMask(paths=["user_prompt"]),
            )
        )
    )
    assert violations(refusal) == {"prompt_template.user_prompt": "missing the required placeholder {query}"}
    unknown_path = await refused(
        admin.UpdatePromptTemplate(
            admin_pb.UpdatePromptTemplateRequest(
                prompt_template=admin_pb.PromptTemplate(name="promptTemplates/ops-runbook"),
                update_mask=field_mask_pb2.FieldMask(paths=["built_in"]),
            )
        )
    )
    assert "update_mask" in violations(unknown_path)

    assert (await rag.Ask(ask, timeout=30)).answer.flags.cache_hit
    deleted = await admin.DeletePromptTemplate(admin_pb.DeletePromptTemplateRequest(name="promptTemplates/ops-runbook"))
    assert deleted.cached_answers_dropped == 1
    gone = await refused(rag.Ask(ask, timeout=30))
    assert gone.code == grpc.StatusCode.NOT_FOUND, "neither the cache nor the pipeline knows it any more"


async def test_a_templates_stop_sequences_and_citation_policy_are_checked_and_changed_by_mask(
    admin: admin_service_pb2_grpc.AdminServiceStub,
) -> None:
    built_in = await admin.GetPromptTemplate(admin_pb.GetPromptTemplateRequest(name="promptTemplates/rag-v1"))
    assert list(built_in.prompt_template.stop_sequences) == ["\n\n[Question]"], "R-002-07's stop, in English"
    assert built_in.prompt_template.citation_policy == pb.CITATION_POLICY_UNSPECIFIED, "the server's default"

    too_many = template()
    too_many.stop_sequences.extend(["a", "", "x" * 65, "b", "c"])
    bad = violations(
        await refused(
            admin.CreatePromptTemplate(admin_pb.CreatePromptTemplateRequest(prompt_template_id="stops", prompt_template=too_many))
        )
    )
    assert bad == {
        "prompt_template.stop_sequences": "at most 4 stop sequences, got 5",
        "prompt_template.stop_sequences[1]": "1 to 64 characters, got 0",
        "prompt_template.stop_sequences[2]": "1 to 64 characters, got 65",
    }
    unknown = template()
    unknown.citation_policy = 7  # type: ignore[assignment]  # a number a newer client may send
    assert violations(
        await refused(
            admin.CreatePromptTemplate(admin_pb.CreatePromptTemplateRequest(prompt_template_id="stops", prompt_template=unknown))
        )
    ) == {"prompt_template.citation_policy": "unsupported value 7"}

    created = (
        await admin.CreatePromptTemplate(
            admin_pb.CreatePromptTemplateRequest(prompt_template_id="stops", prompt_template=template())
        )
    ).prompt_template
    assert not created.stop_sequences and created.citation_policy == pb.CITATION_POLICY_UNSPECIFIED
    change = admin_pb.PromptTemplate(
        name="promptTemplates/stops", stop_sequences=["\n\nQuestion"], citation_policy=pb.CITATION_POLICY_DROP_INVALID
    )
    updated = (
        await admin.UpdatePromptTemplate(
            admin_pb.UpdatePromptTemplateRequest(
                prompt_template=change, update_mask=field_mask_pb2.FieldMask(paths=["stop_sequences", "citation_policy"])
            )
        )
    ).prompt_template
    assert list(updated.stop_sequences) == ["\n\nQuestion"] and updated.citation_policy == pb.CITATION_POLICY_DROP_INVALID
    assert updated.user_prompt == USER, "fields outside the mask keep their value"
    back = (
        await admin.UpdatePromptTemplate(
            admin_pb.UpdatePromptTemplateRequest(
                prompt_template=admin_pb.PromptTemplate(name="promptTemplates/stops"),
                update_mask=field_mask_pb2.FieldMask(paths=["citation_policy"]),
            )
        )
    ).prompt_template
    assert back.citation_policy == pb.CITATION_POLICY_UNSPECIFIED and list(back.stop_sequences) == ["\n\nQuestion"]
    await admin.DeletePromptTemplate(admin_pb.DeletePromptTemplateRequest(name="promptTemplates/stops"))


async def test_simulate_reports_a_gate_refusal_without_a_prompt(admin: admin_service_pb2_grpc.AdminServiceStub) -> None:
    response = await admin.SimulateAsk(simulate("zqxv wplk frobnicate", score_threshold=0.99), timeout=30)
    assert not response.answer.grounded and response.answer.refusal_reason != pb.REFUSAL_REASON_UNSPECIFIED
    assert not response.answer.explanation.prompt and not response.model and response.estimated_tokens == 0
    empty = await refused(admin.SimulateAsk(simulate("")))
    assert violations(empty) == {"request.query": "must not be empty"}


async def test_ranking_weights_are_validated_and_rank_the_next_query(
    admin: admin_service_pb2_grpc.AdminServiceStub, admin_stubs: Stubs, admin_server: RagServer
) -> None:
    current = (await admin.GetRankingWeights(admin_pb.GetRankingWeightsRequest(), timeout=10)).ranking_weights
    assert (current.name, current.similarity_weight, current.recency_weight, current.trust_weight) == (
        "rankingWeights",
        pytest.approx(0.7),
        pytest.approx(0.2),
        pytest.approx(0.1),
    )

    negative = await refused(
        admin.UpdateRankingWeights(
            admin_pb.UpdateRankingWeightsRequest(
                ranking_weights=admin_pb.RankingWeights(similarity_weight=-0.5, recency_weight=0.2, trust_weight=0.1)
            )
        )
    )
    assert negative.code == grpc.StatusCode.INVALID_ARGUMENT
    assert list(violations(negative)) == ["ranking_weights.similarity_weight"]
    zero = await refused(
        admin.UpdateRankingWeights(admin_pb.UpdateRankingWeightsRequest(ranking_weights=admin_pb.RankingWeights()))
    )
    assert set(violations(zero)) == {f"ranking_weights.{w}" for w in ("similarity_weight", "recency_weight", "trust_weight")}
    assert admin_server.components.retriever.weights == RankingWeights(), "a refused update changes nothing"

    # Two documents: the more similar one is barely trusted, the trusted one is less similar.
    index = admin_stubs.index
    documents = [
        index_pb.Document(
            document_id="similar",
            name="similar.md",
            media_type="text/markdown",
            trust=0.0,
            content=b"# Travel budget\n\nThe finance team has a travel budget of 12000 euros per quarter.",
        ),
        index_pb.Document(
            document_id="trusted",
            name="trusted.md",
            media_type="text/markdown",
            trust=1.0,
            content=b"# Finance\n\nThe finance team travels to conferences; its budget is reviewed.",
        ),
    ]
    await index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id="weights", documents=documents), timeout=30)

    async def first_document() -> str:
        """The document retrieval ranks first: the weights order retrieval (each chunk's rank_score); the trained
        reader's chunk model then orders the evidence by its own reading."""
        request = simulate("What is the travel budget of the finance team?", tenant_id="weights", score_threshold=0.05)
        response = await admin.SimulateAsk(request, timeout=30)
        return max(response.answer.explanation.packed_chunks, key=lambda chunk: chunk.rank_score).document_name

    similarity_only = admin_pb.RankingWeights(similarity_weight=1.0, recency_weight=0.0, trust_weight=0.0)
    await admin.UpdateRankingWeights(admin_pb.UpdateRankingWeightsRequest(ranking_weights=similarity_only), timeout=10)
    assert await first_document() == "similar.md"
    trust_only = await admin.UpdateRankingWeights(
        admin_pb.UpdateRankingWeightsRequest(
            ranking_weights=admin_pb.RankingWeights(similarity_weight=0.0, trust_weight=1.0),
            update_mask=field_mask_pb2.FieldMask(paths=["similarity_weight", "trust_weight"]),
        ),
        timeout=10,
    )
    weights = trust_only.ranking_weights
    assert (weights.similarity_weight, weights.recency_weight, weights.trust_weight) == (0.0, 0.0, 1.0)
    assert await first_document() == "trusted.md"
    await admin.UpdateRankingWeights(
        admin_pb.UpdateRankingWeightsRequest(
            ranking_weights=admin_pb.RankingWeights(similarity_weight=0.7, recency_weight=0.2, trust_weight=0.1)
        )
    )
    assert admin_server.components.retriever.weights == RankingWeights()


async def test_new_ranking_weights_empty_the_answer_cache(
    admin: admin_service_pb2_grpc.AdminServiceStub, rag: rag_service_pb2_grpc.RagServiceStub
) -> None:
    ask = pb.AskRequest(query="How is the confidence score computed?")
    await rag.Ask(ask, timeout=30)
    assert (await rag.Ask(ask, timeout=30)).answer.flags.cache_hit
    same = admin_pb.RankingWeights(similarity_weight=0.7, recency_weight=0.2, trust_weight=0.1)
    await admin.UpdateRankingWeights(admin_pb.UpdateRankingWeightsRequest(ranking_weights=same), timeout=10)
    assert (await rag.Ask(ask, timeout=30)).answer.flags.cache_hit, "unchanged weights keep the cache"
    other = admin_pb.RankingWeights(similarity_weight=0.8, recency_weight=0.1, trust_weight=0.1)
    await admin.UpdateRankingWeights(admin_pb.UpdateRankingWeightsRequest(ranking_weights=other), timeout=10)
    assert not (await rag.Ask(ask, timeout=30)).answer.flags.cache_hit
    await admin.UpdateRankingWeights(admin_pb.UpdateRankingWeightsRequest(ranking_weights=same), timeout=10)


async def test_templates_and_weights_survive_a_restart(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, connected(server) as stubs:
        admin = stubs.admin
        kept = template()
        kept.stop_sequences.extend(["\n\nQuestion for", "END"])
        kept.citation_policy = pb.CITATION_POLICY_DROP_INVALID
        await admin.CreatePromptTemplate(
            admin_pb.CreatePromptTemplateRequest(prompt_template_id="kept", prompt_template=kept), timeout=10
        )
        await admin.UpdateRankingWeights(
            admin_pb.UpdateRankingWeightsRequest(
                ranking_weights=admin_pb.RankingWeights(similarity_weight=0.5, recency_weight=0.0, trust_weight=0.5)
            )
        )
    assert BUILT_INS.get("kept") is None, "custom templates live in their server's registry, never the built-ins"

    async with running_server(tmp_path) as server, connected(server) as stubs:
        admin = stubs.admin
        kept = (await admin.GetPromptTemplate(admin_pb.GetPromptTemplateRequest(name="promptTemplates/kept"))).prompt_template
        assert (kept.display_name, kept.instructions, kept.user_prompt) == ("Ops", "- Answer like a runbook.", USER)
        assert list(kept.stop_sequences) == ["\n\nQuestion for", "END"]
        assert kept.citation_policy == pb.CITATION_POLICY_DROP_INVALID
        listed = await admin.ListPromptTemplates(admin_pb.ListPromptTemplatesRequest(page_size=4), timeout=10)
        assert len(listed.prompt_templates) == 4 and listed.next_page_token  # the four built-ins
        rest = await admin.ListPromptTemplates(
            admin_pb.ListPromptTemplatesRequest(page_size=4, page_token=listed.next_page_token), timeout=10
        )
        assert [t.name for t in rest.prompt_templates] == ["promptTemplates/kept"] and not rest.next_page_token
        simulated = await admin.SimulateAsk(simulate(template_id="kept"), timeout=30)
        assert user_message(simulated).startswith("Question for the on-call engineer:")
        weights = (await admin.GetRankingWeights(admin_pb.GetRankingWeightsRequest())).ranking_weights
        assert (weights.similarity_weight, weights.recency_weight, weights.trust_weight) == (0.5, 0.0, 0.5)
        assert server.components.retriever.weights == RankingWeights(0.5, 0.0, 0.5)


async def test_admin_calls_need_a_key_with_the_admin_scope(tmp_path: Path) -> None:
    keys = {
        "keys": [
            {"name": "ops", "token": "tok-ops", "tenant": "default", "tags": ["*"], "admin": True},
            {"name": "indexer", "token": "tok-index", "tenant": "default", "tags": ["*"], "index": True},
        ]
    }
    async with (
        running_server(tmp_path, auth_enabled=True, api_keys=json.dumps(keys), demo_corpus=False) as server,
        connected(server) as stubs,
    ):
        admin = stubs.admin
        request = admin_pb.GetRankingWeightsRequest()
        assert (await refused(admin.GetRankingWeights(request))).code == grpc.StatusCode.UNAUTHENTICATED
        denied = await refused(admin.GetRankingWeights(request, metadata=(("authorization", "Bearer tok-index"),)))
        assert (denied.code, denied.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        allowed = await admin.GetRankingWeights(request, metadata=(("authorization", "Bearer tok-ops"),), timeout=10)
        assert allowed.ranking_weights.name == "rankingWeights"
        other_tenant = await refused(
            admin.SimulateAsk(simulate(tenant_id="acme"), metadata=(("authorization", "Bearer tok-ops"),))
        )
        assert other_tenant.code == grpc.StatusCode.PERMISSION_DENIED, "the admin key is still bound to its tenant"
