"""The pipeline: one admitted question in, a stream of domain events out (text deltas, citations, one Answer).

Each stage has its own module, inputs and outputs; this module only runs them in order, gives each its deadline
(`deadlines.RequestBudget`) and times them::

    history -> retrieve (a follow-up condensed first, and searched a second way) -> gate (score) -> read (does the
        evidence answer? a follow-up keeps the search read best) -> pack
        -> generate (with fallback) -> release -> validate (re-runs) -> assemble -> remember

What of the draft reaches the caller before the final answer is the stream policy's decision (release.py). Every
model call made for the answer is recorded in one `UsageLedger`, so that its usage and cost add up.

The question must already be admitted (validated, defaults applied: see `admission.Admission`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import replace

from ragsvc.answering import assemble
from ragsvc.answering.conversation import Conversation
from ragsvc.answering.deadlines import Clock, RequestBudget
from ragsvc.answering.gate import Gate
from ragsvc.answering.generate import Generated, GenerateStage
from ragsvc.answering.pack import Packer
from ragsvc.answering.read import Reading, ReadStage
from ragsvc.answering.release import release_for
from ragsvc.answering.retrieve import Retrieved, RetrieveStage, Searched
from ragsvc.answering.usage import UsageLedger
from ragsvc.answering.validate import ValidateStage
from ragsvc.citation_policy import resolve
from ragsvc.config import GenerationSettings, ServerSettings
from ragsvc.domain import (
    Action,
    Answer,
    Event,
    Question,
    RefusalReason,
    RouteTarget,
    ScoredChunk,
    TextDelta,
    Timings,
)
from ragsvc.prompts import Prompt, TemplateRegistry, get_prompt
from ragsvc.storage.owners import OwnerDirectory
from ragsvc.validation import AnswerPolicy, Verdict


class Pipeline:
    def __init__(
        self,
        *,
        retrieve: RetrieveStage,
        gate: Gate,
        read: ReadStage,
        packer: Packer,
        generate: GenerateStage,
        validate: ValidateStage,
        policy: AnswerPolicy,
        conversation: Conversation,
        owners: OwnerDirectory,
        templates: TemplateRegistry,
        server: ServerSettings,
        generation: GenerationSettings,
    ) -> None:
        self._retrieve = retrieve
        self._gate = gate
        self._read = read
        self._packer = packer
        self._generate = generate
        self._validate = validate
        self._policy = policy
        self._conversation = conversation
        self._owners = owners
        self._templates = templates
        self._total_timeout_s = server.total_timeout_s
        self._generation = generation

    async def run(self, question: Question, *, deadline: float | None = None) -> AsyncGenerator[Event, None]:
        """Answer an admitted `question`. `deadline` is the caller's, on the event loop's clock (None: it set
        none). The session's turn is stored before the final Answer is yielded (a unary caller stops reading
        there)."""
        clock = Clock()
        budget = RequestBudget.start(self._total_timeout_s, deadline)
        ledger = UsageLedger(self._generation.prices)
        turn = await self._conversation.begin(question)
        question = turn.question
        model = question.model or self._generation.chat_model
        prompt = get_prompt(
            question.template_id or self._generation.default_template,
            question.citation_style,
            question.strictness,
            self._templates,
            question.response_style,
        )
        retrieved = await self._retrieve.run(question, budget, ledger)
        reading_later: asyncio.Task[Reading] | None = None
        try:
            retrieved, read_first = await self._best_read(question, retrieved)
            retrieval = retrieved.retrieval
            retrieved_in = Timings(clock.lap(), embedding_ms=retrieval.embedding_ms, store_ms=retrieval.store_ms)

            search = retrieved.search.text
            refusal = self._gate.refusal(retrieval)
            if refusal is not None:
                answer = await self._refused(question, retrieved, refusal, prompt, retrieved_in, clock, ledger)
                await self._conversation.remember(turn, answer, retrieval)
                yield answer
                return
            reading = read_first
            if reading is None and (self._read.needed_first(question) or self._generate.reads_term_counts):
                reading = await self._read.run(question, search, retrieval.hits)
            # what the answer reads, cites and shows; unread, the question is read while the model writes
            evidence = self._read.unread(question, retrieval.hits) if reading is None else reading.evidence
            retrieval = replace(retrieval, hits=evidence)
            retrieved = replace(retrieved, retrieval=retrieval)
            if reading is not None and self._read.gates(question) and not reading.assessment.answerable:
                answer = await self._refused(
                    question,
                    retrieved,
                    RefusalReason.INSUFFICIENT_EVIDENCE,
                    prompt,
                    retrieved_in,
                    clock,
                    ledger,
                    text=reading.assessment.refusal_text(),
                )
                await self._conversation.remember(turn, answer, retrieval)
                yield answer
                return

            packing = self._packer.pack(model, prompt, question, retrieval.hits)
            budget_ms = clock.lap()
            if question.dry_run:
                timings = replace(retrieved_in, budget_ms=budget_ms, total_ms=clock.total())
                writer = self._generate.generators.generator.model_name(model)
                yield assemble.dry_run(question, retrieved, writer, packing, prompt, timings, ledger)
                return

            retrieved.classification.settle()  # the answer's generation starts now: the class is what arrived by now
            generation_deadline = budget.stage("generation", self._generation.timeout_s, "RAG_TIMEOUT_SECONDS")
            generated: Generated | None = None
            citations = resolve(question.citation_policy, prompt.template.citation_policy, self._generation.citation_policy)
            release = release_for(
                question.stream_policy or self._generation.stream_policy,
                prompt.citation_style,
                question.strictness,
                citations,
                attribute=self._generation.citation_attribution,
            )
            stream = self._generate.stream(
                question,
                search,
                prompt,
                retrieval.hits,
                packing,
                generation_deadline,
                clock,
                ledger,
                None if reading is None else reading.counts,
            )
            async with contextlib.aclosing(stream):  # a caller leaving closes the upstream LLM stream at once
                async for item in stream:
                    if isinstance(item, Generated):
                        generated = item
                    else:
                        for event in release.feed(item):
                            yield event
                        if reading_later is None and isinstance(item, TextDelta):
                            # What nothing read before generation (the gate off: the assessment; no pool either:
                            # the engine's term counts and the analysis) is made while the model writes the rest,
                            # once the first text is out: the caller asked for the next event (over gRPC, the first
                            # message's send completed; run before that, it held the first token back ~0.9 ms).
                            reading_later = asyncio.get_running_loop().create_task(
                                self._read_and_assess(question, search, retrieval.hits, reading)
                            )
            if generated is None:
                raise RuntimeError("generation ended without its result")
            for event in release.finish(complete=not generated.repetition_stopped):
                yield event
            generation_ms = clock.lap()

            if reading_later is None:  # no text came
                reading = await self._read_and_assess(question, search, retrieval.hits, reading)
            else:
                reading = await reading_later
            validated = await self._validate.run(
                question, search, prompt, generated, generation_deadline, ledger, reading, citations=citations
            )
            validation_ms = clock.lap()
            timings = replace(
                retrieved_in,
                budget_ms=budget_ms,
                generation_ms=generation_ms,
                first_token_ms=generated.first_token_ms,
                total_ms=clock.total(),
                validation_ms=validation_ms,
            )
            route = await self._route(validated.verdict)
            answer = assemble.answer(question, retrieved, generated, validated, route, prompt, timings, ledger)
            await self._conversation.remember(turn, answer, retrieval)
            yield answer
        finally:
            retrieved.classification.settle()  # a classification still running is not waited for
            if reading_later is not None and not reading_later.cancel() and not reading_later.cancelled():
                reading_later.exception()  # done: a failure of its own is not reported over the stream's

    async def _read_and_assess(
        self, question: Question, search: str, evidence: tuple[ScoredChunk, ...], reading: Reading | None
    ) -> Reading:
        """`reading`, or the reading of `evidence` made now, with its assessment made."""
        if reading is None:
            reading = await self._read.run(question, search, evidence)
        _assess(reading)
        return reading

    async def _best_read(self, question: Question, retrieved: Retrieved) -> tuple[Retrieved, Reading | None]:
        """A follow-up searched more than one way (`Retrieved.alternatives`): the search whose evidence passes the
        score gate and that the reader judges most likely to answer it (the first on a tie), with its reading;
        the first search, unread, when no other is offered or none passes."""
        if not retrieved.alternatives:
            return retrieved, None
        best: tuple[Searched, Reading] | None = None
        for searched in retrieved.options():
            if self._gate.refusal(searched.retrieval) is not None:
                continue
            reading = await self._read.run(question, searched.search.text, searched.retrieval.hits)
            if best is None or reading.assessment.score > best[1].assessment.score:
                best = (searched, reading)
        if best is None:
            return retrieved.chosen(retrieved.options()[0]), None
        return retrieved.chosen(best[0]), best[1]

    async def _refused(
        self,
        question: Question,
        retrieved: Retrieved,
        refusal: RefusalReason,
        prompt: Prompt,
        retrieved_in: Timings,
        clock: Clock,
        ledger: UsageLedger,
        *,
        text: str | None = None,
    ) -> Answer:
        """The answer of a question refused before generation, with the nearest evidence as its candidates."""
        retrieval = retrieved.retrieval
        refusal = assemble.refusal_reason(question, refusal)
        evidence = (retrieval.hits or retrieval.rejected)[: assemble.GATE_CANDIDATES]
        shown = assemble.refusal_text(question) if text is None else text
        verdict = self._policy.judge(shown, evidence, refusal=refusal)
        timings = replace(retrieved_in, total_ms=clock.total())
        return assemble.gate_refusal(
            question, retrieved, refusal, verdict, await self._route(verdict), prompt, timings, ledger, text=shown
        )

    async def _route(self, verdict: Verdict) -> RouteTarget | None:
        if verdict.action is not Action.ROUTE:
            return None
        return await self._owners.route(verdict.primary_tag, verdict.route_reason)


def _assess(reading: Reading) -> None:
    """Makes the reading's assessment now (should it fail, validation meets the failure when it reads it)."""
    with contextlib.suppress(Exception):
        _ = reading.assessment
