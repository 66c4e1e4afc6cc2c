"""LLMJudge against the scripted OpenAI-compatible server on a real socket."""

from __future__ import annotations

import pytest

from ragsvc.domain import Chunk, QueryClass, ScoredChunk
from ragsvc.generation.openai_compat import OpenAICompatGenerator
from ragsvc.judge import LLMJudge
from tests.support.openai_server import ScriptedOpenAIServer

CONTEXT = (ScoredChunk(Chunk("guide", 0, "Hotel expenses are reimbursed up to 180 euros per night."), 0.8),)


async def judged(reply: tuple[str, ...], call):
    async with ScriptedOpenAIServer(deltas=reply, models=("llama3.2",)) as server:
        generator = OpenAICompatGenerator(server.base_url, model="llama3.2")
        try:
            result = await call(LLMJudge(generator, model="llama3.2"))
        finally:
            await generator.aclose()
        return result, server.requests[-1].body


@pytest.mark.parametrize(
    ("reply", "score"), [(("8", "5"), 85.0), (("Score: ", "100"), 100.0), (("42.",), 42.0), (("I cannot rate this",), None)]
)
async def test_support_score(reply: tuple[str, ...], score: float | None) -> None:
    result, body = await judged(reply, lambda j: j.support_score("hotel limit?", "180 euros [#1].", CONTEXT))
    assert result == score
    prompt = body["messages"][0]["content"]
    assert "[#1] Hotel expenses" in prompt and "ANSWER: 180 euros [#1]." in prompt
    assert body["temperature"] == 0.0 and body["max_tokens"] == 8


async def test_follow_ups_are_parsed_and_capped() -> None:
    reply = ("1. What about taxis?\n", "2) Are receipts required?\n", "- Is there a daily cap?\n", "Thanks")
    result, body = await judged(reply, lambda j: j.follow_ups("hotel limit?", "180 euros.", 2))
    assert result == ("What about taxis?", "Are receipts required?")
    assert "Write 2 concise follow-up questions" in body["messages"][0]["content"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [(("PROCEDURAL",), QueryClass.PROCEDURAL), (("Category: factual",), QueryClass.FACTUAL), (("??",), None)],
)
async def test_classify(reply: tuple[str, ...], expected: QueryClass | None) -> None:
    result, _ = await judged(reply, lambda j: j.classify("How do I set up the LLM?"))
    assert result is expected
