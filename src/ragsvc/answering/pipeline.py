"""The pipeline: one admitted question in, a stream of domain events out (text deltas, citations, one Answer).

Each stage has its own module, inputs and outputs; this module only runs them in order, gives each its deadline
(`deadlines.RequestBudget`) and times them::

    history -> retrieve -> gate (score, then answerability) -> pack -> generate (with fallback)
        -> validate (re-runs) -> assemble -> remember

The question must already be admitted (validated, defaults applied: see `admission.Admission`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

from ragsvc.answering import assemble
from ragsvc.answering.answerability import AnswerabilityGate
from ragsvc.answering.conversation import Conversation
from ragsvc.answering.deadlines import Clock, RequestBudget
from ragsvc.answering.gate import Gate
from ragsvc.answering.generate import Generated, GenerateStage
from ragsvc.answering.pack import Packer
from ragsvc.answering.retrieve import RetrieveStage
from ragsvc.answering.validate import ValidateStage
from ragsvc.config import GenerationSettings, RetrievalSettings, ServerSettings
from ragsvc.domain import Action, Event, Mode, Question, RefusalReason, RouteTarget, Timings
from ragsvc.prompts import TemplateRegistry, get_prompt
from ragsvc.storage.owners import OwnerDirectory
from ragsvc.validation import AnswerPolicy, Verdict


class Pipeline:
    def __init__(
        self,
        *,
        retrieve: RetrieveStage,
        gate: Gate,
        answerability: AnswerabilityGate | None,
        packer: Packer,
        generate: GenerateStage,
        validate: ValidateStage,
        policy: AnswerPolicy,
        conversation: Conversation,
        owners: OwnerDirectory,
        templates: TemplateRegistry,
        server: ServerSettings,
        retrieval: RetrievalSettings,
        generation: GenerationSettings,
    ) -> None:
        self._retrieve = retrieve
        self._gate = gate
        self._answerability = answerability
        self._packer = packer
        self._generate = generate
        self._validate = validate
        self._policy = policy
        self._conversation = conversation
        self._owners = owners
        self._templates = templates
        self._total_timeout_s = server.total_timeout_s
        self._retrieval_timeout_s = retrieval.retrieval_timeout_s
        self._generation = generation

    async def run(self, question: Question, *, deadline: float | None = None) -> AsyncGenerator[Event, None]:
        """Answer an admitted `question`. `deadline` is the caller's, on the event loop's clock (None: it set
        none). The session's turn is stored before the final Answer is yielded (a unary caller stops reading
        there)."""
        clock = Clock()
        budget = RequestBudget.start(self._total_timeout_s, deadline)
        question = await self._conversation.with_history(question)
        model = question.model or self._generation.chat_model
        prompt = get_prompt(
            question.template_id or self._generation.default_template,
            question.citation_style,
            question.strictness,
            self._templates,
        )
        retrieval_deadline = budget.stage("retrieval", self._retrieval_timeout_s, "RAG_RETRIEVAL_TIMEOUT_SECONDS")
        retrieved = await self._retrieve.run(question, retrieval_deadline)
        retrieval = retrieved.retrieval
        retrieval_ms = clock.lap()

        refusal = self._gate.refusal(retrieval)
        if refusal is not None and question.mode is Mode.SELECTED_TEXT:
            refusal = RefusalReason.NOT_IN_SELECTION  # seed 001: the selection holds no answer
        text = assemble.refusal_text(question)
        if refusal is None and self._answerability is not None and question.mode is not Mode.SELECTED_TEXT:
            assessment = await self._answerability.assess(question, retrieved.search, retrieval.hits)
            if not assessment.answerable:
                refusal, text = RefusalReason.INSUFFICIENT_EVIDENCE, assessment.refusal_text()
        if refusal is not None:
            evidence = (retrieval.hits or retrieval.rejected)[: assemble.GATE_CANDIDATES]
            verdict = self._policy.judge(text, evidence, refusal=refusal)
            timings = Timings(retrieval_ms, total_ms=clock.total(), embedding_ms=retrieval.embedding_ms)
            answer = assemble.gate_refusal(
                question, retrieved, refusal, verdict, await self._route(verdict), prompt, timings, text=text
            )
            await self._conversation.remember(question, answer, retrieval)
            yield answer
            return

        packing = self._packer.pack(model, prompt, question, retrieval.hits)
        budget_ms = clock.lap()
        if question.dry_run:
            timings = Timings(retrieval_ms, budget_ms, total_ms=clock.total(), embedding_ms=retrieval.embedding_ms)
            writer = self._generate.generators.generator.model_name(model)
            yield assemble.dry_run(question, writer, packing, prompt, timings)
            return

        generation_deadline = budget.stage("generation", self._generation.timeout_s, "RAG_TIMEOUT_SECONDS")
        generated: Generated | None = None
        stream = self._generate.stream(
            question, retrieved.search, prompt, retrieval.hits, packing, generation_deadline, clock
        )
        async with contextlib.aclosing(stream):  # a caller leaving closes the upstream LLM stream at once
            async for item in stream:
                if isinstance(item, Generated):
                    generated = item
                else:
                    yield item
        if generated is None:
            raise RuntimeError("generation ended without its result")
        generation_ms = clock.lap()

        validated = await self._validate.run(question, retrieved.search, prompt, generated, generation_deadline)
        validation_ms = clock.lap()
        timings = Timings(
            retrieval_ms=retrieval_ms,
            budget_ms=budget_ms,
            generation_ms=generation_ms,
            first_token_ms=generated.first_token_ms,
            total_ms=clock.total(),
            embedding_ms=retrieval.embedding_ms,
            validation_ms=validation_ms,
        )
        route = await self._route(validated.verdict)
        answer = assemble.answer(
            question, retrieved, generated, validated, route, prompt, timings, self._generation.prices
        )
        await self._conversation.remember(question, answer, retrieval)
        yield answer

    async def _route(self, verdict: Verdict) -> RouteTarget | None:
        if verdict.action is not Action.ROUTE:
            return None
        return await self._owners.route(verdict.primary_tag, verdict.route_reason)
