"""The question's language (R-003-04): detected once at admission, it picks the template that answers in it, or
refuses the question when none does.

- A question whose language cannot be told (too short, too mixed: see `ragsvc.language`) is answered with the
  requested (or default) template, as if it were in that template's language: never refused.
- A question in the requested template's language is answered with it (English questions and the English
  templates: the default case, which costs one detection, ~10 µs).
- Otherwise the template of the question's language is used (`prompts.in_language`: "<id>-<language>", else the
  first template of that language), and with none the question is refused with UNSUPPORTED_LANGUAGE before anything
  is searched: the answer names the language, and is routed to the admin (no evidence, no tag owner).

The language is recorded in the answer and its audit row whatever happens.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from ragsvc.domain import Action, Answer, Question, RefusalReason
from ragsvc.language import LanguageDetector
from ragsvc.prompts import TemplateRegistry, in_language
from ragsvc.storage.owners import OwnerDirectory

# Names for the refusal's text; other languages are named by their code.
LANGUAGE_NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek", "en": "English",
    "es": "Spanish", "fa": "Persian", "fi": "Finnish", "fr": "French", "he": "Hebrew", "hi": "Hindi",
    "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese", "ko": "Korean", "nl": "Dutch",
    "no": "Norwegian", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sv": "Swedish",
    "th": "Thai", "tr": "Turkish", "uk": "Ukrainian", "vi": "Vietnamese", "zh": "Chinese",
}  # fmt: skip


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


class LanguageGate:
    def __init__(
        self, detector: LanguageDetector, templates: TemplateRegistry, owners: OwnerDirectory, *, default_template: str
    ) -> None:
        self._detector = detector
        self._templates = templates
        self._owners = owners
        self._default_template = default_template

    def route(self, question: Question) -> tuple[Question, bool]:
        """The question with its language, and the template that answers in it as its template; False when no
        template does. An unknown template is left for the pipeline to refuse (NotFound)."""
        language = self._detector.detect(question.query)
        question = dataclasses.replace(question, language=language)
        requested = self._templates.get(question.template_id or self._default_template)
        if not language or requested is None:
            return question, True
        template = in_language(requested, language, self._templates)
        if template is None:
            return question, False
        if template is not requested:
            question = dataclasses.replace(question, template_id=template.version)
        return question, True

    async def refusal(self, question: Question) -> Answer:
        """The answer to a question no template answers in its language."""
        name = language_name(question.language)
        answered = ", ".join(sorted({language_name(t.language) for t in self._templates.all()}))
        reason = f"Refused: {RefusalReason.UNSUPPORTED_LANGUAGE.value} ({question.language})"
        return Answer(
            text=f"Questions in {name} ({question.language}) cannot be answered here: no prompt template answers "
            f"in {name}. Ask in {answered}.",
            action=Action.ROUTE,
            route=await self._owners.route("", reason),
            refusal=RefusalReason.UNSUPPORTED_LANGUAGE,
            request_id=question.request_id,
            language=question.language,
            created_at=datetime.now(UTC),
        )
