"""Step 1 of the pipeline: clean and validate a Question; every bad field is reported at once."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Sequence

from ragsvc.domain import Mode, Question, Role, SourceDocument
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.ingest.media import parse_media_type
from ragsvc.metadata import PUBLISHED_AT, SOURCE_TYPE, MetadataType, parse_timestamp, problems, type_of
from ragsvc.source_trust import SourceTrust

MAX_QUERY_CHARS = 2000
MAX_SELECTION_CHARS = 10_000
MAX_HISTORY_MESSAGES = 50
MAX_MESSAGE_CHARS = 10_000
MAX_TAGS = 64
TOP_K_RANGE = (1, 20)
MAX_FOLLOW_UPS = 5

# C0/C1 control characters except tab and newline, which normalise to spaces below.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"\s+")


def clean_text(text: str) -> str:
    """Strip control characters and collapse whitespace."""
    return _SPACES.sub(" ", _CONTROL.sub("", text)).strip()


def validate_question(question: Question, *, default_tenant: str, max_history_messages: int = MAX_HISTORY_MESSAGES) -> Question:
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

    if len(question.chat_history) > max_history_messages:
        violations.append(FieldViolation("chat_history", f"must have at most {max_history_messages} messages"))
    for i, message in enumerate(question.chat_history):
        if message.role not in (Role.USER, Role.ASSISTANT):
            violations.append(FieldViolation(f"chat_history[{i}].role", "must be ROLE_USER or ROLE_ASSISTANT"))
        if not message.content.strip():
            violations.append(FieldViolation(f"chat_history[{i}].content", "must not be empty"))
        elif len(message.content) > MAX_MESSAGE_CHARS:
            violations.append(FieldViolation(f"chat_history[{i}].content", f"must be at most {MAX_MESSAGE_CHARS} characters"))

    violations += tenant_violations(question.tenant_id)
    if question.session_id and not _is_uuid4(question.session_id):
        violations.append(FieldViolation("session_id", "must be a UUID version 4"))
    if len(question.user_tags) > MAX_TAGS or any(not tag.strip() for tag in question.user_tags):
        violations.append(FieldViolation("user_tags", f"must be at most {MAX_TAGS} non-empty tags"))
    if question.follow_up_count is not None and not 0 <= question.follow_up_count <= MAX_FOLLOW_UPS:
        violations.append(FieldViolation("follow_up_count", f"must be between 0 and {MAX_FOLLOW_UPS}"))
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


# Prompt-injection patterns (R-003-02): instruction overrides, role markers, markup that executes, SQL injection,
# and text made mostly of special characters. Each has a name, reported in the request log.
INJECTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        (
            "ignore_instructions",
            r"\b(ignore|disregard|override|bypass|skip)\s+(all\s+|any\s+|the\s+|your\s+|of\s+)*"
            r"(previous|prior|above|earlier|preceding|system|original)\s+(instructions?|prompts?|rules|directions)",
        ),
        (
            "forget_instructions",
            r"\bforget\s+(all\s+|about\s+)?(your|the|previous|prior|these|those|all)\s+(\w+\s+){0,2}"
            r"(instructions?|rules|prompts?|guidelines)\b"
            r"|\bforget\s+(everything|what)\s+you\s+(were|have\s+been)\s+told",
        ),
        ("role_marker", r"(^|[.!?\]>}]\s*)(system|assistant|developer)\s*:|<\|?(im_start|system)\|?>|\[/?INST\]"),
        (
            "reveal_prompt",
            r"\b(reveal|show|print|repeat|leak)\s+(me\s+)?(your\s+(system\s+|initial\s+|hidden\s+)?"
            r"(prompt|instructions)|the\s+(system|initial|hidden)\s+(prompt|instructions))",
        ),
        ("role_override", r"\byou\s+are\s+now\s+(a|an|the|in|DAN)\b|\bnew\s+instructions\s*:"),
        ("markup", r"<\s*/?\s*(script|iframe|object|embed)\b|javascript\s*:"),
        (
            "sql_injection",
            r"(['\"]\s*(or|and)\s+['\"]?\w+['\"]?\s*=\s*['\"]?\w+)|(\bunion\s+(all\s+)?select\b)"
            r"|(;\s*(drop|delete|truncate|alter|insert|update)\s+(table|from|into|database)\b)|('\s*;?\s*--)",
        ),
    )
)
SPECIAL_CHARS_MIN_LENGTH = 20
SPECIAL_CHARS_MAX_SHARE = 0.4


def injection_patterns(text: str) -> tuple[str, ...]:
    """The names of the prompt-injection patterns `text` matches (R-003-02); empty when it looks benign."""
    found = [name for name, pattern in INJECTION_PATTERNS if pattern.search(text)]
    stripped = "".join(text.split())
    if len(stripped) >= SPECIAL_CHARS_MIN_LENGTH:
        special = sum(1 for c in stripped if not c.isalnum())
        if special / len(stripped) > SPECIAL_CHARS_MAX_SHARE:
            found.append("special_characters")
    return tuple(found)


def without_injections(text: str) -> str:
    """`text` with the spans that match an injection pattern removed: what the caller asks, without the attack."""
    for _, pattern in INJECTION_PATTERNS:
        text = pattern.sub(" ", text)
    return text


def question_injection_patterns(question: Question) -> tuple[str, ...]:
    """The injection patterns found in everything the caller wrote: query, selection and chat history."""
    texts = (question.query, question.selected_text, *(m.content for m in question.chat_history))
    return tuple(dict.fromkeys(name for text in texts if text for name in injection_patterns(text)))


def _is_uuid4(value: str) -> bool:
    try:
        return uuid.UUID(value).version == 4
    except ValueError:
        return False


_DOCUMENT_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
# A tenant id: letters, digits, ".", "_" and "-", starting with a letter or digit (so never "..", nor an option).
TENANT_ID_PATTERN = "[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_TENANT_ID = re.compile(TENANT_ID_PATTERN)


def tenant_violations(tenant_id: str, field: str = "tenant_id") -> list[FieldViolation]:
    """The violation of a request's tenant id, if it has one: empty (the default tenant) or TENANT_ID_PATTERN,
    around which spaces are ignored."""
    tenant_id = tenant_id.strip()
    if not tenant_id or _TENANT_ID.fullmatch(tenant_id):
        return []
    return [FieldViolation(field, f"must match {TENANT_ID_PATTERN} (or be empty for the default tenant)")]


def validate_tenant_id(tenant_id: str, field: str = "tenant_id") -> None:
    """Raise InvalidRequest when `tenant_id` is neither empty nor a tenant id (TENANT_ID_PATTERN)."""
    if violations := tenant_violations(tenant_id, field):
        raise InvalidRequest(violations)


def validate_documents(documents: Sequence[SourceDocument], sources: SourceTrust) -> None:
    """Raise InvalidRequest naming every bad field of an ingest batch (`sources`: the source types there are)."""
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
        try:
            parse_media_type(document.media_type)
        except ValueError as exc:
            violations.append(FieldViolation(f"documents[{i}].media_type", str(exc)))
        if document.trust is not None and not 0.0 <= document.trust <= 1.0:
            violations.append(FieldViolation(f"documents[{i}].trust", "must be between 0 and 1"))
        violations += _metadata_violations(document, f"documents[{i}]", sources)
    if violations:
        raise InvalidRequest(violations)


def _metadata_violations(document: SourceDocument, at: str, sources: SourceTrust) -> list[FieldViolation]:
    """What is wrong with a document's metadata and the fields that fill its own keys (`ragsvc.metadata`)."""
    found = [FieldViolation(f'{at}.metadata["{key}"]' if key else f"{at}.metadata", why)
             for key, why in problems(document.metadata)]  # fmt: skip
    source_type = document.metadata.get(SOURCE_TYPE)
    if source_type is not None and (not isinstance(source_type, str) or source_type not in sources.types):
        why = f"must be a string naming a source type of RAG_SOURCE_TRUST: {', '.join(sources.types)}"
        found.append(FieldViolation(f'{at}.metadata["{SOURCE_TYPE}"]', why))
    published = document.metadata.get(PUBLISHED_AT)
    if published is not None and type_of(published) is not MetadataType.TIMESTAMP:
        found.append(FieldViolation(f'{at}.metadata["{PUBLISHED_AT}"]', "must be a timestamp"))
    if document.published_at:
        try:
            date = parse_timestamp(document.published_at)
        except ValueError as exc:
            found.append(FieldViolation(f"{at}.published_date", str(exc)))
        else:
            if published is not None and type_of(published) is MetadataType.TIMESTAMP and published != date:
                why = f"differs from metadata {PUBLISHED_AT}: set one of them"
                found.append(FieldViolation(f"{at}.published_date", why))
    return found


def validate_session_id(session_id: str) -> None:
    """Raise InvalidRequest unless `session_id` names a session (a UUID version 4, as AskRequest requires)."""
    if not _is_uuid4(session_id):
        raise InvalidRequest([FieldViolation("session_id", "must be a UUID version 4")])


def validate_document_id(document_id: str) -> None:
    """Raise InvalidRequest when `document_id` cannot name a document."""
    if not _DOCUMENT_ID.fullmatch(document_id):
        raise InvalidRequest([FieldViolation("document_id", "must match [A-Za-z0-9._-]{1,128}")])
