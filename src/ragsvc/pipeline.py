"""The orchestrator: one question in, a stream of domain events out (text deltas, citations, one Answer)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ragsvc.budget import ModelCatalog, Packing
from ragsvc.classify import classify, retrieval_text
from ragsvc.domain import (
    Action,
    Answer,
    ChatMessage,
    CitationStyle,
    Event,
    Explanation,
    Flags,
    GenerationDelta,
    GenerationRequest,
    Mode,
    QueryClass,
    Question,
    RefusalReason,
    Retrieval,
    RetrievalQuery,
    Role,
    RouteTarget,
    Strictness,
    TextDelta,
    Timings,
    Usage,
)
from ragsvc.errors import LLMTimeout, RagError, StageTimeout
from ragsvc.generation.coalesce import coalesced
from ragsvc.generation.extractive import ExtractiveGenerator
from ragsvc.generation.fallback import Attempt, FallbackChain, worth_another_model
from ragsvc.judge import LLMJudge
from ragsvc.pricing import PriceTable
from ragsvc.prompts import REFUSAL_SENTENCE, Prompt, TemplateRegistry, get_prompt
from ragsvc.retrieval.base import Retriever
from ragsvc.retrieval.selection import not_in_selection_message
from ragsvc.sanitize import validate_question
from ragsvc.storage.owners import OwnerDirectory
from ragsvc.storage.sessions import SessionStore
from ragsvc.validation import (
    AnswerPolicy,
    MarkerScanner,
    Verdict,
    citation_for,
    normalize_source_ids,
    strip_invalid_markers,
)

GATE_CANDIDATES = 3
CLASSIFY_TIMEOUT_S = 2.0
_T = TypeVar("_T")
# The generation stage ends this long before the caller's deadline, so that its DEADLINE_EXCEEDED (naming the
# stage) reaches the caller before the caller gives up on its own.
DEADLINE_MARGIN_S = 0.05
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    default_tenant: str
    default_model: str
    top_k: int
    score_gate: float
    temperature: float
    generation_timeout_s: float
    default_template: str = ""
    llm_classify: bool = False  # classify questions with the LLM (else, and when it fails, by rules)
    retrieval_timeout_s: float = 5.0
    total_timeout_s: float = 30.0
    llm_self_score: bool = True  # ask the model to rate its answer (never the extractive generator)
    follow_up_count: int = 0  # follow-up questions asked of the model for a grounded answer
    hallucination_retries: int = 1  # re-runs with the strict prompt when an answer cites unknown markers


@dataclass(slots=True)
class _Generated:
    """What the generation stage produced (filled while its deltas stream)."""

    text: str = ""
    attempt: Attempt | None = None
    packing: Packing | None = None
    usage: Usage = field(default_factory=Usage)
    first_token_ms: float = 0.0


class Pipeline:
    def __init__(
        self,
        settings: PipelineSettings,
        retriever: Retriever,
        generators: FallbackChain,
        models: ModelCatalog,
        policy: AnswerPolicy,
        *,
        owners: OwnerDirectory,
        sessions: SessionStore | None = None,
        prices: PriceTable | None = None,
        templates: TemplateRegistry | None = None,
    ) -> None:
        self._settings = settings
        self._retriever = retriever
        self._generators = generators
        self._models = models
        self._policy = policy
        self._owners = owners
        self._sessions = sessions
        self._prices = prices or PriceTable({})
        self._templates = templates or TemplateRegistry()  # the built-ins and this server's custom templates

    async def run(self, question: Question, *, deadline: float | None = None) -> AsyncIterator[Event]:
        """Answer `question`: validate, retrieve, gate, pack, generate (streaming), validate the answer.

        `deadline` is the caller's, on the event loop's clock (None: it set none). Retrieval and generation each
        end by the earliest of their own budget, the request's total budget and that deadline, with
        StageTimeout("retrieval") or LLMTimeout("generation").
        The session's turn is stored before the final Answer is yielded (a unary caller stops reading there).
        """
        clock = _Clock()
        total_at = asyncio.get_running_loop().time() + self._settings.total_timeout_s
        question = await self._with_history(validate_question(question, default_tenant=self._settings.default_tenant))
        model = question.model or self._settings.default_model
        self._models.check_allowed(model)
        prompt = get_prompt(
            question.template_id or self._settings.default_template,
            question.citation_style,
            question.strictness,
            self._templates,
        )
        retrieval_stage = _StageDeadline.start(
            "retrieval", self._settings.retrieval_timeout_s, "RAG_RETRIEVAL_TIMEOUT_SECONDS",
            total_at=total_at, caller_deadline=deadline,
        )  # fmt: skip
        query_class = await self._classify(question)
        # What is searched for, and what the extractive generator matches sentences against.
        search = retrieval_text(question.query, query_class, question.chat_history)
        try:
            async with asyncio.timeout_at(retrieval_stage.at):
                retrieval = await self._retrieve(question, search)
        except TimeoutError as exc:
            raise retrieval_stage.expired() from exc
        retrieval_ms = clock.lap()
        refusal = self._gate(retrieval)
        if refusal is not None:
            timings = Timings(retrieval_ms, total_ms=clock.total(), embedding_ms=retrieval.embedding_ms)
            answer = await self._refusal(question, retrieval, refusal, prompt, timings, query_class)
            await self._remember(question, answer)
            yield answer
            return

        packing = self._models.budget(model).pack(prompt, question.query, question.chat_history, retrieval.hits)
        budget_ms = clock.lap()
        if question.dry_run:
            yield Answer(
                text="",
                model=self._generators.generator.model_name(model),
                context_chunks_used=len(packing.context),
                context_tokens_used=packing.context_tokens,
                template_version=prompt.version,
                timings=Timings(
                    retrieval_ms=retrieval_ms,
                    budget_ms=budget_ms,
                    total_ms=clock.total(),
                    embedding_ms=retrieval.embedding_ms,
                ),
                request_id=question.request_id,
                explanation=Explanation(packing.messages, packing.context, packing.prompt_tokens),
            )
            return

        stage = _StageDeadline.start(
            "generation", self._settings.generation_timeout_s, "RAG_TIMEOUT_SECONDS", total_at=total_at, caller_deadline=deadline
        )
        generated = _Generated(packing=packing)
        events = self._generate_with_fallback(question, search, model, prompt, retrieval, stage, clock, generated)
        async for event in events:
            yield event
        generation_ms = clock.lap()
        attempt, packing = generated.attempt, generated.packing
        assert attempt is not None and packing is not None  # set by a successful generation

        text, verdict, mitigated = await self._validated(
            question, search, prompt, attempt, packing, generated.text, stage
        )
        validation_ms = clock.lap()
        follow_ups = await self._follow_ups(question, attempt, text, verdict, stage)
        answer = Answer(
            text=text,
            citations=verdict.citations,
            confidence=verdict.confidence,
            action=verdict.action,
            route=await self._route(verdict),
            grounded=verdict.grounded,
            refusal=verdict.refusal,
            model=attempt.generator.model_name(attempt.model),
            usage=generated.usage,
            timings=Timings(
                retrieval_ms=retrieval_ms,
                budget_ms=budget_ms,
                generation_ms=generation_ms,
                first_token_ms=generated.first_token_ms,
                total_ms=clock.total(),
                embedding_ms=retrieval.embedding_ms,
                validation_ms=validation_ms,
            ),
            context_chunks_used=len(packing.context),
            context_tokens_used=packing.context_tokens,
            template_version=prompt.version,
            follow_up_questions=follow_ups,
            flags=Flags(
                hallucination_detected=bool(verdict.invalid_markers) or mitigated,
                mitigation_applied=mitigated,
                degraded=attempt.degraded,
                redactions_applied=retrieval.redactions_applied,
            ),
            request_id=question.request_id,
            explanation=Explanation(packing.messages, packing.context, packing.prompt_tokens) if question.explain else None,
            retrieval_scores=tuple(hit.score for hit in retrieval.hits),
            query_class=query_class,
            cost_estimate_usd=self._prices.cost(attempt.model, generated.usage),
        )
        await self._remember(question, answer)
        yield answer

    async def _with_history(self, question: Question) -> Question:
        """A question in a session that brings no history of its own continues the stored conversation."""
        if self._sessions is None or not question.session_id or question.chat_history:
            return question
        history = await self._sessions.history(question.tenant_id, question.session_id)
        return dataclasses.replace(question, chat_history=history)

    async def _remember(self, question: Question, answer: Answer) -> None:
        if self._sessions is not None and question.session_id:
            turn = (ChatMessage(Role.USER, question.query), ChatMessage(Role.ASSISTANT, answer.text))
            await self._sessions.append(question.tenant_id, question.session_id, turn)

    async def _classify(self, question: Question) -> QueryClass:
        """The question's class: by the LLM when one answers and RAG_LLM_CLASSIFY is on, else by rules."""
        generator = self._generators.generator
        if self._settings.llm_classify and not isinstance(generator, ExtractiveGenerator):
            judge = LLMJudge(generator, model=question.model or self._settings.default_model)
            try:
                async with asyncio.timeout(CLASSIFY_TIMEOUT_S):
                    by_llm = await judge.classify(question.query)
            except (RagError, TimeoutError) as exc:
                _log.warning("LLM classification failed, classifying by rules: %s", exc)
                by_llm = None
            if by_llm is not None:
                return by_llm
        return classify(question.query, question.chat_history)

    async def _retrieve(self, question: Question, search: str) -> Retrieval:
        if question.mode is Mode.SELECTED_TEXT:  # seed 001: evidence only from the selection, never the index
            return await self._retriever.retrieve_selection(
                question.query,
                question.selected_text,
                top_k=question.top_k or self._settings.top_k,
                score_threshold=question.score_threshold,
            )
        return await self._retriever.retrieve(
            RetrievalQuery(
                text=search,
                tenant_id=question.tenant_id,
                user_tags=question.user_tags,
                top_k=question.top_k or self._settings.top_k,
                score_threshold=question.score_threshold,
                filters=question.filters,
            )
        )

    async def _refusal(
        self,
        question: Question,
        retrieval: Retrieval,
        refusal: RefusalReason,
        prompt: Prompt,
        timings: Timings,
        query_class: QueryClass,
    ) -> Answer:
        """The answer when the gate refuses: no LLM call; the nearest candidates when there were some."""
        selected = question.mode is Mode.SELECTED_TEXT
        if selected:
            refusal = RefusalReason.NOT_IN_SELECTION
        text = not_in_selection_message(question.query) if selected else REFUSAL_SENTENCE
        candidates = (retrieval.hits or retrieval.rejected)[:GATE_CANDIDATES]
        verdict = self._policy.judge(text, candidates, refusal=refusal)
        return Answer(
            text=text,
            confidence=verdict.confidence,
            action=verdict.action,
            route=await self._route(verdict),
            refusal=refusal,
            candidates=candidates if refusal is not RefusalReason.NO_CHUNKS else (),
            template_version=prompt.version,
            timings=timings,
            flags=Flags(redactions_applied=retrieval.redactions_applied),
            request_id=question.request_id,
            retrieval_scores=tuple(hit.score for hit in retrieval.hits),
            query_class=query_class,
        )

    async def _route(self, verdict: Verdict) -> RouteTarget | None:
        if verdict.action is not Action.ROUTE:
            return None
        return await self._owners.route(verdict.primary_tag, verdict.route_reason)

    async def _generate_with_fallback(
        self,
        question: Question,
        search: str,
        model: str,
        prompt: Prompt,
        retrieval: Retrieval,
        stage: _StageDeadline,
        clock: _Clock,
        generated: _Generated,
    ) -> AsyncIterator[Event]:
        """Stream the answer from the first step of the fallback chain that works; fills `generated`."""
        assert generated.packing is not None
        packings = {model: generated.packing}
        attempts = self._generators.attempts(model)
        parts: list[str] = []
        primary_error: RagError | None = None
        for attempt in attempts:
            try:
                if attempt.model not in packings:  # a fallback model may have a smaller window: pack for it
                    budget = self._models.budget(attempt.model)
                    packings[attempt.model] = budget.pack(
                        prompt, question.query, question.chat_history, retrieval.hits
                    )
                packing = packings[attempt.model]
                scanner = _scanner(prompt, packing)
                request = self._request(question, search, attempt.model, packing)
                async with contextlib.aclosing(self._generate(attempt, request, stage)) as stream:
                    async for delta in stream:
                        if delta.usage is not None:
                            generated.usage = delta.usage
                        if not delta.text:
                            continue
                        if not parts:
                            generated.first_token_ms = clock.total()
                        parts.append(delta.text)
                        yield TextDelta(delta.text)
                        for marker in scanner.feed(delta.text):
                            if (citation := citation_for(marker, packing.context)) is not None:
                                yield citation
                generated.text, generated.attempt, generated.packing = "".join(parts), attempt, packing
                return
            except RagError as exc:
                if parts:  # the answer has started reaching the client: see generation/fallback.py
                    raise
                if primary_error is None:
                    if attempt is attempts[-1] or not worth_another_model(exc):
                        raise
                    primary_error = exc
                elif attempt is attempts[-1]:
                    raise primary_error from exc
                failed = attempt.generator.model_name(attempt.model)
                _log.warning("%s failed before answering, falling back: %s", failed, exc)

    async def _validated(
        self,
        question: Question,
        search: str,
        prompt: Prompt,
        attempt: Attempt,
        packing: Packing,
        text: str,
        stage: _StageDeadline,
    ) -> tuple[str, Verdict, bool]:
        """The answer's final text and verdict, and whether a hallucination was mitigated (seed 003): an answer
        citing unknown markers is regenerated with the strict prompt (not streamed: the final answer is
        authoritative) up to `hallucination_retries` times; if no run is clean, the invalid markers are stripped
        and a disclaimer added, and the answer stays ungrounded."""
        verdict = await self._verdict(question, prompt, attempt, packing, text, stage)
        if not verdict.invalid_markers:
            return text, verdict, False
        strict = get_prompt(prompt.template.version, prompt.citation_style, Strictness.STRICT, self._templates)
        for _ in range(self._settings.hallucination_retries):
            strict_packing = self._models.budget(attempt.model).pack(
                strict, question.query, question.chat_history, packing.context
            )
            request = self._request(question, search, attempt.model, strict_packing)
            async with contextlib.aclosing(self._generate(attempt, request, stage)) as stream:
                rerun = "".join([delta.text async for delta in stream])
            rerun_verdict = await self._verdict(question, strict, attempt, strict_packing, rerun, stage)
            if not rerun_verdict.invalid_markers:
                return rerun, rerun_verdict, True
        return strip_invalid_markers(_markers_of(prompt, text, packing), verdict.invalid_markers), verdict, True

    async def _verdict(
        self, question: Question, prompt: Prompt, attempt: Attempt, packing: Packing, text: str, stage: _StageDeadline
    ) -> Verdict:
        judged = _markers_of(prompt, text, packing)
        strict = question.strictness is Strictness.STRICT
        verdict = self._policy.judge(judged, packing.context, strict=strict)
        if not verdict.grounded or not self._settings.llm_self_score or _is_extractive(attempt):
            return verdict
        score = await self._ask_judge(attempt, stage, lambda judge: judge.support_score(question.query, text, packing.context))
        return verdict if score is None else self._policy.judge(judged, packing.context, llm_score=score, strict=strict)

    async def _follow_ups(
        self, question: Question, attempt: Attempt, text: str, verdict: Verdict, stage: _StageDeadline
    ) -> tuple[str, ...]:
        """Follow-up questions from the model, for a grounded answer; none from the extractive generator."""
        count = self._settings.follow_up_count if question.follow_up_count is None else question.follow_up_count
        if not count or not verdict.grounded or _is_extractive(attempt):
            return ()
        return await self._ask_judge(attempt, stage, lambda judge: judge.follow_ups(question.query, text, count)) or ()

    @staticmethod
    async def _ask_judge(attempt: Attempt, stage: _StageDeadline, ask: Callable[[LLMJudge], Awaitable[_T]]) -> _T | None:
        """An auxiliary call to the answering model, within the generation stage; None when it fails (the
        answer is already written: a failing extra must not fail it)."""
        try:
            async with asyncio.timeout_at(stage.at):
                return await ask(LLMJudge(attempt.generator, model=attempt.model))
        except (RagError, TimeoutError) as exc:
            _log.warning("auxiliary LLM call failed, using defaults: %s", exc)
            return None

    def _gate(self, retrieval: Retrieval) -> RefusalReason | None:
        """Refuse before any LLM call when there is no evidence, or none good enough."""
        if retrieval.hits:
            return RefusalReason.SCORE_GATE if retrieval.hits[0].score < self._settings.score_gate else None
        return RefusalReason.SCORE_GATE if retrieval.rejected else RefusalReason.NO_CHUNKS

    def _request(self, question: Question, search: str, model: str, packing: Packing) -> GenerationRequest:
        return GenerationRequest(
            messages=packing.messages,
            query=search,
            context=packing.context,
            model=model,
            max_tokens=self._models.limits(model).max_response_tokens,
            temperature=self._settings.temperature if question.temperature is None else question.temperature,
            seed=question.seed,
        )

    @staticmethod
    async def _generate(
        attempt: Attempt, request: GenerationRequest, stage: _StageDeadline
    ) -> AsyncIterator[GenerationDelta]:
        """The attempt's stream (after checking its model is served), its bursts merged (`coalesced`), bounded by
        the generation stage's deadline and always closed upstream."""
        try:
            async with asyncio.timeout_at(stage.at):
                await attempt.generator.ensure_available(attempt.model)
        except TimeoutError as exc:
            raise stage.expired() from exc
        stream = coalesced(attempt.generator.generate(request))
        try:
            while True:
                try:
                    async with asyncio.timeout_at(stage.at):
                        delta = await anext(stream)
                except StopAsyncIteration:
                    return
                except TimeoutError as exc:
                    raise stage.expired() from exc
                yield delta
        finally:
            await stream.aclose()


def _markers_of(prompt: Prompt, text: str, packing: Packing) -> str:
    """`text` with its citations as [#n] markers, whatever the prompt's citation style (what is judged)."""
    if prompt.citation_style is CitationStyle.SOURCE_ID:
        return normalize_source_ids(text, packing.context)
    return text


def _is_extractive(attempt: Attempt) -> bool:
    return isinstance(attempt.generator, ExtractiveGenerator)


def _scanner(prompt: Prompt, packing: Packing) -> MarkerScanner:
    """Finds the citation markers of the prompt's style as the answer streams."""
    if prompt.citation_style is CitationStyle.SOURCE_ID:
        return MarkerScanner(source_ids=[scored.chunk.source_id for scored in packing.context])
    return MarkerScanner()


@dataclass(frozen=True, slots=True)
class _StageDeadline:
    """When a stage must end (event loop time): the earliest of its own budget, the request's total budget and
    the caller's deadline; `limit` says which, for the error."""

    stage: str
    at: float
    limit: str

    @classmethod
    def start(
        cls, stage: str, budget_s: float, setting: str, *, total_at: float, caller_deadline: float | None
    ) -> _StageDeadline:
        limits = [
            (asyncio.get_running_loop().time() + budget_s, f"its {budget_s:g} s budget ({setting})"),
            (total_at, "the request's total budget (RAG_TOTAL_TIMEOUT_SECONDS)"),
        ]
        if caller_deadline is not None:
            limits.append((caller_deadline - DEADLINE_MARGIN_S, "the caller's deadline"))
        at, limit = min(limits)
        return cls(stage, at, limit)

    def expired(self) -> StageTimeout:
        message = f"the {self.stage} stage ran out of time: {self.limit}"
        return LLMTimeout(self.stage, message) if self.stage == "generation" else StageTimeout(self.stage, message)


class _Clock:
    """Milliseconds since start, and since the previous lap."""

    def __init__(self) -> None:
        self._start = self._last = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self._last = (now - self._last) * 1000, now
        return elapsed

    def total(self) -> float:
        return (time.perf_counter() - self._start) * 1000
