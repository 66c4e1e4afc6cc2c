from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsvc.budget import (
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMER_TOKENS,
    ModelCatalog,
    TokenBudget,
)
from ragsvc.config import BudgetSettings
from ragsvc.domain import (
    ChatMessage,
    Chunk,
    CitationStyle,
    Role,
    ScoredChunk,
    Strictness,
)
from ragsvc.encodings import encoding_for_model, get_encoding
from ragsvc.errors import ModelNotAllowed, TokenBudgetExceeded
from ragsvc.ingest.chunker import fenced_token_counts
from ragsvc.model_table import DEFAULT_MODELS, parse_model_table
from ragsvc.prompts import Prompt, fenced, get_prompt

RAG_V1 = get_prompt("rag-v1")


def budget(**overrides: int) -> TokenBudget:
    limits = {"context_window": 8192, "max_response_tokens": 1024, "system_prompt_tokens": 500,
              "max_context_tokens": 3000, "max_history_tokens": 1000}
    return TokenBudget(encoding=get_encoding("cl100k_base"), **{**limits, **overrides})


def chunks(n: int, words: int = 100) -> list[ScoredChunk]:
    return [ScoredChunk(Chunk(f"d{i}", 0, " ".join(["evidence"] * words)), 1 - i / 100) for i in range(n)]


def counted(b: TokenBudget, messages: tuple[ChatMessage, ...]) -> int:
    """The prompt as the test counts it, independently of TokenBudget.count_messages."""
    encoding = b.encoding
    per_message = [len(encoding.encode(m.content, disallowed_special=())) + MESSAGE_OVERHEAD_TOKENS for m in messages]
    return sum(per_message) + REPLY_PRIMER_TOKENS


def test_counts_with_the_real_encoding() -> None:
    assert get_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_chunks_are_packed_by_rank_until_the_context_budget_is_full() -> None:
    packing = budget(max_context_tokens=500).pack(RAG_V1, "q", (), chunks(10))
    assert [s.chunk.document_id for s in packing.context] == ["d0", "d1", "d2", "d3"]
    assert 0 < packing.context_tokens <= 500


def test_no_more_chunks_than_the_cap_are_packed_however_many_fit() -> None:
    assert len(budget().pack(RAG_V1, "q", (), chunks(5, words=10)).context) == 5
    capped = budget(max_context_chunks=2).pack(RAG_V1, "q", (), chunks(5, words=10))
    assert [s.chunk.document_id for s in capped.context] == ["d0", "d1"], "the best ones"


def test_reports_what_the_packed_context_and_the_whole_prompt_cost() -> None:
    b = budget()
    packing = b.pack(RAG_V1, "Which port?", (), chunks(3))
    passages = [RAG_V1.passage(n, s) for n, s in enumerate(packing.context, start=1)]
    assert packing.context_tokens == sum(b.count(p) + 1 for p in passages)
    assert packing.prompt_tokens == counted(b, packing.messages)
    assert packing.messages == RAG_V1.render("Which port?", packing.context)


def test_at_least_one_chunk_is_kept_cut_to_fit() -> None:
    packing = budget(max_context_tokens=60).pack(RAG_V1, "q", (), chunks(3, words=500))
    assert len(packing.context) == 1 and packing.context_tokens <= 60
    assert packing.context[0].chunk.text.startswith("evidence") and len(packing.context[0].chunk.text) < 500 * 9


def test_a_cut_chunk_ends_at_a_word_and_never_in_a_character() -> None:
    text = " ".join(["naïve café résumé 東京タワー"] * 300)
    packing = budget(max_context_tokens=80).pack(RAG_V1, "q", (), [ScoredChunk(Chunk("d", 0, text), 0.9)])
    cut = packing.context[0].chunk.text
    assert text.startswith(cut) and "\ufffd" not in cut
    assert text[len(cut)] == " ", "cut at a word boundary"


def test_history_is_kept_newest_first_within_its_cap() -> None:
    history = tuple(ChatMessage(Role.USER if i % 2 == 0 else Role.ASSISTANT, f"turn {i} " * 40) for i in range(10))
    packing = budget(max_history_tokens=300).pack(RAG_V1, "q", history, chunks(1))
    assert packing.history == history[-len(packing.history):] and 0 < len(packing.history) < 10
    assert packing.messages[1 : 1 + len(packing.history)] == packing.history


def test_a_long_history_loses_its_oldest_turns_first() -> None:
    history = tuple(ChatMessage(Role.USER, f"turn {i}: " + "words " * 200) for i in range(30))
    packing = budget(max_history_tokens=100_000).pack(RAG_V1, "q", history, chunks(1))
    kept = [int(m.content.split(":")[0].removeprefix("turn ")) for m in packing.history]
    assert kept == list(range(30 - len(kept), 30)), "a suffix of the history: the newest turns, in order"
    assert 0 < len(kept) < 30
    # At most a third of what the system prompt, the question and the response reserve leave.
    b = budget(max_history_tokens=100_000)
    left = b.prompt_limit - REPLY_PRIMER_TOKENS - (500 + MESSAGE_OVERHEAD_TOKENS) - (
        b.count(RAG_V1.user_message("q", ())) + MESSAGE_OVERHEAD_TOKENS
    )
    assert sum(b.count(m.content) + MESSAGE_OVERHEAD_TOKENS for m in packing.history) <= left // 3


def test_huge_chunks_never_overflow_the_window() -> None:
    b = budget(context_window=2048, max_response_tokens=512, max_context_tokens=100_000)
    giant = [ScoredChunk(Chunk(f"g{i}", i, "lorem ipsum dolor sit amet " * 5000), 0.9) for i in range(3)]
    packing = b.pack(RAG_V1, "What does lorem ipsum say?", (), giant)
    assert len(packing.context) == 1
    assert counted(b, packing.messages) + b.max_response_tokens <= b.context_window


class JoinPenalty(TokenBudget):
    """An encoding whose count of joined passages exceeds the sum of its parts (no real one was found to, but
    BPE does not promise it): packing must still fit, by the count of the prompt as sent."""

    __slots__ = ()

    def count(self, text: str) -> int:
        return super().count(text) + 60 * text.count(">>>\n\n[#")


def test_the_prompt_as_sent_fits_even_when_joins_cost_more_than_the_parts() -> None:
    limits = {"context_window": 3000, "max_response_tokens": 500, "system_prompt_tokens": 0,
              "max_context_tokens": 100_000, "max_history_tokens": 0}
    plain = TokenBudget(encoding=get_encoding("cl100k_base"), **limits)
    penalised = JoinPenalty(encoding=get_encoding("cl100k_base"), **limits)
    evidence = chunks(40, words=60)
    packing = penalised.pack(RAG_V1, "q", (), evidence)
    assert penalised.count_messages(packing.messages) + 500 <= 3000
    assert packing.prompt_tokens == penalised.count_messages(packing.messages)
    assert 1 <= len(packing.context) < len(plain.pack(RAG_V1, "q", (), evidence).context)


def test_a_query_that_cannot_fit_is_refused() -> None:
    with pytest.raises(TokenBudgetExceeded) as caught:
        budget(context_window=1600).pack(RAG_V1, "word " * 2000, (), chunks(1))
    assert caught.value.reason == "TOKEN_BUDGET_EXCEEDED"
    assert [v.field for v in caught.value.violations] == ["query"]


def test_a_query_that_leaves_no_room_for_evidence_is_refused() -> None:
    """Growing the question shrinks the one chunk until not even its header and a word fit: then it is refused."""
    b = budget(context_window=1800, max_response_tokens=256, system_prompt_tokens=0, max_history_tokens=0)
    cuts: list[int] = []
    refused: TokenBudgetExceeded | None = None
    for words in range(1300, 1500):
        try:
            packing = b.pack(RAG_V1, "word " * words, (), chunks(1))
        except TokenBudgetExceeded as exc:
            refused = exc
            break
        assert counted(b, packing.messages) + b.max_response_tokens <= b.context_window
        cuts.append(len(packing.context[0].chunk.text.split()))
    assert refused is not None, "never refused"
    assert [v.field for v in refused.violations] == ["query"]
    assert cuts[-1] >= 1 and cuts == sorted(cuts, reverse=True) and cuts[0] > cuts[-1]


words = st.text(alphabet=st.sampled_from("abcdefghij klmnop 0123456789 .,;:\n#[]\"'é東"), min_size=0, max_size=400)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    window=st.integers(min_value=600, max_value=6000),
    response=st.integers(min_value=1, max_value=1500),
    system_reserve=st.integers(min_value=0, max_value=600),
    max_context=st.integers(min_value=1, max_value=5000),
    max_history=st.integers(min_value=0, max_value=3000),
    query=words.filter(str.strip),
    history=st.lists(words.filter(str.strip), max_size=12),
    texts=st.lists(st.tuples(words, st.integers(min_value=0, max_value=40)), min_size=1, max_size=8),
    style=st.sampled_from(CitationStyle),
    strictness=st.sampled_from(Strictness),
    template=st.sampled_from(["rag-v1", "rag-v1-terse", "rag-v1-detailed"]),
    counted_at_ingest=st.booleans(),
)
def test_counted_prompt_plus_response_reserve_never_exceeds_the_window(
    window: int,
    response: int,
    system_reserve: int,
    max_context: int,
    max_history: int,
    query: str,
    history: list[str],
    texts: list[tuple[str, int]],
    style: CitationStyle,
    strictness: Strictness,
    template: str,
    counted_at_ingest: bool,
) -> None:
    """Whatever the limits, history and evidence, with the chunks' tokens counted at ingest or not: the prompt,
    counted by tiktoken in full, fits beside the response reserve, or the question alone is refused."""
    b = budget(context_window=window, max_response_tokens=min(response, window - 1),
               system_prompt_tokens=system_reserve, max_context_tokens=max_context,
               max_history_tokens=max_history)
    prompt: Prompt = get_prompt(template, style, strictness)
    messages = tuple(ChatMessage(Role.USER if i % 2 else Role.ASSISTANT, h) for i, h in enumerate(history))
    # A chunk's text repeated up to 40 times: from empty-ish to thousands of tokens.
    candidates = [ScoredChunk(Chunk(f"doc-{i}", i, (t + " ") * r, document_name=f"d{i}.md"), 1 - i / 10)
                  for i, (t, r) in enumerate(texts) if ((t + " ") * r).strip()]
    if counted_at_ingest:
        counts = fenced_token_counts([c.chunk.text for c in candidates])
        candidates = [dataclasses.replace(c, chunk=dataclasses.replace(c.chunk, token_count=n))
                      for c, n in zip(candidates, counts, strict=True)]
    try:
        packing = b.pack(prompt, query, messages, candidates)
    except TokenBudgetExceeded:
        # Only when the question (with the system reserve) leaves less than a passage header and a word.
        question = b.count(prompt.user_message(query, ())) + MESSAGE_OVERHEAD_TOKENS
        system = max(b.count(prompt.system), system_reserve) + MESSAGE_OVERHEAD_TOKENS
        assert b.prompt_limit - REPLY_PRIMER_TOKENS - system - question < 60
        return
    assert counted(b, packing.messages) + b.max_response_tokens <= window
    assert packing.prompt_tokens == counted(b, packing.messages)
    # The passages cost what each counts whole, though only headers were counted here.
    whole = [b.count(prompt.passage(n, c)) + 1 for n, c in enumerate(packing.context, start=1)]
    assert packing.context_tokens == sum(whole)
    assert packing.history == tuple(messages[len(messages) - len(packing.history):])
    if candidates:
        assert packing.context, "at least one chunk"
        for kept, original in zip(packing.context, candidates, strict=False):
            assert kept.chunk.source_id == original.chunk.source_id, "by rank, lowest dropped first"
            assert original.chunk.text.startswith(kept.chunk.text)


@settings(max_examples=300, deadline=None)
@given(
    text=words,
    name=words,
    section=st.none() | words,
    page=st.none() | st.integers(min_value=0, max_value=10_000),
    marker=st.integers(min_value=1, max_value=50),
    style=st.sampled_from(CitationStyle),
    encoding=st.sampled_from(["cl100k_base", "o200k_base", "qwen3:8b"]),
)
def test_a_passage_counts_its_header_plus_its_fenced_text(
    text: str, name: str, section: str | None, page: int | None, marker: int, style: CitationStyle, encoding: str
) -> None:
    """What lets ingest count a chunk's text once: the header's tokens and the fenced text's add up to the
    passage's, in every encoding a budget may use (a newline, then "<": tiktoken always splits there)."""
    tokens = get_encoding(encoding) if encoding.endswith("_base") else encoding_for_model(encoding)
    scored = ScoredChunk(Chunk("doc", 0, text, document_name=name, section=section, page_number=page), 0.5)
    prompt = get_prompt("rag-v1", style)

    def count(s: str) -> int:
        return len(tokens.encode(s, disallowed_special=()))

    assert count(prompt.passage(marker, scored)) == count(prompt.passage_header(marker, scored)) + count(fenced(text))


def test_catalog_gives_each_model_its_window_and_encoding() -> None:
    catalog = ModelCatalog(
        parse_model_table(DEFAULT_MODELS, default_max_response=1024),
        BudgetSettings(system_prompt_tokens=500, max_context_tokens=3000, max_history_tokens=1000),
    )
    assert list(catalog) == ["llama3.2", "qwen3:8b", "deepseek-r1:32b"]
    qwen = catalog.budget("qwen3:8b")
    assert (qwen.context_window, qwen.max_response_tokens) == (32768, 2048)
    assert qwen.encoding is encoding_for_model("qwen3:8b")
    assert catalog.budget("llama3.2").encoding.name == "cl100k_base"
    assert catalog.context_windows() == {"llama3.2": 8192, "qwen3:8b": 32768, "deepseek-r1:32b": 65536}
    with pytest.raises(ModelNotAllowed) as caught:
        catalog.budget("gpt-unknown")
    assert [v.field for v in caught.value.violations] == ["generation.model"]
    assert "llama3.2" in caught.value.violations[0].description


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("llama3.2", "cl100k_base"),
        ("deepseek-r1:8b", "cl100k_base"),  # a Llama distill
        ("qwen3:8b", "cl100k_base_single_digits"),
        ("deepseek-r1:32b", "cl100k_base_single_digits"),  # a Qwen distill
        ("gpt-4o-mini", "o200k_base"),
        ("smollm2", "cl100k_base"),
    ],
)
def test_the_encoding_closest_to_each_model(model: str, encoding: str) -> None:
    assert encoding_for_model(model).name == encoding


def test_qwen_counts_every_digit_as_a_token() -> None:
    qwen, llama = encoding_for_model("qwen3:8b"), encoding_for_model("llama3.2")
    assert len(qwen.encode("2024")) == 4 and len(llama.encode("2024")) == 2
    assert qwen.encode("hello world") == llama.encode("hello world") == [15339, 1917]


def test_a_bigger_window_fits_more_evidence() -> None:
    small = budget(context_window=2048, max_response_tokens=512, max_context_tokens=100_000)
    large = dataclasses.replace(small, context_window=32768)
    evidence = chunks(40, words=200)
    assert len(large.pack(RAG_V1, "q", (), evidence).context) > len(small.pack(RAG_V1, "q", (), evidence).context)
