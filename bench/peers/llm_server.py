"""The LLM every variant talks to: the tests' scripted OpenAI-compatible server on 127.0.0.1, in a process of its
own, answering each chat by quoting the first context passage with its marker (so ragsvc's validator finds the
answer grounded) in `--tokens` deltas, after `--first-token-delay-ms` and with `--token-interval-ms` between
deltas (both 0: an instant LLM).

    python -m bench.peers.llm_server [--tokens 24] [--first-token-delay-ms 0] [--token-interval-ms 0]

ragsvc's auxiliary calls (`ragsvc.judge`: question classification, the answer's self-score, follow-up questions,
condensing a follow-up) are recognised by their prompts and answered as a model following them would, at once:
``FACTUAL``, ``85``, the follow-up questions asked for, the question itself.

It prints its base URL (``http://127.0.0.1:PORT/v1``) on the first line of stdout, serves the model
``bench-llm``, and answers ``GET /bench/log`` with what it served since the previous read (then forgets it):
per chat completion, in arrival order, the sha256 of its messages, its `purpose` (``answer`` or the auxiliary
call's), when it was received (``received_at``, ``time.monotonic()``: a caller's clock on the same machine), the
time from receiving the request to sending the first content delta (``first_token_ms``) and to sending the last
(``server_ms``; both None for a reply that was not streamed), and the deltas sent.
``GET /bench/script/<tokens>/<first_token_delay_ms>/<token_interval_ms>`` changes the script for the requests
that follow.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
from typing import Any

from ragsvc.judge import CLASSIFY_PROMPT, CONDENSE_PROMPT, CONFIDENCE_PROMPT
from tests.support.http_server import RecordedRequest, _send_json
from tests.support.openai_server import ScriptedOpenAIServer

MODEL = "bench-llm"
_FIRST_PASSAGE = re.compile(r"<<<\n(.*?)\n>>>", re.DOTALL)
# ragsvc's auxiliary prompts by the first line of their template, and the purpose each serves.
AUXILIARY = {
    CLASSIFY_PROMPT.splitlines()[0]: "classify",
    CONFIDENCE_PROMPT.splitlines()[0]: "self_score",
    CONDENSE_PROMPT.splitlines()[0]: "condense",
}
_FOLLOW_UPS = re.compile(r"Write (\d+) concise follow-up questions")
_ASKED = re.compile(r"^(?:QUESTION|QUERY|FOLLOW-UP QUESTION): (.*)$", re.MULTILINE)


def purpose(messages: list[dict[str, Any]]) -> str:
    """What a chat completion is for: ``answer``, or which of ragsvc's auxiliary calls (`AUXILIARY`, and
    ``follow_ups``) its single user message is."""
    if len(messages) != 1:
        return "answer"
    prompt = str(messages[0].get("content", ""))
    if _FOLLOW_UPS.search(prompt):
        return "follow_ups"
    return next((name for head, name in AUXILIARY.items() if prompt.startswith(head)), "answer")


def messages_digest(messages: list[dict[str, Any]]) -> str:
    """What identifies a prompt: the roles and texts of its messages (a content given as a list of text parts
    counts as their concatenation)."""

    def text(content: Any) -> str:
        if isinstance(content, list):
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return str(content)

    canonical = json.dumps([[m.get("role"), text(m.get("content"))] for m in messages], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class BenchLLMServer(ScriptedOpenAIServer):
    def __init__(self, tokens: int, first_token_delay_s: float, token_delay_s: float) -> None:
        super().__init__(
            deltas=self._reply,
            models=(MODEL,),
            first_token_delay_s=first_token_delay_s,
            token_delay_s=token_delay_s,
        )
        self.tokens = tokens

    def _reply(self, body: dict[str, Any]) -> list[str]:
        """An auxiliary call's reply as one delta (see the module's docstring), else `_quote_first_passage`'s."""
        messages = body["messages"]
        prompt = str(messages[-1].get("content", ""))
        asked = (found.group(1) for found in _ASKED.finditer(prompt))
        question = next(asked, "the documents").rstrip("?")
        match purpose(messages):
            case "classify":
                return ["FACTUAL"]
            case "self_score":
                return ["85"]
            case "condense":
                return [question + "?"]
            case "follow_ups":
                count = int(_FOLLOW_UPS.search(prompt).group(1))  # type: ignore[union-attr]
                subject = (question.split() or ["it"])[-1]
                return ["\n".join(f"What else is said about {subject} ({n})?" for n in range(1, count + 1))]
        return self._quote_first_passage(body)

    def _quote_first_passage(self, body: dict[str, Any]) -> list[str]:
        found = _FIRST_PASSAGE.search(str(body["messages"][-1].get("content", "")))
        words = (found.group(1) if found else "no context was given").rstrip(".").split()
        quoted = [words[i % len(words)] for i in range(self.tokens)]
        return [word + " " for word in quoted[:-1]] + [quoted[-1] + " [#1]."]

    async def _respond(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        if (request.method, request.path) == ("GET", "/bench/log"):
            await _send_json(writer, 200, self._drain_log())
            return True
        if request.method == "GET" and request.path.startswith("/bench/script/"):
            tokens, first_ms, interval_ms = request.path.removeprefix("/bench/script/").split("/")
            self.tokens = int(tokens)
            self.first_token_delay_s, self.token_delay_s = float(first_ms) / 1000, float(interval_ms) / 1000
            await _send_json(writer, 200, {"tokens": self.tokens})
            return True
        return await super()._respond(request, writer)

    def _drain_log(self) -> list[dict[str, Any]]:
        streams = {id(stream.request): stream for stream in self.streams}
        log = []
        for request in self.requests:
            if request.path != "/v1/chat/completions" or not isinstance(request.body, dict):
                continue
            stream = streams.get(id(request))
            done = stream is not None and stream.first_token_at is not None and stream.last_token_at is not None
            messages = request.body.get("messages", [])
            log.append(
                {
                    "messages_sha256": messages_digest(messages),
                    "purpose": purpose(messages),
                    "received_at": request.received_at,
                    "first_token_ms": (stream.first_token_at - request.received_at) * 1000 if done else None,
                    "server_ms": (stream.last_token_at - request.received_at) * 1000 if done else None,
                    "tokens": stream.tokens_sent if stream is not None else 0,
                }
            )
        self.requests.clear()
        self.streams.clear()
        self.connections.clear()
        return log


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--first-token-delay-ms", type=float, default=0.0)
    parser.add_argument("--token-interval-ms", type=float, default=0.0)
    args = parser.parse_args()
    server = BenchLLMServer(args.tokens, args.first_token_delay_ms / 1000, args.token_interval_ms / 1000)
    async with server:
        print(server.base_url, flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
