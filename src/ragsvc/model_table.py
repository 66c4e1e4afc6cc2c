"""The model table RAG_MODELS: every allowed model with its context window and response reserve (R-000-04, R-000-23).

It is also the allowlist: a request naming a model the table lacks is refused with MODEL_NOT_ALLOWED.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# R-000-23's allowlist.
DEFAULT_MODELS = "llama3.2=8192/1024,qwen3:8b=32768/2048,deepseek-r1:32b=65536/4096"


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """A model's context window and the tokens reserved for (and requested from) its answer."""

    context_window: int
    max_response_tokens: int


def parse_model_table(text: str, *, default_max_response: int) -> dict[str, ModelLimits]:
    """Reads `name=window/max_response,...`; an entry without `/max_response` gets `default_max_response`.
    Model names may contain ':' (Ollama tags). Raises ValueError naming the first bad entry."""
    models: dict[str, ModelLimits] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        name, equals, limits = entry.rpartition("=")
        name = name.strip()
        window_text, slash, response_text = limits.partition("/")
        try:
            window = int(window_text)
            response = int(response_text) if slash else default_max_response
        except ValueError:
            raise ValueError(f"{entry!r} is not name=window/max_response") from None
        if not equals or not name:
            raise ValueError(f"{entry!r} is not name=window/max_response")
        if name in models:
            raise ValueError(f"model {name!r} is listed twice")
        if not 0 < response < window:
            raise ValueError(f"{entry!r}: max_response must be positive and smaller than the window")
        models[name] = ModelLimits(window, response)
    if not models:
        raise ValueError("lists no model")
    return models


def format_model_table(models: Mapping[str, ModelLimits]) -> str:
    """The table written back in RAG_MODELS form."""
    return ",".join(f"{name}={m.context_window}/{m.max_response_tokens}" for name, m in models.items())
