"""The assemble stage: the final Answer, from what the stages produced. Pure: no I/O.

A refused answer's text is the refusal (R-001-07's sentence in selected-text mode), never the model's draft: the
draft is kept in `Answer.draft` (the audit log, and `explanation.draft` when the caller asked to explain)."""

from __future__ import annotations

from ragsvc.answering.generate import Generated
from ragsvc.answering.retrieve import Retrieved
from ragsvc.answering.usage import UsageLedger
from ragsvc.answering.validate import Validated
from ragsvc.budget import Packing
from ragsvc.domain import (
    Answer,
    Citation,
    CitationStyle,
    Explanation,
    Flags,
    Mode,
    Question,
    RefusalReason,
    RouteTarget,
    Timings,
)
from ragsvc.prompts import Prompt, refusal_sentence, sources_list
from ragsvc.retrieval.selection import not_in_selection_message
from ragsvc.validation import Verdict

GATE_CANDIDATES = 3


def refusal_text(question: Question) -> str:
    """What a refusal says: R-001-07's sentence in selected-text mode, the refusal sentence (in the question's
    language when a wording has it: R-003-04) otherwise."""
    if question.mode is Mode.SELECTED_TEXT:
        return not_in_selection_message(question.query)
    return refusal_sentence(question.language)


def with_sources_list(text: str, citations: tuple[Citation, ...], style: CitationStyle) -> str:
    """`text` with the list of its cited sources after it in the END_LIST citation style (R-003-11)."""
    listed = sources_list(citations) if style is CitationStyle.END_LIST else ""
    return f"{text}\n\n{listed}" if listed else text


def refusal_reason(question: Question, reason: RefusalReason) -> RefusalReason:
    """`reason` as reported: in selected-text mode, finding nothing or no supported answer means the selection
    does not hold the answer (R-001-07)."""
    unanswered = (RefusalReason.NO_CHUNKS, RefusalReason.SCORE_GATE, RefusalReason.UNSUPPORTED_ANSWER)
    if question.mode is Mode.SELECTED_TEXT and reason in unanswered:
        return RefusalReason.NOT_IN_SELECTION
    return reason


def gate_refusal(
    question: Question,
    retrieved: Retrieved,
    refusal: RefusalReason,
    verdict: Verdict,
    route: RouteTarget | None,
    prompt: Prompt,
    timings: Timings,
    ledger: UsageLedger,
    *,
    text: str | None = None,
) -> Answer:
    """The answer when the gate refuses: no model wrote it (one may have condensed or classified the question);
    the nearest candidates when there were some. `text` replaces the refusal sentence (the answerability gate names
    what the documents do not cover). Explained, it shows no prompt, what was searched, and as packed the evidence
    the reader read before it refused (INSUFFICIENT_EVIDENCE: `retrieved` holds what it read); nothing for the
    score gate's refusals, which read nothing."""
    retrieval = retrieved.retrieval
    candidates = (retrieval.hits or retrieval.rejected)[:GATE_CANDIDATES]
    read = retrieval.hits if refusal is RefusalReason.INSUFFICIENT_EVIDENCE else ()
    return Answer(
        text=refusal_text(question) if text is None else text,
        confidence=verdict.confidence,
        action=verdict.action,
        route=route,
        refusal=refusal,
        candidates=candidates if refusal is not RefusalReason.NO_CHUNKS else (),
        usage=ledger.usage,
        template_version=prompt.version,
        timings=timings,
        flags=Flags(redactions_applied=retrieval.redactions_applied),
        request_id=question.request_id,
        retrieval_scores=tuple(hit.score for hit in retrieval.hits),
        query_class=retrieved.query_class,
        cost_estimate_usd=ledger.cost_estimate_usd,
        search=retrieved.search,
        model_usage=ledger.by_purpose(),
        explanation=Explanation((), read, 0) if question.explain else None,
    )


def dry_run(
    question: Question,
    retrieved: Retrieved,
    model: str,
    packing: Packing,
    prompt: Prompt,
    timings: Timings,
    ledger: UsageLedger,
) -> Answer:
    """What a dry run reports: the prompt that would be sent, and nothing generated."""
    return Answer(
        text="",
        model=model,
        usage=ledger.usage,
        context_chunks_used=len(packing.context),
        context_tokens_used=packing.context_tokens,
        template_version=prompt.version,
        timings=timings,
        request_id=question.request_id,
        explanation=_explanation(packing),
        cost_estimate_usd=ledger.cost_estimate_usd,
        search=retrieved.search,
        model_usage=ledger.by_purpose(),
    )


def answer(
    question: Question,
    retrieved: Retrieved,
    generated: Generated,
    validated: Validated,
    route: RouteTarget | None,
    prompt: Prompt,
    timings: Timings,
    ledger: UsageLedger,
) -> Answer:
    verdict, attempt, packing = validated.verdict, generated.attempt, generated.packing
    refused = not verdict.grounded
    return Answer(
        text=refusal_text(question) if refused else with_sources_list(validated.text, verdict.citations, prompt.citation_style),
        citations=() if refused else verdict.citations,
        confidence=verdict.confidence,
        action=verdict.action,
        route=route,
        grounded=verdict.grounded,
        refusal=refusal_reason(question, verdict.refusal),
        model=attempt.generator.model_name(attempt.model),
        usage=ledger.usage,
        timings=timings,
        context_chunks_used=len(packing.context),
        context_tokens_used=packing.context_tokens,
        template_version=prompt.version,
        follow_up_questions=validated.follow_ups,
        flags=Flags(
            hallucination_detected=bool(verdict.invalid_markers) or validated.mitigated,
            mitigation_applied=validated.mitigated,
            degraded=attempt.degraded,
            redactions_applied=retrieved.retrieval.redactions_applied,
            partial=verdict.partial,
            repetition_stopped=generated.repetition_stopped or validated.repetition_stopped,
            citations_dropped=validated.citations_dropped,
            citations_attributed=validated.citations_attributed,
        ),
        request_id=question.request_id,
        explanation=_explanation(packing) if question.explain else None,
        retrieval_scores=tuple(hit.score for hit in retrieved.retrieval.hits),
        query_class=retrieved.query_class,
        cost_estimate_usd=ledger.cost_estimate_usd,
        search=retrieved.search,
        draft=validated.text if refused else "",
        model_usage=ledger.by_purpose(),
    )


def _explanation(packing: Packing) -> Explanation:
    return Explanation(packing.messages, packing.context, packing.prompt_tokens)
