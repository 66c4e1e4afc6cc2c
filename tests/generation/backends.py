"""The two LLM protocols ragsvc speaks, each as a scripted server and a generator pointed at it, so that one test
can run against both."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ragsvc.generation.http import HttpGenerator
from ragsvc.generation.ollama import OllamaGenerator
from ragsvc.generation.openai_compat import OpenAICompatGenerator
from ragsvc.generation.retry import RetryPolicy
from tests.support.http_server import ScriptedHTTPServer
from tests.support.ollama_server import ScriptedOllamaServer
from tests.support.openai_server import ScriptedOpenAIServer


@dataclass(frozen=True)
class Backend:
    name: str
    make_server: Callable[..., ScriptedHTTPServer]
    make_generator: Callable[..., HttpGenerator]
    chat_path: str
    models_path: str
    listed: Callable[[str], str]  # how the server lists a model name

    def server(self, *, models: tuple[str, ...] = ("llama3.2",), **script: Any) -> ScriptedHTTPServer:
        return self.make_server(models=tuple(self.listed(m) for m in models), **script)

    def generator(self, server_or_url: ScriptedHTTPServer | str, **options: Any) -> HttpGenerator:
        """A generator for the server; without retries unless `retry` is given (most tests count the requests)."""
        url = server_or_url if isinstance(server_or_url, str) else server_or_url.base_url  # type: ignore[attr-defined]
        return self.make_generator(url, **{"model": "llama3.2", "retry": RetryPolicy(retries=0), **options})

    def down_url(self) -> str:
        """A base URL nothing listens on."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        return f"http://127.0.0.1:{port}" + ("/v1" if self.name == "openai" else "")


OPENAI = Backend("openai", ScriptedOpenAIServer, OpenAICompatGenerator, "/v1/chat/completions", "/v1/models", str)
# Ollama lists pulled models with their tag: "llama3.2" is "llama3.2:latest".
OLLAMA = Backend(
    "ollama", ScriptedOllamaServer, OllamaGenerator, "/api/chat", "/api/tags",
    lambda m: m if ":" in m else f"{m}:latest",
)
BACKENDS = [OPENAI, OLLAMA]
