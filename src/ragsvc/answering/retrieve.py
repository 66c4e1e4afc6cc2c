"""The retrieve stage: classify the question, decide what to search for (a follow-up as a standalone question:
see conversation.py), and search (or, in selected-text mode, score the caller's selection) within the stage's
deadline.

A follow-up that the rule let stand as asked ("How long is the grace period?" names its own subject) but that finds
no evidence the gate lets through is searched a second time, after the earlier questions' subject: it was a
follow-up after all ("What happens on SIGTERM?" came before)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from ragsvc.answering.conversation import Condenser
from ragsvc.answering.deadlines import RequestBudget
from ragsvc.answering.gate import Gate
from ragsvc.answering.usage import UsageLedger
from ragsvc.config import RetrievalSettings
from ragsvc.domain import (
    CallPurpose,
    Mode,
    QueryClass,
    QueryRewrite,
    Question,
    Retrieval,
    RetrievalQuery,
    SearchQuery,
)
from ragsvc.errors import RagError
from ragsvc.generation.base import Generator
from ragsvc.judge import LLMJudge
from ragsvc.reading import Reader
from ragsvc.retrieval.base import Retriever

CLASSIFY_TIMEOUT_S = 2.0
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Retrieved:
    """What the retrieve stage found: `search` is what was searched for (the extractive generator matches
    sentences against its text too)."""

    retrieval: Retrieval
    search: SearchQuery
    query_class: QueryClass


class QueryClassifier:
    """The question's class (R-000-14): by the model when it follows instructions and `by_model` is on, else
    (and whenever that call fails) by rules."""

    def __init__(self, generator: Generator, reader: Reader, *, default_model: str, by_model: bool) -> None:
        self._generator = generator
        self._reader = reader
        self._default_model = default_model
        self.by_model = by_model and generator.capabilities.follows_instructions

    async def classify(self, question: Question, ledger: UsageLedger) -> QueryClass:
        if self.by_model:
            model = question.model or self._default_model
            judge = LLMJudge(
                self._generator,
                model=model,
                on_usage=lambda usage: ledger.record(CallPurpose.CLASSIFY, self._generator, model, usage),
            )
            try:
                async with asyncio.timeout(CLASSIFY_TIMEOUT_S):
                    by_model = await judge.classify(question.query)
            except (RagError, TimeoutError) as exc:
                _log.warning("LLM classification failed, classifying by rules: %s", exc)
                by_model = None
            if by_model is not None:
                return by_model
        return self._reader.classify(question.query, question.chat_history)


class RetrieveStage:
    def __init__(
        self,
        retriever: Retriever,
        reader: Reader,
        classifier: QueryClassifier,
        condenser: Condenser,
        gate: Gate,
        settings: RetrievalSettings,
    ) -> None:
        self._retriever = retriever
        self._reader = reader
        self._classifier = classifier
        self._condenser = condenser
        self._gate = gate
        self._settings = settings

    async def run(self, question: Question, budget: RequestBudget, ledger: UsageLedger) -> Retrieved:
        """Condense and classify (side by side when the classifier asks the model: both may), then search by the
        retrieval stage's deadline."""
        if self._classifier.by_model:
            search, query_class = await asyncio.gather(
                self._condenser.search_for(question, budget, ledger), self._classifier.classify(question, ledger)
            )
        else:  # by rules, at once: two tasks and their loop turns would cost more than the rules (~0.1 ms)
            search = await self._condenser.search_for(question, budget, ledger)
            query_class = await self._classifier.classify(question, ledger)
        deadline = budget.stage("retrieval", self._settings.retrieval_timeout_s, "RAG_RETRIEVAL_TIMEOUT_SECONDS")
        async with deadline.bound():
            if question.mode is Mode.SELECTED_TEXT:  # R-001-07: evidence only from the selection, never the index
                retrieval = await self._retriever.retrieve_selection(
                    search.text, question.selected_text, top_k=self._top_k(question),
                    score_threshold=question.score_threshold,
                )
                return Retrieved(retrieval, search, query_class)
            retrieval = await self._search(question, search.text)
            by_rule = search.rewrite in (QueryRewrite.RULE, QueryRewrite.RULE_FALLBACK)
            if by_rule and search.text == question.query and self._gate.refusal(retrieval) is not None:
                widened = SearchQuery(self._reader.with_subject(question.query, question.chat_history), search.rewrite)
                second = await self._search(question, widened.text)
                if self._gate.refusal(second) is None:
                    return Retrieved(second, widened, query_class)
        return Retrieved(retrieval, search, query_class)

    async def _search(self, question: Question, text: str) -> Retrieval:
        return await self._retriever.retrieve(
            RetrievalQuery(
                text=text,
                tenant_id=question.tenant_id,
                user_tags=question.user_tags,
                top_k=self._top_k(question),
                score_threshold=question.score_threshold,
                filters=question.filters,
                search_mode=question.search_mode,
            )
        )

    def _top_k(self, question: Question) -> int:
        return question.top_k or self._settings.top_k
