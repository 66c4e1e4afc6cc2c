"""The orchestrator: one question in, a stream of domain events out (text deltas, citations, one Answer)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ragsvc.budget import TokenBudget
from ragsvc.domain import (
    Answer,
    Event,
    Explanation,
    Flags,
    GenerationDelta,
    GenerationRequest,
    Question,
    RefusalReason,
    Retrieval,
    RetrievalQuery,
    TextDelta,
    Timings,
    Usage,
)
from ragsvc.errors import FieldViolation, LLMTimeout, ModelNotAllowed
from ragsvc.generation.base import Generator
from ragsvc.prompts import REFUSAL_SENTENCE, get_template, render
from ragsvc.retrieval.base import Retriever
from ragsvc.sanitize import validate_question
from ragsvc.validation import AnswerPolicy, MarkerScanner, citation_for

GATE_CANDIDATES = 3


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    default_tenant: str
    default_model: str
    allowed_models: frozenset[str]
    top_k: int
    score_gate: float
    temperature: float
    max_response_tokens: int
    generation_timeout_s: float


class Pipeline:
    def __init__(
        self,
        settings: PipelineSettings,
        retriever: Retriever,
        generator: Generator,
        budget: TokenBudget,
        policy: AnswerPolicy,
    ) -> None:
        self._settings = settings
        self._retriever = retriever
        self._generator = generator
        self._budget = budget
        self._policy = policy

    async def run(self, question: Question) -> AsyncIterator[Event]:
        """Answer `question`: validate, retrieve, gate, pack, generate (streaming), validate the answer."""
        clock = _Clock()
        question = validate_question(question, default_tenant=self._settings.default_tenant)
        model = self._model_for(question)
        template = get_template(question.template_id)

        retrieval = await self._retriever.retrieve(
            RetrievalQuery(
                text=question.query,
                tenant_id=question.tenant_id,
                user_tags=question.user_tags,
                top_k=question.top_k or self._settings.top_k,
                score_threshold=question.score_threshold,
                filters=question.filters,
            )
        )
        retrieval_ms = clock.lap()
        refusal = self._gate(retrieval)
        if refusal is not None:
            candidates = (retrieval.hits or retrieval.rejected)[:GATE_CANDIDATES]
            verdict = self._policy.judge(REFUSAL_SENTENCE, (), refusal=refusal)
            yield Answer(
                text=REFUSAL_SENTENCE,
                confidence=verdict.confidence,
                action=verdict.action,
                route=verdict.route,
                refusal=refusal,
                candidates=candidates if refusal is RefusalReason.SCORE_GATE else (),
                template_version=template.version,
                timings=Timings(retrieval_ms=retrieval_ms, total_ms=clock.total()),
                request_id=question.request_id,
            )
            return

        packing = self._budget.pack(template, question.query, question.chat_history, retrieval.hits)
        messages = render(template, question.query, packing.context, packing.history)
        budget_ms = clock.lap()
        explanation = Explanation(messages, packing.context, packing.prompt_tokens)
        if question.dry_run:
            yield Answer(
                text="",
                model=model,
                context_chunks_used=len(packing.context),
                context_tokens_used=packing.context_tokens,
                template_version=template.version,
                timings=Timings(retrieval_ms=retrieval_ms, budget_ms=budget_ms, total_ms=clock.total()),
                request_id=question.request_id,
                explanation=explanation,
            )
            return

        request = GenerationRequest(
            messages=messages,
            query=question.query,
            context=packing.context,
            model=model,
            max_tokens=self._settings.max_response_tokens,
            temperature=self._settings.temperature if question.temperature is None else question.temperature,
            seed=question.seed,
        )
        parts: list[str] = []
        usage = Usage()
        first_token_ms = 0.0
        scanner = MarkerScanner()
        async for delta in self._generate(request):
            if delta.usage is not None:
                usage = delta.usage
            if not delta.text:
                continue
            if not parts:
                first_token_ms = clock.total()
            parts.append(delta.text)
            yield TextDelta(delta.text)
            for marker in scanner.feed(delta.text):
                if (citation := citation_for(marker, packing.context)) is not None:
                    yield citation
        generation_ms = clock.lap()

        text = "".join(parts)
        verdict = self._policy.judge(text, packing.context)
        yield Answer(
            text=text,
            citations=verdict.citations,
            confidence=verdict.confidence,
            action=verdict.action,
            route=verdict.route,
            grounded=verdict.grounded,
            refusal=verdict.refusal,
            model=self._generator.name,
            usage=usage,
            timings=Timings(
                retrieval_ms=retrieval_ms,
                budget_ms=budget_ms,
                generation_ms=generation_ms,
                first_token_ms=first_token_ms,
                total_ms=clock.total(),
            ),
            context_chunks_used=len(packing.context),
            context_tokens_used=packing.context_tokens,
            template_version=template.version,
            flags=Flags(hallucination_detected=bool(verdict.invalid_markers)),
            request_id=question.request_id,
            explanation=explanation if question.explain else None,
        )

    def _model_for(self, question: Question) -> str:
        model = question.model or self._settings.default_model
        if model not in self._settings.allowed_models:
            allowed = ", ".join(sorted(self._settings.allowed_models))
            raise ModelNotAllowed([FieldViolation("generation.model", f"{model!r} is not one of: {allowed}")])
        return model

    def _gate(self, retrieval: Retrieval) -> RefusalReason | None:
        """Refuse before any LLM call when there is no evidence, or none good enough."""
        if retrieval.hits:
            return RefusalReason.SCORE_GATE if retrieval.hits[0].score < self._settings.score_gate else None
        return RefusalReason.SCORE_GATE if retrieval.rejected else RefusalReason.NO_CHUNKS

    async def _generate(self, request: GenerationRequest) -> AsyncIterator[GenerationDelta]:
        """The generator's stream, bounded by the generation stage budget and always closed upstream."""
        deadline = asyncio.get_running_loop().time() + self._settings.generation_timeout_s
        stream = self._generator.generate(request)
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        delta = await anext(stream)
                except StopAsyncIteration:
                    return
                except TimeoutError as exc:
                    raise LLMTimeout("generation") from exc
                yield delta
        finally:
            await stream.aclose()


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
