"""The generate stage: stream the answer from the first step of the fallback chain that works (see
generation/fallback.py), forwarding text and citations as they come; the stream's last item is `Generated`.

Every generation is watched by the repetition guard (generation/repetition.py): a model that loops is stopped at
once, its upstream stream closed, and the repeats left out of the text."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from ragsvc.answering.deadlines import Clock, StageDeadline
from ragsvc.answering.pack import Packer
from ragsvc.answering.usage import UsageLedger
from ragsvc.budget import ModelCatalog, Packing
from ragsvc.config import GenerationSettings
from ragsvc.domain import (
    CallPurpose,
    Citation,
    CitationStyle,
    GenerationDelta,
    GenerationRequest,
    Question,
    ScoredChunk,
    TermCounts,
    TextDelta,
    Usage,
)
from ragsvc.errors import RagError
from ragsvc.generation.fallback import Attempt, FallbackChain, worth_another_model
from ragsvc.generation.repetition import RepetitionGuard, without_repeats
from ragsvc.prompts import Prompt
from ragsvc.validation import MarkerScanner, citation_for

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Drafting:
    """An attempt starts writing over `context` (marker n cites context[n - 1]); it comes before its text."""

    context: tuple[ScoredChunk, ...]


@dataclass(frozen=True, slots=True)
class Generated:
    """What generation produced: the text, which step of the chain wrote it, with which packing;
    `repetition_stopped` when the guard stopped a loop (the repeats are not in `text`)."""

    text: str
    attempt: Attempt
    packing: Packing
    usage: Usage
    first_token_ms: float
    repetition_stopped: bool = False


@dataclass(frozen=True, slots=True)
class Completion:
    """The whole text of one generation that was not streamed (a strict re-run)."""

    text: str
    repetition_stopped: bool


class GenerateStage:
    def __init__(self, generators: FallbackChain, packer: Packer, models: ModelCatalog, settings: GenerationSettings) -> None:
        self.generators = generators
        self._packer = packer
        self._models = models
        self._settings = settings

    @property
    def reads_term_counts(self) -> bool:
        """Whether a step of the chain reads the question's corpus statistics (the extractive generator): then
        the question is read before generation starts."""
        steps = (self.generators.generator, self.generators.extractive)
        return any(step is not None and step.capabilities.reads_term_counts for step in steps)

    async def stream(
        self,
        question: Question,
        search: str,
        prompt: Prompt,
        evidence: tuple[ScoredChunk, ...],
        packing: Packing,
        deadline: StageDeadline,
        clock: Clock,
        ledger: UsageLedger,
        counts: TermCounts | None = None,
    ) -> AsyncGenerator[Drafting | TextDelta | Citation | Generated, None]:
        """For each attempt a `Drafting`, then its text deltas and the citations their markers complete; at the
        end one `Generated`. A step that fails before its first delta hands over to the next (when the failure is
        worth another model); once text went out, a failure ends the stream with that error."""
        model = question.model or self._settings.chat_model
        packings = {model: packing}
        attempts = self.generators.attempts(model)
        primary_error: RagError | None = None
        for attempt in attempts:
            parts: list[str] = []
            try:
                if attempt.model not in packings:  # a fallback model may have a smaller window: pack for it
                    packings[attempt.model] = self._packer.pack(attempt.model, prompt, question, evidence)
                packing = packings[attempt.model]
                scanner = _scanner(prompt, packing)
                guard = RepetitionGuard()
                reported: Usage | None = None
                first_token_ms = 0.0
                request = self.request(question, search, attempt.model, packing, prompt, deadline, counts)
                yield Drafting(packing.context)
                async with contextlib.aclosing(self.attempt_stream(attempt, request, deadline, guard)) as deltas:
                    async for delta in deltas:
                        reported = delta.usage or reported
                        if not delta.text:
                            continue
                        if not parts:
                            first_token_ms = clock.total()
                        parts.append(delta.text)
                        yield TextDelta(delta.text)
                        for marker in scanner.feed(delta.text):
                            if (citation := citation_for(marker, packing.context)) is not None:
                                yield citation
                text = "".join(parts)
                usage = self._usage(reported, attempt.model, packing, text)
                ledger.record(CallPurpose.ANSWER, attempt.generator, attempt.model, usage)
                if guard.tripped:
                    text = without_repeats(text)
                yield Generated(text, attempt, packing, usage, first_token_ms, guard.tripped)
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

    async def complete(
        self,
        attempt: Attempt,
        packing: Packing,
        request: GenerationRequest,
        deadline: StageDeadline,
        ledger: UsageLedger,
    ) -> Completion:
        """The whole text of one generation over `packing`, not streamed (a strict re-run)."""
        guard = RepetitionGuard()
        reported: Usage | None = None
        parts: list[str] = []
        async with contextlib.aclosing(self.attempt_stream(attempt, request, deadline, guard)) as deltas:
            async for delta in deltas:
                reported = delta.usage or reported
                parts.append(delta.text)
        text = "".join(parts)
        ledger.record(CallPurpose.RERUN, attempt.generator, attempt.model, self._usage(reported, attempt.model, packing, text))
        return Completion(without_repeats(text) if guard.tripped else text, guard.tripped)

    def _usage(self, reported: Usage | None, model: str, packing: Packing, text: str) -> Usage:
        """The usage the server reported; for a stream closed before it reported any (the guard stopped it), the
        prompt's and the text's tokens counted here."""
        if reported is not None:
            return reported
        if not text:
            return Usage()
        return Usage(packing.prompt_tokens, self._models.budget(model).count(text))

    def request(
        self,
        question: Question,
        search: str,
        model: str,
        packing: Packing,
        prompt: Prompt,
        deadline: StageDeadline,
        counts: TermCounts | None = None,
    ) -> GenerationRequest:
        """What `model` is asked to write over `packing`: it stops at the template's stop sequences; `counts` are
        the corpus statistics the question was read with (the extractive generator reads it again)."""
        return GenerationRequest(
            messages=packing.messages,
            query=search,
            context=packing.context,
            model=model,
            max_tokens=self._models.limits(model).max_response_tokens,
            temperature=self._settings.temperature if question.temperature is None else question.temperature,
            seed=question.seed,
            question=question.query if search != question.query else "",
            stop=prompt.template.stop,
            deadline=deadline.at,
            term_counts=counts,
        )

    @staticmethod
    async def attempt_stream(
        attempt: Attempt, request: GenerationRequest, deadline: StageDeadline, guard: RepetitionGuard
    ) -> AsyncGenerator[GenerationDelta, None]:
        """The attempt's stream (after checking its model is served; a burst of tokens comes as one delta), bounded
        by the stage's deadline, ended when `guard` sees a loop, and always closed upstream."""
        async with deadline.bound():
            await attempt.generator.ensure_available(attempt.model)
        async with contextlib.aclosing(attempt.generator.generate(request)) as stream:
            while True:
                try:
                    async with deadline.bound():
                        delta = await anext(stream)
                except StopAsyncIteration:
                    return
                yield delta
                if guard.feed(delta.text):
                    return  # a loop: leaving closes the upstream stream


def _scanner(prompt: Prompt, packing: Packing) -> MarkerScanner:
    """Finds the citation markers of the prompt's style as the answer streams."""
    if prompt.citation_style is CitationStyle.SOURCE_ID:
        return MarkerScanner(source_ids=[scored.chunk.source_id for scored in packing.context])
    return MarkerScanner()
