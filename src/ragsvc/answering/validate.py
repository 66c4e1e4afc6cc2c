"""The validate stage: judge the generated answer against its evidence (citations, grounding, coverage,
confidence, CITE/ROUTE), mitigate hallucinated markers with strict re-runs (R-003-18), and ask a model that
follows instructions for its support score and follow-up questions."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ragsvc.answering.deadlines import StageDeadline
from ragsvc.answering.generate import Generated, GenerateStage
from ragsvc.answering.pack import Packer
from ragsvc.answering.read import Reading
from ragsvc.answering.usage import UsageLedger
from ragsvc.budget import Packing
from ragsvc.config import GenerationSettings
from ragsvc.domain import CallPurpose, CitationStyle, Question, Strictness
from ragsvc.errors import RagError
from ragsvc.generation.fallback import Attempt
from ragsvc.judge import LLMJudge
from ragsvc.prompts import Prompt, TemplateRegistry, get_prompt
from ragsvc.reading import Reader
from ragsvc.validation import AnswerPolicy, Verdict, normalize_source_ids, strip_invalid_markers

_T = TypeVar("_T")
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Validated:
    """The answer's final text and verdict; `mitigated` when a hallucinated marker was dealt with (a strict
    re-run replaced the text, or the invalid markers were stripped); `repetition_stopped` when the guard stopped
    a looping re-run."""

    text: str
    verdict: Verdict
    mitigated: bool
    follow_ups: tuple[str, ...] = ()
    repetition_stopped: bool = False


class ValidateStage:
    def __init__(
        self,
        reader: Reader,
        policy: AnswerPolicy,
        generate: GenerateStage,
        packer: Packer,
        templates: TemplateRegistry,
        settings: GenerationSettings,
    ) -> None:
        self._reader = reader
        self._policy = policy
        self._generate = generate
        self._packer = packer
        self._templates = templates
        self._settings = settings

    async def run(
        self,
        question: Question,
        search: str,
        prompt: Prompt,
        generated: Generated,
        deadline: StageDeadline,
        ledger: UsageLedger,
        reading: Reading,
    ) -> Validated:
        """An answer citing unknown markers is regenerated with the strict prompt (not streamed: the final
        answer is authoritative) up to RAG_MAX_RETRIES_ON_HALLUCINATION times; if no run is clean, the invalid
        markers are stripped and a disclaimer added, and the answer stays ungrounded. The answer is judged by the
        reader with the question's `reading` (see `AnswerPolicy.judge`)."""
        attempt, text = generated.attempt, generated.text
        verdict = await self._verdict(
            question, prompt, attempt, generated.packing, text, deadline, ledger, reading
        )
        mitigated = looped = False
        if verdict.invalid_markers:
            text, verdict, looped = await self._mitigated(
                question, search, prompt, generated, verdict, deadline, ledger, reading
            )
            mitigated = True
        follow_ups = await self._follow_ups(question, attempt, text, verdict, deadline, ledger)
        return Validated(text, verdict, mitigated, follow_ups, looped)

    async def _mitigated(
        self,
        question: Question,
        search: str,
        prompt: Prompt,
        generated: Generated,
        verdict: Verdict,
        deadline: StageDeadline,
        ledger: UsageLedger,
        reading: Reading,
    ) -> tuple[str, Verdict, bool]:
        """The text and verdict after mitigation, and whether a re-run was stopped looping."""
        attempt = generated.attempt
        strict = get_prompt(prompt.template.version, prompt.citation_style, Strictness.STRICT, self._templates)
        looped = False
        for _ in range(self._settings.hallucination_retries):
            packing = self._packer.pack(attempt.model, strict, question, generated.packing.context)
            request = self._generate.request(question, search, attempt.model, packing, reading.counts)
            rerun = await self._generate.complete(attempt, packing, request, deadline, ledger)
            looped = looped or rerun.repetition_stopped
            rerun_verdict = await self._verdict(question, strict, attempt, packing, rerun.text, deadline, ledger, reading)
            if not rerun_verdict.invalid_markers:
                return rerun.text, rerun_verdict, looped
        marked = _markers_of(prompt, generated.text, generated.packing)
        return strip_invalid_markers(marked, verdict.invalid_markers), verdict, looped

    async def _verdict(
        self,
        question: Question,
        prompt: Prompt,
        attempt: Attempt,
        packing: Packing,
        text: str,
        deadline: StageDeadline,
        ledger: UsageLedger,
        reading: Reading,
    ) -> Verdict:
        judged = _markers_of(prompt, text, packing)
        strict = question.strictness is Strictness.STRICT
        judgement = self._reader.judge(reading.analysis, judged, packing.context)
        answerability = reading.assessment.score
        verdict = self._policy.judge(
            judged, packing.context, strict=strict, judgement=judgement, answerability=answerability
        )
        if not verdict.grounded or not self._settings.llm_self_score or not _judges(attempt):
            return verdict
        score = await _ask(
            attempt, deadline, ledger, CallPurpose.SELF_SCORE,
            lambda judge: judge.support_score(question.query, text, packing.context),
        )
        if score is None:
            return verdict
        return self._policy.judge(
            judged, packing.context, llm_score=score, strict=strict, judgement=judgement, answerability=answerability
        )

    async def _follow_ups(
        self,
        question: Question,
        attempt: Attempt,
        text: str,
        verdict: Verdict,
        deadline: StageDeadline,
        ledger: UsageLedger,
    ) -> tuple[str, ...]:
        """Follow-up questions from the model, for a grounded answer."""
        count = self._settings.follow_up_count if question.follow_up_count is None else question.follow_up_count
        if not count or not verdict.grounded or not _judges(attempt):
            return ()
        follow_ups = await _ask(
            attempt, deadline, ledger, CallPurpose.FOLLOW_UPS, lambda judge: judge.follow_ups(question.query, text, count)
        )
        return follow_ups or ()


def _judges(attempt: Attempt) -> bool:
    return attempt.generator.capabilities.follows_instructions


async def _ask(
    attempt: Attempt,
    deadline: StageDeadline,
    ledger: UsageLedger,
    purpose: CallPurpose,
    ask: Callable[[LLMJudge], Awaitable[_T]],
) -> _T | None:
    """An auxiliary call to the answering model, within the stage's deadline, its usage recorded for `purpose`;
    None when it fails (the answer is already written: a failing extra must not fail it)."""
    judge = LLMJudge(
        attempt.generator,
        model=attempt.model,
        on_usage=lambda usage: ledger.record(purpose, attempt.generator, attempt.model, usage),
    )
    try:
        async with asyncio.timeout_at(deadline.at):
            return await ask(judge)
    except (RagError, TimeoutError) as exc:
        _log.warning("auxiliary LLM call failed, using defaults: %s", exc)
        return None


def _markers_of(prompt: Prompt, text: str, packing: Packing) -> str:
    """`text` with its citations as [#n] markers, whatever the prompt's citation style (what is judged)."""
    if prompt.citation_style is CitationStyle.SOURCE_ID:
        return normalize_source_ids(text, packing.context)
    return text
