"""Token budgeting with tiktoken (R-000-20, R-002-05): the model table, which is also the allowlist, and what of the
history and the evidence fits a model's window.

For a model with window W and response reserve R, the rendered prompt (every message with its chat-format
overhead, plus the reply header) never takes more than W - R tokens as counted with the encoding closest to the
model's tokenizer (`ragsvc.encodings.encoding_for_model`). Within that: the system prompt is reserved (at least
RAG_SYSTEM_PROMPT_TOKENS), the question is never cut, history is kept newest first up to
RAG_MAX_HISTORY_TOKENS and at most a third of what is left, and context chunks go in by rank up to
RAG_MAX_CONTEXT_TOKENS until the next one would not fit, and no more than RAG_MAX_CONTEXT_CHUNKS of them; at least
one chunk is kept, cut to fit.

What is counted per request: the system prompt (remembered), the question in its template (only when its bytes,
which bound its tokens, could make a cap bind), the history, and each passage's header. A passage's text between
its fences was counted at ingest (`Chunk.token_count`, in cl100k_base; a chunk without it, or a budget in another
encoding, counts it here, remembered). The rendered user message is counted whole only when it could be over the
limit: a token is at least one byte, so a message of no more UTF-8 bytes than the tokens left cannot be; the
prompt's exact count (`Packing.prompt_tokens`) is then made only when asked for (an explanation, a dry run).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import tiktoken

from ragsvc.config import BudgetSettings
from ragsvc.domain import ChatMessage, ScoredChunk
from ragsvc.encodings import encoding_for_model
from ragsvc.errors import FieldViolation, ModelNotAllowed, TokenBudgetExceeded
from ragsvc.model_table import ModelLimits
from ragsvc.prompts import Prompt, fenced

# Chat templates wrap every message in special tokens: Llama 3 spends 5 (<|start_header_id|>, the role,
# <|end_header_id|>, "\n\n", <|eot_id|>), ChatML (Qwen) 5 (<|im_start|>, the role, "\n", <|im_end|>, "\n").
MESSAGE_OVERHEAD_TOKENS = 5
# The header the server appends to open the reply (and Llama's <|begin_of_text|>).
REPLY_PRIMER_TOKENS = 5
# Passages are joined with "\n\n", one token.
PASSAGE_SEPARATOR_TOKENS = 1
# What the chunker counts in, chunk sizes and Chunk.token_count.
COUNTED_ENCODING = "cl100k_base"


@dataclass(frozen=True, slots=True)
class Packing:
    """What goes into the prompt: the rendered `messages`, the packed `context` in marker order and the
    `history` kept (oldest first). `context_tokens` is what the packed passages cost; `prompt_tokens` is the
    whole rendered prompt as counted (message overheads and reply header included)."""

    messages: tuple[ChatMessage, ...]
    context: tuple[ScoredChunk, ...]
    history: tuple[ChatMessage, ...]
    context_tokens: int
    # The prompt's tokens but the user message's, and the user message's when it was counted.
    tokens_before_user: int
    encoding: tiktoken.Encoding
    user_tokens: int | None = None

    @property
    def prompt_tokens(self) -> int:
        user = _count(self.encoding, self.messages[-1].content) if self.user_tokens is None else self.user_tokens
        return self.tokens_before_user + user + MESSAGE_OVERHEAD_TOKENS + REPLY_PRIMER_TOKENS


@dataclass(frozen=True, slots=True)
class TokenBudget:
    encoding: tiktoken.Encoding
    context_window: int
    max_response_tokens: int
    system_prompt_tokens: int
    max_context_tokens: int
    max_history_tokens: int
    max_context_chunks: int | None = None  # the most chunks packed (RAG_MAX_CONTEXT_CHUNKS); None: no cap

    def count(self, text: str) -> int:
        return _count(self.encoding, text)

    def count_recurring(self, text: str) -> int:
        """`count`, remembered: for texts that come back request after request (system prompts, passages)."""
        return _count_recurring(self.encoding, text)

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of a rendered prompt: each message with its chat-format overhead, plus the reply header."""
        return sum(self.count(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages) + REPLY_PRIMER_TOKENS

    @property
    def prompt_limit(self) -> int:
        """The most tokens a prompt may take: the window less the response reserve."""
        return self.context_window - self.max_response_tokens

    def pack(
        self,
        prompt: Prompt,
        query: str,
        history: Sequence[ChatMessage],
        candidates: Sequence[ScoredChunk],
    ) -> Packing:
        """Fit history and chunks (best first) around the system prompt, the question and the response reserve.
        Raises TokenBudgetExceeded when the question leaves no room for a piece of evidence."""
        system_tokens = self.count_recurring(prompt.system)
        system = max(system_tokens, self.system_prompt_tokens) + MESSAGE_OVERHEAD_TOKENS
        asked = prompt.user_message(query, ())
        # The question's bytes bound its tokens (a token is at least a byte). When even that bound leaves both caps
        # below whole, the exact count could change nothing that follows and is not made (see _exactly).
        question = len(asked.encode()) + MESSAGE_OVERHEAD_TOKENS
        remaining = self.prompt_limit - REPLY_PRIMER_TOKENS - system - question
        if remaining // 3 < self.max_history_tokens or remaining - self.max_history_tokens < self.max_context_tokens:
            remaining, question = self._exactly(asked, remaining, question)
        if remaining <= 0:
            raise self._too_long(question, remaining)

        kept: list[ChatMessage] = []
        history_tokens = 0
        history_cap = min(self.max_history_tokens, remaining // 3)
        for message in reversed(history):
            cost = self.count(message.content) + MESSAGE_OVERHEAD_TOKENS
            if history_tokens + cost > history_cap:
                break
            kept.append(message)
            history_tokens += cost
        kept.reverse()
        remaining -= history_tokens

        context: list[ScoredChunk] = []
        costs: list[int] = []
        context_cap = min(self.max_context_tokens, remaining)
        for marker, scored in enumerate(candidates[: self.max_context_chunks], start=1):
            cost = self._passage_cost(prompt, marker, scored)
            if sum(costs) + cost > context_cap:
                break
            context.append(scored)
            costs.append(cost)
        if not context and candidates:
            # RAG_MAX_CONTEXT_TOKENS only ever drops chunks after the first: if the cap cannot hold a passage
            # header and a word, the one chunk is cut to what the window leaves instead.
            remaining, question = self._exactly(asked, remaining, question)
            first = self._cut_to_fit(prompt, candidates[0], context_cap) or self._cut_to_fit(prompt, candidates[0], remaining)
            if first is None:
                raise self._too_long(question, remaining)
            context.append(first)
            costs.append(self._passage_cost(prompt, 1, first))

        # The passages were counted one by one; tokens can merge across their joins. Unless its bytes prove that
        # the user message fits, count it as sent (system and history messages were counted whole) and, should the
        # prompt be over, give up the last passage (or cut the only one) until it fits.
        before_user = system_tokens + MESSAGE_OVERHEAD_TOKENS + history_tokens
        room = self.prompt_limit - before_user - MESSAGE_OVERHEAD_TOKENS - REPLY_PRIMER_TOKENS
        while True:
            messages = prompt.render(query, context, kept)
            if len(messages[-1].content.encode()) <= room:
                user: int | None = None
                break
            user = self.count(messages[-1].content)
            excess = user - room
            if excess <= 0:
                break
            if len(context) > 1:
                context.pop()
                costs.pop()
            else:
                cut = self._cut_to_fit(prompt, context[0], costs[0] - excess)
                if cut is None:
                    raise self._too_long(self._exactly(asked, remaining, question)[1], -excess)
                context[0] = cut
                costs[0] = self._passage_cost(prompt, 1, cut)
        return Packing(
            messages=messages,
            context=tuple(context),
            history=tuple(kept),
            context_tokens=sum(costs),
            tokens_before_user=before_user,
            encoding=self.encoding,
            user_tokens=user,
        )

    def _exactly(self, asked: str, remaining: int, question: int) -> tuple[int, int]:
        """`remaining` and `question` (the question's tokens with its message overhead, perhaps its bytes' bound)
        with the question counted exactly."""
        exact = self.count(asked) + MESSAGE_OVERHEAD_TOKENS
        return remaining + question - exact, exact

    def _passage_cost(self, prompt: Prompt, marker: int, scored: ScoredChunk) -> int:
        """The passage's tokens counted alone (its header's and its fenced text's: see `prompts.fenced`), plus
        its separator."""
        chunk = scored.chunk
        counted = chunk.token_count if self.encoding.name == COUNTED_ENCODING else None
        text = self.count_recurring(fenced(chunk.text)) if counted is None else counted
        return self.count_recurring(prompt.passage_header(marker, scored)) + text + PASSAGE_SEPARATOR_TOKENS

    def _cut_to_fit(self, prompt: Prompt, scored: ScoredChunk, limit: int) -> ScoredChunk | None:
        """The chunk with its text cut at a word boundary so that its passage costs at most `limit` tokens;
        None when not even one word fits."""
        tokens = self.encoding.encode(scored.chunk.text, disallowed_special=())
        keep = min(len(tokens), max(0, limit - (self._passage_cost(prompt, 1, _with_text(scored, "")))))
        while keep > 0:
            # Decoding a prefix may end inside a multi-byte character: drop that partial character.
            text = self.encoding.decode_bytes(tokens[:keep]).decode("utf-8", errors="ignore")
            if keep < len(tokens) and " " in text.strip():
                text = text.rstrip().rsplit(" ", 1)[0]
            cut = _with_text(scored, text)
            cost = self._passage_cost(prompt, 1, cut)
            if cost <= limit and text.strip():
                return cut
            keep -= max(1, cost - limit)
        return None

    def _too_long(self, question: int, remaining: int) -> TokenBudgetExceeded:
        return TokenBudgetExceeded(
            [
                FieldViolation(
                    "query",
                    f"the question takes {question} tokens and leaves {max(remaining, 0)} for evidence in this "
                    f"model's {self.context_window}-token window ({self.max_response_tokens} reserved for the answer)",
                )
            ]
        )


def _with_text(scored: ScoredChunk, text: str) -> ScoredChunk:
    """`scored` holding `text` (a cut of its chunk's): its stored count and reading are of the whole chunk."""
    return dataclasses.replace(scored, chunk=dataclasses.replace(scored.chunk, text=text, token_count=None), reading=None)


class ModelCatalog:
    """The model allowlist: each allowed model with its limits and a TokenBudget counting with the encoding
    closest to its tokenizer. Budgets are built at start-up, so a request never loads an encoding."""

    def __init__(self, models: Mapping[str, ModelLimits], settings: BudgetSettings) -> None:
        self._limits = dict(models)
        self._budgets = {
            name: TokenBudget(
                encoding=encoding_for_model(name),
                context_window=limits.context_window,
                max_response_tokens=limits.max_response_tokens,
                system_prompt_tokens=settings.system_prompt_tokens,
                max_context_tokens=settings.max_context_tokens,
                max_history_tokens=settings.max_history_tokens,
                max_context_chunks=settings.max_context_chunks,
            )
            for name, limits in self._limits.items()
        }

    def __contains__(self, model: object) -> bool:
        return model in self._limits

    def __iter__(self) -> Iterator[str]:
        return iter(self._limits)

    def limits(self, model: str) -> ModelLimits:
        self.check_allowed(model)
        return self._limits[model]

    def budget(self, model: str) -> TokenBudget:
        self.check_allowed(model)
        return self._budgets[model]

    def context_windows(self) -> dict[str, int]:
        return {name: limits.context_window for name, limits in self._limits.items()}

    def check_allowed(self, model: str, field: str = "generation.model") -> None:
        """Raises ModelNotAllowed (naming `field`) unless `model` is in the allowlist."""
        if model not in self._limits:
            allowed = ", ".join(self._limits)
            raise ModelNotAllowed([FieldViolation(field, f"{model!r} is not one of: {allowed}")])


def _count(encoding: tiktoken.Encoding, text: str) -> int:
    return len(encoding.encode(text, disallowed_special=()))


_count_recurring = functools.lru_cache(maxsize=4096)(_count)
