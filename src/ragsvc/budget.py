"""Token budgeting with tiktoken: what of the history and the evidence fits the model's window."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import tiktoken

from ragsvc.domain import ChatMessage, ScoredChunk
from ragsvc.errors import FieldViolation, TokenBudgetExceeded
from ragsvc.prompts import PromptTemplate, format_chunk

# Chat formats add a few tokens per message (role markers, separators); OpenAI documents 3-4.
MESSAGE_OVERHEAD_TOKENS = 4
PASSAGE_SEPARATOR_TOKENS = 1


@dataclass(frozen=True, slots=True)
class Packing:
    """What goes into the prompt: `context` in marker order, `history` oldest first."""

    context: tuple[ScoredChunk, ...]
    history: tuple[ChatMessage, ...]
    context_tokens: int
    prompt_tokens: int


@dataclass(frozen=True, slots=True)
class TokenBudget:
    encoding: tiktoken.Encoding
    context_window: int
    max_response_tokens: int
    system_prompt_tokens: int
    max_context_tokens: int
    max_history_tokens: int

    def count(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))

    def pack(
        self,
        template: PromptTemplate,
        query: str,
        history: Sequence[ChatMessage],
        candidates: Sequence[ScoredChunk],
    ) -> Packing:
        """Reserve system prompt and response; fit history newest-first (at most a third of what is left),
        then chunks by rank until the context budget is full, keeping at least one (cut to fit)."""
        system = max(self.count(template.system), self.system_prompt_tokens) + MESSAGE_OVERHEAD_TOKENS
        question = self.count(template.user.format(query=query, context="")) + MESSAGE_OVERHEAD_TOKENS
        remaining = self.context_window - self.max_response_tokens - system - question
        if remaining <= 0:
            raise TokenBudgetExceeded(
                [FieldViolation("query", f"needs {question} tokens; the model window leaves {question + remaining}")]
            )

        kept: list[ChatMessage] = []
        history_tokens = 0
        history_cap = min(self.max_history_tokens, remaining // 3)
        for message in reversed(history):
            cost = self.count(message.content) + MESSAGE_OVERHEAD_TOKENS
            if history_tokens + cost > history_cap:
                break
            kept.append(message)
            history_tokens += cost
        remaining -= history_tokens

        context: list[ScoredChunk] = []
        context_tokens = 0
        context_cap = min(self.max_context_tokens, remaining)
        for marker, scored in enumerate(candidates, start=1):
            cost = self.count(format_chunk(marker, scored)) + PASSAGE_SEPARATOR_TOKENS
            if context_tokens + cost > context_cap:
                break
            context.append(scored)
            context_tokens += cost
        if not context and candidates:
            first = self._cut_to_fit(candidates[0], context_cap)
            context.append(first)
            context_tokens = self.count(format_chunk(1, first)) + PASSAGE_SEPARATOR_TOKENS

        return Packing(
            context=tuple(context),
            history=tuple(reversed(kept)),
            context_tokens=context_tokens,
            prompt_tokens=system + question + history_tokens + context_tokens,
        )

    def _cut_to_fit(self, scored: ScoredChunk, limit: int) -> ScoredChunk:
        """The chunk with its text cut (at a word boundary) so that its passage takes at most `limit` tokens."""
        header = self.count(format_chunk(1, dataclasses.replace(scored, chunk=dataclasses.replace(scored.chunk, text=""))))
        tokens = self.encoding.encode(scored.chunk.text, disallowed_special=())
        keep = max(0, limit - header - PASSAGE_SEPARATOR_TOKENS)
        text = self.encoding.decode(tokens[:keep])
        if keep < len(tokens) and " " in text:
            text = text.rsplit(" ", 1)[0]
        return dataclasses.replace(scored, chunk=dataclasses.replace(scored.chunk, text=text))
