"""The validate stage: judge the generated answer against its evidence (citations, grounding, coverage,
confidence, CITE/ROUTE) once each unmarked sentence has the marker of the chunk that clearly supports it (when
RAG_CITATION_ATTRIBUTION is on: citation_policy.Attributor), deal with invalid citations by the request's citation
policy (citation_policy.py: drop the sentences they back, or re-run strictly: R-003-18), then, once the answer's
text is final, ask a model that follows instructions for its support score and its follow-up questions, both at
once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from ragsvc.answering.deadlines import StageDeadline
from ragsvc.answering.generate import Generated, GenerateStage
from ragsvc.answering.pack import Packer
from ragsvc.answering.read import Reading
from ragsvc.answering.usage import UsageLedger
from ragsvc.budget import Packing
from ragsvc.citation_policy import Markers, attribute, drop_invalid
from ragsvc.config import GenerationSettings
from ragsvc.domain import CallPurpose, CitationPolicy, CitationStyle, Question, Strictness
from ragsvc.errors import RagError
from ragsvc.generation.fallback import Attempt
from ragsvc.judge import LLMJudge
from ragsvc.prompts import Prompt, TemplateRegistry, get_prompt
from ragsvc.reading import Judgement, Reader
from ragsvc.validation import AnswerPolicy, Verdict, normalize_source_ids, strip_invalid_markers

_T = TypeVar("_T")
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Validated:
    """The answer's final text and verdict; `mitigated` when an invalid citation was dealt with (a strict re-run
    replaced the text, the invalid markers were stripped, or the sentences they backed were dropped: then also
    `citations_dropped`); `repetition_stopped` when the guard stopped a looping re-run; `citations_attributed` when
    a sentence the model wrote without a marker was given one (citation_policy.Attributor)."""

    text: str
    verdict: Verdict
    mitigated: bool
    follow_ups: tuple[str, ...] = ()
    repetition_stopped: bool = False
    citations_dropped: bool = False
    citations_attributed: bool = False


@dataclass(frozen=True, slots=True)
class _Settled:
    """A text without invalid citations left to deal with, its verdict (and the reader's judgement in it), and the
    packing it was written over."""

    text: str
    verdict: Verdict
    packing: Packing
    judgement: Judgement | None
    looped: bool = False
    dropped: bool = False
    attributed: bool = False


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
        *,
        citations: CitationPolicy = CitationPolicy.STRICT,
    ) -> Validated:
        """An answer citing unknown markers keeps, under DROP_INVALID, its validly cited sentences when a claim is
        among them. Otherwise it is regenerated with the strict prompt (not streamed: the final answer is
        authoritative) up to RAG_MAX_RETRIES_ON_HALLUCINATION times; if no run is clean, the invalid markers are
        stripped and a disclaimer added, and the answer stays ungrounded. Each answer is judged by the reader with the
        question's `reading` (see `AnswerPolicy.judge`)."""
        text, attributed = self._attributed(prompt, generated.packing, generated.text)
        draft, judgement = self._judged(question, prompt, generated.packing, text, reading)
        settled = _Settled(text, draft, generated.packing, judgement, attributed=attributed)
        if draft.invalid_markers:
            dropped = None
            if citations is CitationPolicy.DROP_INVALID:
                dropped = self._dropped(question, prompt, generated.packing, text, reading, attributed)
            settled = dropped or await self._rerun(
                question, search, prompt, generated, draft, deadline, ledger, citations, reading
            )
        verdict, follow_ups = await self._side_calls(question, prompt, generated.attempt, settled, deadline, ledger, reading)
        return Validated(
            settled.text,
            verdict,
            mitigated=bool(draft.invalid_markers),
            follow_ups=follow_ups,
            repetition_stopped=settled.looped,
            citations_dropped=settled.dropped,
            citations_attributed=settled.attributed and settled.verdict.grounded,
        )

    def _attributed(self, prompt: Prompt, packing: Packing, text: str) -> tuple[str, bool]:
        """`text` with its supported unmarked sentences marked (with attribution on), and whether any was."""
        if not self._settings.citation_attribution:
            return text, False
        marked, count = attribute(text, Markers(packing.context, prompt.citation_style))
        return marked, count > 0

    def _dropped(
        self, question: Question, prompt: Prompt, packing: Packing, text: str, reading: Reading, attributed: bool
    ) -> _Settled | None:
        """`text` without the sentences backed only by invalid markers, when a valid cited claim remains."""
        kept = drop_invalid(text, Markers(packing.context, prompt.citation_style), question.request_id).text
        verdict, judgement = self._judged(question, prompt, packing, kept, reading)
        return _Settled(kept, verdict, packing, judgement, dropped=True, attributed=attributed) if verdict.grounded else None

    async def _rerun(
        self,
        question: Question,
        search: str,
        prompt: Prompt,
        generated: Generated,
        verdict: Verdict,
        deadline: StageDeadline,
        ledger: UsageLedger,
        citations: CitationPolicy,
        reading: Reading,
    ) -> _Settled:
        """The first strict re-run without invalid citations (under DROP_INVALID: with a valid claim left once they
        are dropped); else the draft with its invalid markers stripped, ungrounded."""
        attempt = generated.attempt
        strict = get_prompt(prompt.template.version, prompt.citation_style, Strictness.STRICT, self._templates)
        looped = False
        for _ in range(self._settings.hallucination_retries):
            packing = self._packer.pack(attempt.model, strict, question, generated.packing.context)
            request = self._generate.request(question, search, attempt.model, packing, strict, deadline, reading.counts)
            rerun = await self._generate.complete(attempt, packing, request, deadline, ledger)
            looped = looped or rerun.repetition_stopped
            text, attributed = self._attributed(strict, packing, rerun.text)
            rerun_verdict, judgement = self._judged(question, strict, packing, text, reading)
            if not rerun_verdict.invalid_markers:
                return _Settled(text, rerun_verdict, packing, judgement, looped, attributed=attributed)
            if citations is CitationPolicy.DROP_INVALID:
                dropped = self._dropped(question, strict, packing, text, reading, attributed)
                if dropped is not None:
                    return replace(dropped, looped=looped)
        marked = _markers_of(prompt, generated.text, generated.packing)
        return _Settled(strip_invalid_markers(marked, verdict.invalid_markers), verdict, generated.packing, None, looped)

    def _judged(
        self,
        question: Question,
        prompt: Prompt,
        packing: Packing,
        text: str,
        reading: Reading,
        llm_score: float | None = None,
        judgement: Judgement | None = None,
    ) -> tuple[Verdict, Judgement]:
        """The verdict on `text` and the reader's judgement in it (`judgement`: the reader's of this text, already
        made), weighed with a model's own `llm_score` when given."""
        judged = _markers_of(prompt, text, packing)
        if judgement is None:
            judgement = self._reader.judge(reading.analysis, judged, packing.context)
        verdict = self._policy.judge(
            judged,
            packing.context,
            strict=question.strictness is Strictness.STRICT,
            judgement=judgement,
            answerability=reading.assessment.score,
            llm_score=llm_score,
        )
        return verdict, judgement

    async def _side_calls(
        self,
        question: Question,
        prompt: Prompt,
        attempt: Attempt,
        settled: _Settled,
        deadline: StageDeadline,
        ledger: UsageLedger,
        reading: Reading,
    ) -> tuple[Verdict, tuple[str, ...]]:
        """For a grounded answer whose text is final, the model's support score (the verdict judged again with
        it) and follow-up questions, asked at once; each left out when it fails."""
        verdict = settled.verdict
        count = self._settings.follow_up_count if question.follow_up_count is None else question.follow_up_count
        scoring = self._settings.llm_self_score
        if not (scoring or count) or not verdict.grounded or not attempt.generator.capabilities.follows_instructions:
            return verdict, ()  # nothing to ask: no tasks to gather (two loop turns)
        score, follow_ups = await asyncio.gather(
            _ask(
                attempt,
                deadline,
                ledger,
                CallPurpose.SELF_SCORE,
                lambda judge: judge.support_score(question.query, settled.text, settled.packing.context),
            )
            if scoring
            else _nothing(),
            _ask(
                attempt,
                deadline,
                ledger,
                CallPurpose.FOLLOW_UPS,
                lambda judge: judge.follow_ups(question.query, settled.text, count),
            )
            if count
            else _nothing(),
        )
        if score is not None:  # judged again with the score; the reader's judgement of the text stands
            verdict, _ = self._judged(
                question, prompt, settled.packing, settled.text, reading, llm_score=score, judgement=settled.judgement
            )
        return verdict, follow_ups or ()


async def _nothing() -> None:
    return None


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
        deadline=deadline.at,
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
