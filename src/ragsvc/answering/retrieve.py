"""The retrieve stage: classify the question (the model's class only if it arrives before the answer's generation
starts), decide what to search for (a follow-up as a standalone question: see conversation.py), and search (or, in
selected-text mode, score the caller's selection) within the stage's deadline.

A follow-up rewritten by rule is searched a second time, after the earlier questions it continues word for word
(`Reader.follow_up_searches` names every search): the rule keeps their subject words only, and lets a follow-up that
seems to name its own subject stand as asked ("How long is the grace period?" after "What happens on SIGTERM?").
Both searches go to the pipeline (`Retrieved.alternatives`), which keeps the evidence the reader judges answers the
question better. Measured on the benchmark corpora as unseen, choosing between the two beat either search alone
(docs/chat.md); the reader's training reads a follow-up the same way (bench/reader/evidence.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass

from ragsvc.answering.conversation import Condenser
from ragsvc.answering.deadlines import RequestBudget
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

_log = logging.getLogger(__name__)


class Classification:
    """The question's class: by rules at once, and by the model when `pending` (a call started concurrently) has
    arrived by the time the class is read (`settle`, before the answer's generation starts). The answer never
    waits for it."""

    def __init__(self, by_rules: QueryClass, pending: asyncio.Task[QueryClass | None] | None = None) -> None:
        self._class = by_rules
        self._pending = pending

    def settle(self) -> QueryClass:
        """The model's class when its call has completed with one, else the rules'; a call still running is
        cancelled. From then on the class stays."""
        pending, self._pending = self._pending, None
        if pending is not None:
            if pending.done() and not pending.cancelled() and (by_model := pending.result()) is not None:
                self._class = by_model
            else:
                pending.cancel()
        return self._class


@dataclass(frozen=True, slots=True)
class Searched:
    """One search and what it found."""

    retrieval: Retrieval
    search: SearchQuery


@dataclass(frozen=True, slots=True)
class Retrieved:
    """What the retrieve stage found: `search` is what was searched for (the extractive generator matches
    sentences against its text too); `alternatives` are a follow-up's other searches, from which the pipeline
    keeps the one the reader reads best (then there are none)."""

    retrieval: Retrieval
    search: SearchQuery
    classification: Classification
    alternatives: tuple[Searched, ...] = ()

    def options(self) -> list[Searched]:
        """The searches to choose from, this one first."""
        return [Searched(self.retrieval, self.search), *self.alternatives]

    def chosen(self, searched: Searched) -> Retrieved:
        """The same retrieval, with `searched` as what was found and no alternatives left."""
        return dataclasses.replace(self, retrieval=searched.retrieval, search=searched.search, alternatives=())

    @property
    def query_class(self) -> QueryClass:
        return self.classification.settle()


class QueryClassifier:
    """The question's class (R-000-14): by rules; by the model too when it follows instructions and `by_model` is
    on, in a call alongside retrieval whose class is used only when it arrives in time (see `Classification`).
    Not on a server that reports a single slot: the call would hold the slot the answer is about to need."""

    def __init__(self, generator: Generator, reader: Reader, *, default_model: str, by_model: bool) -> None:
        self._generator = generator
        self._reader = reader
        self._default_model = default_model
        self.by_model = by_model and generator.capabilities.follows_instructions

    async def start(self, question: Question, budget: RequestBudget, ledger: UsageLedger) -> Classification:
        by_rules = self._reader.classify(question.query, question.chat_history)
        if not self.by_model or await self._generator.slots() == 1:
            return Classification(by_rules)
        return Classification(by_rules, asyncio.create_task(self._by_model(question, budget, ledger)))

    async def _by_model(self, question: Question, budget: RequestBudget, ledger: UsageLedger) -> QueryClass | None:
        model = question.model or self._default_model
        judge = LLMJudge(
            self._generator,
            model=model,
            on_usage=lambda usage: ledger.record(CallPurpose.CLASSIFY, self._generator, model, usage),
            deadline=budget.total_at,
        )
        try:
            async with asyncio.timeout_at(budget.total_at):
                return await judge.classify(question.query)
        except (RagError, TimeoutError) as exc:
            _log.warning("LLM classification failed, classifying by rules: %s", exc)
            return None


class RetrieveStage:
    def __init__(
        self,
        retriever: Retriever,
        reader: Reader,
        classifier: QueryClassifier,
        condenser: Condenser,
        settings: RetrievalSettings,
    ) -> None:
        self._retriever = retriever
        self._reader = reader
        self._classifier = classifier
        self._condenser = condenser
        self._settings = settings

    async def run(self, question: Question, budget: RequestBudget, ledger: UsageLedger) -> Retrieved:
        """Start classifying (see `QueryClassifier`), condense a follow-up that needs it, then search by the
        retrieval stage's deadline. The caller settles the classification (`Retrieved.query_class`)."""
        classification = await self._classifier.start(question, budget, ledger)
        try:
            search = await self._condenser.search_for(question, budget, ledger)
            retrieval, searched, alternatives = await self._retrieve(question, search, budget)
            return Retrieved(retrieval, searched, classification, alternatives)
        except BaseException:
            classification.settle()  # a failed request: the model's call is not waited for
            raise

    async def _retrieve(
        self, question: Question, search: SearchQuery, budget: RequestBudget
    ) -> tuple[Retrieval, SearchQuery, tuple[Searched, ...]]:
        deadline = budget.stage("retrieval", self._settings.retrieval_timeout_s, "RAG_RETRIEVAL_TIMEOUT_SECONDS")
        async with deadline.bound():
            if question.mode is Mode.SELECTED_TEXT:  # R-001-07: evidence only from the selection, never the index
                retrieval = await self._retriever.retrieve_selection(
                    search.text,
                    question.selected_text,
                    top_k=self._top_k(question),
                    score_threshold=question.score_threshold,
                )
                return retrieval, search, ()
            retrieval = await self._search(question, search.text)
            if search.rewrite not in (QueryRewrite.RULE, QueryRewrite.RULE_FALLBACK):
                return retrieval, search, ()
            others = [
                SearchQuery(text, search.rewrite)
                for text in self._reader.follow_up_searches(question.query, question.chat_history)
                if text != search.text
            ]
            found = await asyncio.gather(*(self._search(question, other.text) for other in others))
            return retrieval, search, tuple(Searched(r, other) for r, other in zip(found, others, strict=True))

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
        """The chunks to retrieve: the question's top_k, or the reader's pool to choose them from when larger."""
        return max(question.top_k or self._settings.top_k, self._reader.pool)
