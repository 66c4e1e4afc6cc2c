"""The pipeline's generation stage with real generators against scripted LLM servers on real sockets: model
choice, fallbacks, deadlines, dry run, determinism and citation styles. Retrieval is a fixed list of chunks here
(the retriever is tested on its own, and end to end through the server)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Sequence

import pytest

from ragsvc.answering.admission import Admission
from ragsvc.answering.context import CallContext
from ragsvc.answering.conversation import Conversation
from ragsvc.answering.deadlines import DEADLINE_MARGIN_S
from ragsvc.answering.pipeline import Pipeline
from ragsvc.budget import ModelCatalog
from ragsvc.config import BudgetSettings, GenerationSettings, HardeningSettings, Settings
from ragsvc.domain import (
    Answer,
    Chunk,
    Citation,
    CitationPolicy,
    CitationStyle,
    Event,
    Question,
    Retrieval,
    RetrievalQuery,
    Role,
    ScoredChunk,
    StreamPolicy,
    Strictness,
    TermCounts,
    TextDelta,
    Timings,
)
from ragsvc.errors import (
    LLMTimeout,
    LLMUnavailable,
    ModelNotAllowed,
    ModelUnavailable,
    NotFound,
    StageTimeout,
)
from ragsvc.generation.base import Generator
from ragsvc.generation.extractive import ExtractiveGenerator
from ragsvc.model_table import DEFAULT_MODELS
from ragsvc.prompts import TemplateRegistry, get_prompt
from ragsvc.reading import Reader
from ragsvc.reading.text import index_terms
from ragsvc.retrieval.layout import indexed_text
from ragsvc.server.components import build_pipeline
from ragsvc.storage.owners import OwnerDirectory
from ragsvc.storage.sqlite import SQLiteDatabase
from tests.generation.backends import BACKENDS, OPENAI, Backend
from tests.support.http_server import Fault
from tests.support.readers import RULES
from tests.support.streams import collect_into

EVIDENCE = (
    ScoredChunk(
        Chunk(
            "travel",
            0,
            "Hotel expenses are reimbursed up to 180 euros per night. Receipts are required.",
            document_name="travel.md",
            section="Hotels",
            tags=("finance",),
        ),
        0.82,
    ),
    ScoredChunk(
        Chunk(
            "travel",
            1,
            "Flights are booked through the travel desk at least two weeks ahead.",
            document_name="travel.md",
            section="Flights",
            tags=("finance",),
        ),
        0.64,
    ),
    ScoredChunk(
        Chunk(
            "expenses",
            4,
            "Meals are reimbursed up to 40 euros per day with receipts.",
            document_name="expenses.md",
            tags=("finance",),
        ),
        0.51,
    ),
)
QUESTION = Question(query="How much are hotel expenses reimbursed per night?", request_id="req-1")
ADMISSION = Admission(HardeningSettings(), ModelCatalog(GenerationSettings().model_limits, BudgetSettings()), default_tenant="t")


class FixedRetriever:
    """Always finds `hits`."""

    def __init__(self, hits: Sequence[ScoredChunk] = EVIDENCE) -> None:
        self.hits = tuple(hits)

    async def retrieve(self, query: RetrievalQuery) -> Retrieval:
        return Retrieval(hits=self.hits[: query.top_k])

    async def retrieve_selection(
        self, query: str, selection: str, *, top_k: int, score_threshold: float | None = None
    ) -> Retrieval:
        raise AssertionError("not used here")

    async def term_counts(self, query: RetrievalQuery, terms: Sequence[str]) -> TermCounts:
        """Document frequencies over the hits, as an engine holding only them would count them."""
        indexed = [set(index_terms(indexed_text(hit.chunk))) for hit in self.hits]
        return TermCounts(len(indexed), {term: sum(term in chunk for chunk in indexed) for term in terms})

    async def check_health(self) -> None:
        pass


def make_pipeline(
    generator: Generator,
    *,
    models: str = DEFAULT_MODELS,
    default_model: str = "llama3.2",
    fallback_model: str = "",
    extractive: bool = False,
    timeout_s: float = 30.0,
    hits: Sequence[ScoredChunk] = EVIDENCE,
    retriever: FixedRetriever | None = None,
    templates: TemplateRegistry | None = None,
    reader: Reader = RULES,
    **overrides: object,
) -> Pipeline:
    """The pipeline as the server builds it, over `retriever` and `generator`; `overrides` are settings by field
    name. The model's extra calls (classification, self-score, follow-ups, re-runs) are off unless `overrides`
    turn them on: the tests count the LLM requests."""
    extra_calls_off = {"llm_classify": False, "llm_self_score": False, "follow_up_count": 0, "hallucination_retries": 0}
    settings = Settings.of(
        default_tenant="t",
        models=models,
        chat_model=default_model,
        fallback_model=fallback_model,
        fallback_extractive=extractive,
        timeout_s=timeout_s,
        top_k=5,
        score_gate=0.3,
        temperature=0.1,
        default_template="rag-v1",
        confidence_threshold=60,
        default_llm_score=50,
        **(extra_calls_off | overrides),
    )
    catalog = ModelCatalog(settings.generation.model_limits, settings.budget)
    owners = OwnerDirectory(SQLiteDatabase.open(":memory:"), admin_email="admin@example.com")
    return build_pipeline(
        settings,
        retriever or FixedRetriever(hits),
        generator,
        reader,
        catalog,  # type: ignore[arg-type]
        templates or TemplateRegistry(),
        owners,
        Conversation(None),
    )


def admitted(question: Question) -> Question:
    """The question as the answering service hands it to the pipeline (validated, defaults applied)."""
    return ADMISSION.admit(question, CallContext(question.request_id))


async def run(pipeline: Pipeline, question: Question = QUESTION, deadline: float | None = None) -> list[Event]:
    async with contextlib.aclosing(pipeline.run(admitted(question), deadline=deadline)) as events:
        return [event async for event in events]


def answer_of(events: list[Event]) -> Answer:
    assert isinstance(events[-1], Answer) and sum(isinstance(e, Answer) for e in events) == 1
    return events[-1]


def chats(server, backend: Backend) -> list:
    return [r for r in server.requests if r.path == backend.chat_path]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
async def test_temperature_seed_and_the_rendered_prompt_reach_the_server(backend: Backend) -> None:
    async with backend.server(deltas=["Up to 180 euros", " [#1]."]) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            question = dataclasses.replace(QUESTION, temperature=0.0, seed=1234, explain=True)
            answer = answer_of(await run(make_pipeline(generator), question))
            default = answer_of(await run(make_pipeline(generator)))

    first, second = (r.body for r in chats(server, backend))
    sampling = first if backend is OPENAI else first["options"]
    assert (sampling["temperature"], sampling["seed"]) == (0.0, 1234)
    assert (sampling.get("max_tokens") or sampling.get("num_predict")) == 1024, "llama3.2's response reserve"
    unset = second if backend is OPENAI else second["options"]
    assert unset["temperature"] == 0.1 and "seed" not in unset, "the configured temperature; no seed"
    assert first["messages"] == [{"role": m.role.value, "content": m.content} for m in answer.explanation.prompt]
    assert answer.text == "Up to 180 euros [#1]." and answer.grounded
    assert answer.model == f"{backend.name}:llama3.2" and not answer.flags.degraded
    assert default.grounded and default.explanation is None


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
async def test_a_model_override_in_the_allowlist_and_served_is_used(backend: Backend) -> None:
    async with backend.server(deltas=["180 euros [#1]"], models=("llama3.2", "qwen3:8b")) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            answer = answer_of(await run(make_pipeline(generator), dataclasses.replace(QUESTION, model="qwen3:8b")))
    assert chats(server, backend)[0].body["model"] == "qwen3:8b"
    assert answer.model == f"{backend.name}:qwen3:8b"


async def test_a_model_outside_the_allowlist_is_refused_before_any_request() -> None:
    async with OPENAI.server(models=("llama3.2", "gpt-4o")) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            with pytest.raises(ModelNotAllowed) as caught:
                await run(make_pipeline(generator), dataclasses.replace(QUESTION, model="gpt-4o"))
    assert [v.field for v in caught.value.violations] == ["generation.model"]
    assert server.requests == []


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
async def test_an_allowed_model_the_server_does_not_serve_is_unavailable_before_generating(backend: Backend) -> None:
    async with backend.server(models=("llama3.2",)) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            pipeline = make_pipeline(generator, fallback_model="llama3.2", extractive=True)
            with pytest.raises(ModelUnavailable) as caught:
                await run(pipeline, dataclasses.replace(QUESTION, model="qwen3:8b"))
    assert caught.value.metadata == {"model": "qwen3:8b"}
    assert [r.path for r in server.requests] == [backend.models_path], "no chat request, and no fallback"


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("status", [503, 429])
async def test_the_fallback_model_answers_when_the_primary_fails(backend: Backend, status: int) -> None:
    async with backend.server(
        deltas=["180 euros [#1]"], models=("llama3.2", "qwen3:8b"), model_status={"qwen3:8b": status}
    ) as server:
        async with contextlib.aclosing(backend.generator(server, model="qwen3:8b")) as generator:
            pipeline = make_pipeline(generator, default_model="qwen3:8b", fallback_model="llama3.2")
            answer = answer_of(await run(pipeline))
    assert [r.body["model"] for r in chats(server, backend)] == ["qwen3:8b", "llama3.2"]
    assert answer.model == f"{backend.name}:llama3.2" and answer.flags.degraded
    assert answer.text == "180 euros [#1]" and answer.grounded


async def test_a_fallback_model_with_a_smaller_window_gets_its_own_packing() -> None:
    hits = [ScoredChunk(Chunk(f"d{i}", 0, f"Fact {i}: " + "hotel nights are reimbursed " * 40), 0.9 - i / 100) for i in range(20)]
    async with OPENAI.server(deltas=["ok [#1]"], models=("big", "small"), model_status={"big": 503}) as server:
        async with contextlib.aclosing(OPENAI.generator(server, model="big")) as generator:
            pipeline = make_pipeline(
                generator,
                models="big=32768/1024,small=2048/256",
                default_model="big",
                fallback_model="small",
                hits=hits,
                answerability_gate=False,
            )
            answer = answer_of(await run(pipeline, dataclasses.replace(QUESTION, top_k=20, explain=True)))
    big, small = (r.body for r in chats(server, OPENAI))
    assert small["max_tokens"] == 256 and big["max_tokens"] == 1024
    assert len(small["messages"][-1]["content"]) < len(big["messages"][-1]["content"])
    assert answer.explanation.prompt_tokens + 256 <= 2048
    assert answer.context_chunks_used == len(answer.explanation.packed) < 20


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
async def test_the_extractive_generator_is_the_last_resort(backend: Backend) -> None:
    async with backend.server(status=503) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            pipeline = make_pipeline(generator, fallback_model="qwen3:8b", extractive=True)
            events = await run(pipeline)
    answer = answer_of(events)
    assert answer.model == "extractive" and answer.flags.degraded
    assert answer.grounded and "180 euros" in answer.text and "[#1]" in answer.text
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == answer.text
    assert [r.path for r in server.requests] == [backend.models_path] * 2, "each model tried before the last resort"


async def test_the_extractive_fallback_also_covers_a_server_that_is_down() -> None:
    async with contextlib.aclosing(OPENAI.generator(OPENAI.down_url())) as generator:
        answer = answer_of(await run(make_pipeline(generator, extractive=True)))
    assert answer.model == "extractive" and answer.flags.degraded and answer.grounded


async def test_without_fallbacks_the_failure_is_the_callers() -> None:
    async with OPENAI.server(model_status={"llama3.2": 503}) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            with pytest.raises(LLMUnavailable):
                await run(make_pipeline(generator))
    assert len(chats(server, OPENAI)) == 1


async def test_when_every_model_fails_the_primary_failure_is_reported() -> None:
    failing = {"llama3.2": 503, "qwen3:8b": 400}
    async with OPENAI.server(models=("llama3.2", "qwen3:8b"), model_status=failing) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            with pytest.raises(LLMUnavailable) as caught:
                await run(make_pipeline(generator, fallback_model="qwen3:8b"))
    assert "503" in caught.value.message
    assert [r.body["model"] for r in chats(server, OPENAI)] == ["llama3.2", "qwen3:8b"]


async def test_a_client_error_does_not_fall_back() -> None:
    async with OPENAI.server(models=("llama3.2", "qwen3:8b"), model_status={"llama3.2": 400}) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            with pytest.raises(LLMUnavailable):
                await run(make_pipeline(generator, fallback_model="qwen3:8b", extractive=True))
    assert [r.body["model"] for r in chats(server, OPENAI)] == ["llama3.2"]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
async def test_a_failure_after_text_reached_the_client_ends_the_stream_without_fallback(backend: Backend) -> None:
    async with backend.server(
        deltas=["Up to", " 180", " euros"], fault=Fault.DISCONNECT, fault_after=2, models=("llama3.2", "qwen3:8b")
    ) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            events: list[Event] = []
            pipeline = make_pipeline(generator, fallback_model="qwen3:8b", extractive=True)
            raw = dataclasses.replace(QUESTION, stream_policy=StreamPolicy.RAW)
            with pytest.raises(LLMUnavailable):
                await collect_into(events, pipeline.run(admitted(raw)))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Up to", " 180"]
    assert not any(isinstance(e, Answer) for e in events)
    assert len(chats(server, backend)) == 1, "no second model splices its answer onto the first"


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
async def test_the_stage_budget_bounds_generation_and_closes_the_upstream(backend: Backend) -> None:
    async with backend.server(deltas=["Up to", " 180"], fault=Fault.STALL, fault_after=1) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            started = time.monotonic()
            with pytest.raises(LLMTimeout) as caught:
                await run(make_pipeline(generator, timeout_s=0.4))
            elapsed = time.monotonic() - started
            connection = server.streams[0].request.connection
            await asyncio.wait_for(connection.closed.wait(), 0.2)
    assert caught.value.stage == "generation" and "RAG_TIMEOUT_SECONDS" in caught.value.message
    assert 0.4 <= elapsed < 0.8
    assert connection.closed_by == "client"


async def test_the_callers_deadline_bounds_generation_when_it_is_sooner() -> None:
    async with OPENAI.server(deltas=["Up to", " 180"], fault=Fault.STALL, fault_after=1) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            started = time.monotonic()
            deadline = asyncio.get_running_loop().time() + 0.5
            with pytest.raises(LLMTimeout) as caught:
                await run(make_pipeline(generator, timeout_s=30), deadline=deadline)
            elapsed = time.monotonic() - started
    assert caught.value.stage == "generation" and "deadline" in caught.value.message
    ends_at = 0.5 - DEADLINE_MARGIN_S
    assert ends_at - 0.05 <= elapsed < ends_at + 0.2, "a little before the caller's deadline, so that the error reaches it"


async def test_a_deadline_already_past_sends_nothing_upstream() -> None:
    async with OPENAI.server() as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            with pytest.raises(LLMTimeout):
                await run(make_pipeline(generator), deadline=asyncio.get_running_loop().time())
    assert chats(server, OPENAI) == []


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
async def test_dry_run_renders_the_chosen_template_without_calling_the_llm(backend: Backend) -> None:
    async with backend.server(models=("llama3.2", "qwen3:8b")) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            question = dataclasses.replace(
                QUESTION, dry_run=True, model="qwen3:8b", template_id="rag-v1-terse", strictness=Strictness.STRICT
            )
            events = await run(make_pipeline(generator), question)
    assert server.requests == [], "not even the model list"
    answer = answer_of(events)
    assert len(events) == 1 and answer.text == ""
    assert answer.model == f"{backend.name}:qwen3:8b" and answer.template_version == "rag-v1-terse"
    prompt = answer.explanation.prompt
    assert prompt[0].content == get_prompt("rag-v1-terse", CitationStyle.MARKER, Strictness.STRICT).system
    assert [m.role for m in prompt] == [Role.SYSTEM, Role.USER] and "[#3]" in prompt[-1].content
    assert answer.explanation.packed == EVIDENCE and answer.context_chunks_used == 3
    assert answer.explanation.prompt_tokens > answer.context_tokens_used > 0


async def test_an_unknown_template_is_not_found() -> None:
    with pytest.raises(NotFound):
        await run(make_pipeline(ExtractiveGenerator(RULES)), dataclasses.replace(QUESTION, template_id="rag-v7"))


def without_timings(answer: Answer) -> Answer:
    return dataclasses.replace(answer, timings=Timings())


async def test_the_extractive_generator_gives_the_same_answer_to_the_same_question() -> None:
    pipeline = make_pipeline(ExtractiveGenerator(RULES))
    first, second = await run(pipeline), await run(pipeline)
    assert [without_timings(e) if isinstance(e, Answer) else e for e in first] == [
        without_timings(e) if isinstance(e, Answer) else e for e in second
    ]
    answer = answer_of(first)
    # The snapshot: this exact answer for this evidence and question (BM25 over the packed sentences).
    assert answer.text == (
        "Hotel expenses are reimbursed up to 180 euros per night. [#1] "
        "Meals are reimbursed up to 40 euros per day with receipts. [#3]"
    )
    assert [(c.marker, c.chunk.source_id) for c in answer.citations] == [(1, "travel:0"), (3, "expenses:4")]
    assert (answer.grounded, answer.model, answer.template_version) == (True, "extractive", "rag-v1")
    # Confidence: the cited chunks' mean score, the coverage of the answer by the evidence, and, since the
    # extractive generator never rates its own answer, the answer's support for the question: its first sentence
    # holds every term of the question and the amount it asks for.
    c = answer.confidence
    assert c.retrieval == pytest.approx((0.82 + 0.51) / 2) and c.llm == 100.0
    assert c.coverage == pytest.approx(1.0), "every sentence is quoted from the evidence"
    assert c.overall == pytest.approx(30 * c.retrieval + 40 * c.coverage + 30 * 100 / 100)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
async def test_source_id_citations_map_to_the_packed_chunks(backend: Backend) -> None:
    deltas = ["Hotels: 180 euros [Sourc", "eId: travel:0]; flights via the desk [SourceId: travel:1]."]
    async with backend.server(deltas=deltas) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            question = dataclasses.replace(QUESTION, citation_style=CitationStyle.SOURCE_ID)
            events = await run(make_pipeline(generator), question)
    system = chats(server, backend)[0].body["messages"][0]["content"]
    assert "[SourceId: handbook:2]" in system
    assert "[SourceId: travel:0]" in chats(server, backend)[0].body["messages"][-1]["content"]
    streamed = [(e.marker, e.chunk.source_id) for e in events if isinstance(e, Citation)]
    assert streamed == [(1, "travel:0"), (2, "travel:1")]
    answer = answer_of(events)
    assert answer.text == "".join(deltas), "the answer keeps the model's own markers"
    assert answer.grounded and [(c.marker, c.chunk.source_id) for c in answer.citations] == streamed


async def test_an_unknown_source_id_is_an_invalid_citation() -> None:
    draft = "180 euros per night [SourceId: travel:0]. Rockets are free [SourceId: moon:1]."
    async with OPENAI.server(deltas=[draft]) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            question = dataclasses.replace(QUESTION, citation_style=CitationStyle.SOURCE_ID)
            strict = answer_of(await run(make_pipeline(generator, citation_policy=CitationPolicy.STRICT), question))
            dropped = answer_of(await run(make_pipeline(generator), question))
    assert not strict.grounded and strict.flags.hallucination_detected
    assert strict.citations == () and "Rockets" in strict.draft, "a refusal cites nothing; its draft is kept"
    assert dropped.grounded and dropped.text == "180 euros per night [SourceId: travel:0]."
    assert [c.chunk.source_id for c in dropped.citations] == ["travel:0"] and dropped.flags.citations_dropped


class SlowRetriever(FixedRetriever):
    """Takes `delay_s` to retrieve: an engine or embedder that hangs."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(EVIDENCE)
        self._delay_s = delay_s

    async def retrieve(self, query):
        await asyncio.sleep(self._delay_s)
        return await super().retrieve(query)


@pytest.mark.parametrize(
    ("budgets", "caller_s", "limit"),
    [
        ({"retrieval_timeout_s": 0.2}, None, "RAG_RETRIEVAL_TIMEOUT_SECONDS"),
        ({"total_timeout_s": 0.2}, None, "RAG_TOTAL_TIMEOUT_SECONDS"),
        ({}, 0.3, "the caller's deadline"),
    ],
)
async def test_a_hanging_retrieval_ends_at_the_earliest_budget_naming_the_stage(
    budgets: dict[str, float], caller_s: float | None, limit: str
) -> None:
    pipeline = make_pipeline(ExtractiveGenerator(RULES), retriever=SlowRetriever(5.0), **budgets)
    deadline = None if caller_s is None else asyncio.get_running_loop().time() + caller_s
    started = time.monotonic()
    with pytest.raises(StageTimeout) as caught:
        async for _ in pipeline.run(admitted(Question(query="hotel limit?")), deadline=deadline):
            pass
    assert caught.value.stage == "retrieval" and caught.value.reason == "DEADLINE"
    assert limit in caught.value.message
    assert time.monotonic() - started < 1.0
