"""Admission: the question as it will be answered. It is bounded by the caller's principal (tenant and tags),
validated once (every bad field at once, and a model outside the allowlist), and checked for prompt injection:
flagged, or refused when the server is configured to reject it. Nothing runs for a question refused here."""

from __future__ import annotations

import dataclasses

from ragsvc.answering.context import CallContext
from ragsvc.budget import ModelCatalog
from ragsvc.config import HardeningSettings
from ragsvc.domain import Question
from ragsvc.errors import FieldViolation, InjectionSuspected
from ragsvc.sanitize import question_injection_patterns, validate_question


class Admission:
    def __init__(self, settings: HardeningSettings, models: ModelCatalog, *, default_tenant: str) -> None:
        self._settings = settings
        self._models = models
        self._default_tenant = default_tenant

    def admit(self, question: Question, call: CallContext) -> Question:
        """The admitted question, bound to its caller (reported on `call.report` with the injection patterns it
        matched); raises PermissionDenied, InvalidRequest (ModelNotAllowed among them) or InjectionSuspected."""
        if call.principal is not None:
            question = call.principal.scope(question)
        question = validate_question(
            question, default_tenant=self._default_tenant, max_history_messages=self._settings.max_history_messages
        )
        question = dataclasses.replace(question, caller=call.caller)
        if question.model:
            self._models.check_allowed(question.model)
        patterns = question_injection_patterns(question) if self._settings.injection_detection else ()
        call.report.question, call.report.injection_patterns = question, patterns
        if patterns and self._settings.reject_injection:
            raise InjectionSuspected(
                [FieldViolation("query", "looks like a prompt-injection attempt")],
                f"rejected: the input matches prompt-injection patterns ({', '.join(patterns)})",
            )
        return question

    def provisional(self, question: Question, call: CallContext) -> Question:
        """The question as recorded when admission refused it: in the caller's tenant, else the default, and bound
        to its caller (so that erasing the caller erases it too)."""
        tenant = call.principal.tenant_id if call.principal is not None else question.tenant_id.strip()
        return dataclasses.replace(question, tenant_id=tenant or self._default_tenant, caller=call.caller)
