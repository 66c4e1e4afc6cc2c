"""Step 1 of the pipeline: clean and validate a Question; every bad field is reported at once."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Sequence

from ragsvc.domain import Mode, Question, Role, SourceDocument
from ragsvc.errors import FieldViolation, InvalidRequest

MAX_QUERY_CHARS = 2000
MAX_SELECTION_CHARS = 10_000
MAX_HISTORY_MESSAGES = 50
MAX_MESSAGE_CHARS = 10_000
MAX_TAGS = 64
TOP_K_RANGE = (1, 20)

# C0/C1 control characters except tab and newline, which normalise to spaces below.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"\s+")


def clean_text(text: str) -> str:
    """Strip control characters and collapse whitespace."""
    return _SPACES.sub(" ", _CONTROL.sub("", text)).strip()


def validate_question(question: Question, *, default_tenant: str) -> Question:
    """The question with cleaned text and defaults applied; raises InvalidRequest naming every bad field."""
    violations: list[FieldViolation] = []
    query = clean_text(question.query)
    if not query:
        violations.append(FieldViolation("query", "must not be empty"))
    elif len(query) > MAX_QUERY_CHARS:
        violations.append(FieldViolation("query", f"must be at most {MAX_QUERY_CHARS} characters"))

    selected = _CONTROL.sub("", question.selected_text)
    if question.mode is Mode.SELECTED_TEXT and not selected.strip():
        violations.append(FieldViolation("selected_text", "must not be empty in MODE_SELECTED_TEXT"))
    if question.mode is Mode.GENERAL and selected:
        violations.append(FieldViolation("selected_text", "must be empty unless mode is MODE_SELECTED_TEXT"))
    if len(selected) > MAX_SELECTION_CHARS:
        violations.append(FieldViolation("selected_text", f"must be at most {MAX_SELECTION_CHARS} characters"))

    if len(question.chat_history) > MAX_HISTORY_MESSAGES:
        violations.append(FieldViolation("chat_history", f"must have at most {MAX_HISTORY_MESSAGES} messages"))
    for i, message in enumerate(question.chat_history):
        if message.role not in (Role.USER, Role.ASSISTANT):
            violations.append(FieldViolation(f"chat_history[{i}].role", "must be ROLE_USER or ROLE_ASSISTANT"))
        if not message.content.strip():
            violations.append(FieldViolation(f"chat_history[{i}].content", "must not be empty"))
        elif len(message.content) > MAX_MESSAGE_CHARS:
            violations.append(
                FieldViolation(f"chat_history[{i}].content", f"must be at most {MAX_MESSAGE_CHARS} characters")
            )

    if question.session_id and not _is_uuid4(question.session_id):
        violations.append(FieldViolation("session_id", "must be a UUID version 4"))
    if len(question.user_tags) > MAX_TAGS or any(not tag.strip() for tag in question.user_tags):
        violations.append(FieldViolation("user_tags", f"must be at most {MAX_TAGS} non-empty tags"))
    if question.top_k is not None and not TOP_K_RANGE[0] <= question.top_k <= TOP_K_RANGE[1]:
        violations.append(FieldViolation("retrieval.top_k", f"must be between {TOP_K_RANGE[0]} and {TOP_K_RANGE[1]}"))
    if question.score_threshold is not None and not 0.0 <= question.score_threshold <= 1.0:
        violations.append(FieldViolation("retrieval.score_threshold", "must be between 0 and 1"))
    if question.temperature is not None and not 0.0 <= question.temperature <= 2.0:
        violations.append(FieldViolation("generation.temperature", "must be between 0 and 2"))

    if violations:
        raise InvalidRequest(violations)
    return dataclasses.replace(
        question,
        query=query,
        selected_text=selected,
        tenant_id=question.tenant_id.strip() or default_tenant,
        user_tags=tuple(tag.strip() for tag in question.user_tags),
    )


def _is_uuid4(value: str) -> bool:
    try:
        return uuid.UUID(value).version == 4
    except ValueError:
        return False


_DOCUMENT_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
MEDIA_TYPES = ("text/plain", "text/markdown")


def validate_documents(documents: Sequence[SourceDocument]) -> None:
    """Raise InvalidRequest naming every bad field of an ingest batch."""
    violations: list[FieldViolation] = []
    if not documents:
        violations.append(FieldViolation("documents", "must contain at least one document"))
    seen: set[str] = set()
    for i, document in enumerate(documents):
        if not _DOCUMENT_ID.fullmatch(document.document_id):
            violations.append(FieldViolation(f"documents[{i}].document_id", "must match [A-Za-z0-9._-]{1,128}"))
        elif document.document_id in seen:
            violations.append(FieldViolation(f"documents[{i}].document_id", "is repeated in this request"))
        seen.add(document.document_id)
        if document.media_type not in MEDIA_TYPES:
            violations.append(FieldViolation(f"documents[{i}].media_type", f"must be one of {', '.join(MEDIA_TYPES)}"))
        if not 0.0 <= document.trust <= 1.0:
            violations.append(FieldViolation(f"documents[{i}].trust", "must be between 0 and 1"))
    if violations:
        raise InvalidRequest(violations)


def validate_document_id(document_id: str) -> None:
    """Raise InvalidRequest when `document_id` cannot name a document."""
    if not _DOCUMENT_ID.fullmatch(document_id):
        raise InvalidRequest([FieldViolation("document_id", "must match [A-Za-z0-9._-]{1,128}")])
