"""Short auxiliary LLM calls around an answer (R-000-13, R-003-16): condensing a follow-up into a standalone
question, query classification, the model's own support score for the hybrid confidence, and follow-up
questions. Each is optional: a reply that cannot be parsed gives None and the caller falls back to its default.
Each call's usage goes to `on_usage`, so that the answer's usage counts it. Each is a side call
(`GenerationRequest.side_call`): on a server that reports its slots, a free slot goes to an answer first."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ragsvc.domain import ChatMessage, GenerationRequest, QueryClass, Role, ScoredChunk, Usage
from ragsvc.generation.base import Generator

CONFIDENCE_PROMPT = """Evaluate how well this answer is supported by the provided context.

CONTEXT SUMMARY:
{context_summary}

QUESTION: {query}

ANSWER: {answer}

Rate the support level from 0-100:
- 90-100: Answer is fully and directly supported by context
- 70-89: Answer is mostly supported, minor inferences made
- 50-69: Answer is partially supported, some gaps filled
- 30-49: Answer has weak support, significant assumptions
- 0-29: Answer is not supported by context

Respond with ONLY a number between 0 and 100."""

FOLLOW_UP_PROMPT = """QUESTION: {query}

ANSWER: {answer}

Write {count} concise follow-up questions the user may ask next about the same documents.
Write one question per line, each ending with a question mark, and nothing else."""

CLASSIFY_PROMPT = """Classify this query for retrieval optimization.

QUERY: {query}

Categories:
- FACTUAL: Seeking specific facts from documents
- PROCEDURAL: Asking how to do something
- CLARIFICATION: Follow-up on previous answer (use chat history)
- GREETING: Social interaction (still attempt retrieval, expect low relevance)

Respond with exactly one category."""

CONDENSE_PROMPT = """Rewrite the follow-up question so that it can be understood without the conversation: name
what it refers to, keep what it asks. If it already stands alone, repeat it unchanged.

CONVERSATION:
{history}

FOLLOW-UP QUESTION: {query}

Respond with ONLY the standalone question, on one line."""

_SCORE = re.compile(r"\b(100|\d{1,2})\b")
_LIST_PREFIX = re.compile(r"^\s*(?:[-*\u2022]|\d{1,2}[.)])\s*")
_SUMMARY_CHARS = 300
_CONDENSE_TURNS = 4  # the latest messages shown to the model
_CONDENSE_TURN_CHARS = 600
MAX_CONDENSED_CHARS = 500  # a longer reply is not a question
_CONDENSED_PREFIX = re.compile(r"^(?:standalone(?: question)?|question|rewritten(?: question)?)\s*:\s*", re.IGNORECASE)


def context_summary(context: Sequence[ScoredChunk]) -> str:
    """The head of each packed chunk, under its marker: enough for the model to judge support cheaply."""
    return "\n".join(f"[#{n}] {scored.chunk.text[:_SUMMARY_CHARS]}" for n, scored in enumerate(context, start=1))


class LLMJudge:
    def __init__(
        self,
        generator: Generator,
        *,
        model: str,
        on_usage: Callable[[Usage], None] | None = None,
        deadline: float | None = None,
    ) -> None:
        """`deadline` (event loop time) is when the calls must end: no retry waits past it."""
        self._generator = generator
        self._model = model
        self._on_usage = on_usage
        self._deadline = deadline

    async def support_score(self, query: str, answer: str, context: Sequence[ScoredChunk]) -> float | None:
        """The model's 0-100 rating of how well `answer` is supported."""
        prompt = CONFIDENCE_PROMPT.format(context_summary=context_summary(context), query=query, answer=answer)
        match = _SCORE.search(await self._complete(prompt, max_tokens=8))
        return float(match.group(1)) if match else None

    async def follow_ups(self, query: str, answer: str, count: int) -> tuple[str, ...]:
        reply = await self._complete(FOLLOW_UP_PROMPT.format(query=query, answer=answer, count=count), max_tokens=40 * count)
        questions = (_LIST_PREFIX.sub("", line).strip() for line in reply.splitlines())
        return tuple(q for q in questions if q.endswith("?") and len(q) > 3)[:count]

    async def classify(self, query: str) -> QueryClass | None:
        reply = (await self._complete(CLASSIFY_PROMPT.format(query=query), max_tokens=6)).upper()
        return next((c for c in QueryClass if c.name in reply), None)

    async def condense(self, history: Sequence[ChatMessage], query: str) -> str | None:
        """`query`, a follow-up in the conversation `history`, as a standalone question."""
        turns = "\n".join(
            f"{message.role.value.upper()}: {message.content[:_CONDENSE_TURN_CHARS]}"
            for message in history[-_CONDENSE_TURNS:]
        )
        reply = await self._complete(CONDENSE_PROMPT.format(history=turns, query=query), max_tokens=64)
        line = next((line.strip() for line in reply.splitlines() if line.strip()), "")
        condensed = _CONDENSED_PREFIX.sub("", line).strip().strip("\"'\u201c\u201d").strip()
        return condensed if re.search(r"\w", condensed) and len(condensed) <= MAX_CONDENSED_CHARS else None

    async def _complete(self, prompt: str, *, max_tokens: int) -> str:
        request = GenerationRequest(
            messages=(ChatMessage(Role.USER, prompt),),
            query="",
            context=(),
            model=self._model,
            max_tokens=max_tokens,
            temperature=0.0,
            deadline=self._deadline,
            side_call=True,
        )
        parts: list[str] = []
        usage: Usage | None = None
        async for delta in self._generator.generate(request):
            parts.append(delta.text)
            usage = delta.usage or usage
        if self._on_usage is not None:
            self._on_usage(usage or Usage())
        return "".join(parts)
