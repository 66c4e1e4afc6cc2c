"""The LLM server's slots taken in turn (generation/slots.py): the gate on its own, then an OpenAI-compatible
generator against a scripted llama.cpp-like server reporting one slot (`GET /props`), on a real socket."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from ragsvc.domain import ChatMessage, GenerationRequest, Role
from ragsvc.generation.http import HttpGenerator
from ragsvc.generation.slots import SlotGate
from tests.generation.backends import OLLAMA, OPENAI
from tests.support.openai_server import ScriptedOpenAIServer


async def test_a_freed_slot_goes_to_waiting_answers_before_waiting_side_calls() -> None:
    gate = SlotGate(1)
    order: list[str] = []

    async def use(name: str, *, side_call: bool) -> None:
        async with gate.held(side_call=side_call):
            order.append(name)
            await asyncio.sleep(0.01)

    first = asyncio.ensure_future(use("answer 1", side_call=False))
    await asyncio.sleep(0)
    waiting = [asyncio.ensure_future(use("side 1", side_call=True)), asyncio.ensure_future(use("side 2", side_call=True))]
    await asyncio.sleep(0)
    waiting.append(asyncio.ensure_future(use("answer 2", side_call=False)))
    await asyncio.gather(first, *waiting)
    assert order == ["answer 1", "answer 2", "side 1", "side 2"]


async def test_a_waiter_cancelled_as_it_gets_the_slot_passes_it_on() -> None:
    gate = SlotGate(1)
    async with gate.held(side_call=False):
        leaving = asyncio.ensure_future(gate.held(side_call=False).__aenter__())
        staying = asyncio.ensure_future(gate.held(side_call=True).__aenter__())
        await asyncio.sleep(0)
    leaving.cancel()  # the slot was just handed to it
    with contextlib.suppress(asyncio.CancelledError):
        await leaving
    await asyncio.wait_for(staying, 1.0)
    with pytest.raises(ValueError, match="at least one slot"):
        SlotGate(0)


def request(prompt: str, *, side_call: bool = False) -> GenerationRequest:
    return GenerationRequest(
        messages=(ChatMessage(Role.USER, prompt),), query=prompt, context=(), model="", max_tokens=0,
        side_call=side_call,
    )


async def text(generator: HttpGenerator, req: GenerationRequest) -> str:
    return "".join([delta.text async for delta in generator.generate(req)])


def by_prompt(server: ScriptedOpenAIServer) -> dict[str, object]:
    return {stream.request.body["messages"][0]["content"]: stream for stream in server.streams}


async def test_on_a_one_slot_server_a_side_call_never_overlaps_an_answer() -> None:
    async with ScriptedOpenAIServer(total_slots=1, token_delay_s=0.05) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            assert await generator.slots() == 1
            answer = asyncio.ensure_future(text(generator, request("answer")))
            await asyncio.sleep(0.05)  # the answer holds the slot
            side = asyncio.ensure_future(text(generator, request("side", side_call=True)))
            await asyncio.sleep(0)
            second_answer = asyncio.ensure_future(text(generator, request("answer 2")))
            await asyncio.gather(answer, side, second_answer)
    streams = by_prompt(server)
    assert streams["answer"].completed and streams["side"].completed and streams["answer 2"].completed
    assert streams["answer 2"].request.received_at >= streams["answer"].last_token_at, "one at a time ..."
    assert streams["side"].request.received_at >= streams["answer 2"].last_token_at, "... the answer first"


@pytest.mark.parametrize("backend", [OPENAI, OLLAMA], ids=lambda b: b.name)
async def test_a_server_reporting_no_slots_gets_every_request_at_once(backend) -> None:
    async with backend.server(token_delay_s=0.05) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            await asyncio.gather(
                text(generator, request("answer")), text(generator, request("side", side_call=True))
            )
            assert await generator.slots() is None
    first, second = server.streams
    assert second.request.received_at < first.last_token_at, "they overlapped"
    asked = [r.path for r in server.requests if r.method == "GET"]
    assert asked == (["/props"] if backend is OPENAI else []), "llama.cpp's /props asked once, by OpenAI only"
