"""Proto <-> domain conversion, in one place. No logic beyond mapping and enum checks."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf import duration_pb2, timestamp_pb2
from google.rpc import code_pb2

from ragsvc import domain
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.metadata import MetadataType, MetadataValue
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb

if TYPE_CHECKING:  # the CLI imports this module: it stays free of the answering service's imports
    from ragsvc.answering.conversation import SessionPage

_V = TypeVar("_V")

_MODES = {
    pb.MODE_UNSPECIFIED: domain.Mode.GENERAL,
    pb.MODE_GENERAL: domain.Mode.GENERAL,
    pb.MODE_SELECTED_TEXT: domain.Mode.SELECTED_TEXT,
}
_ROLES = {pb.ROLE_USER: domain.Role.USER, pb.ROLE_ASSISTANT: domain.Role.ASSISTANT, pb.ROLE_SYSTEM: domain.Role.SYSTEM}
_ROLES_TO_PROTO = {role: number for number, role in _ROLES.items()}
_STYLES = {
    pb.CITATION_STYLE_UNSPECIFIED: domain.CitationStyle.MARKER,
    pb.CITATION_STYLE_MARKER: domain.CitationStyle.MARKER,
    pb.CITATION_STYLE_SOURCE_ID: domain.CitationStyle.SOURCE_ID,
    pb.CITATION_STYLE_END_LIST: domain.CitationStyle.END_LIST,
}
_SEARCH_MODES = {
    pb.SEARCH_MODE_UNSPECIFIED: domain.SearchMode.HYBRID,
    pb.SEARCH_MODE_HYBRID: domain.SearchMode.HYBRID,
    pb.SEARCH_MODE_DENSE: domain.SearchMode.DENSE,
    pb.SEARCH_MODE_SPARSE: domain.SearchMode.SPARSE,
}
RESPONSE_STYLES = {
    pb.RESPONSE_STYLE_UNSPECIFIED: None,
    pb.RESPONSE_STYLE_CONCISE: domain.ResponseStyle.CONCISE,
    pb.RESPONSE_STYLE_DETAILED: domain.ResponseStyle.DETAILED,
    pb.RESPONSE_STYLE_BULLETS: domain.ResponseStyle.BULLETS,
}
RESPONSE_STYLES_TO_PROTO = {style: number for number, style in RESPONSE_STYLES.items()}
_STRICTNESS = {
    pb.STRICTNESS_UNSPECIFIED: domain.Strictness.NORMAL,
    pb.STRICTNESS_LENIENT: domain.Strictness.LENIENT,
    pb.STRICTNESS_NORMAL: domain.Strictness.NORMAL,
    pb.STRICTNESS_STRICT: domain.Strictness.STRICT,
}
_QUERY_CLASSES = {
    domain.QueryClass.FACTUAL: pb.QUERY_CLASS_FACTUAL,
    domain.QueryClass.PROCEDURAL: pb.QUERY_CLASS_PROCEDURAL,
    domain.QueryClass.CLARIFICATION: pb.QUERY_CLASS_CLARIFICATION,
    domain.QueryClass.GREETING: pb.QUERY_CLASS_GREETING,
}
_ACTIONS = {domain.Action.CITE: pb.ACTION_CITE, domain.Action.ROUTE: pb.ACTION_ROUTE}
_STREAM_POLICIES = {
    pb.STREAM_POLICY_UNSPECIFIED: None,
    pb.STREAM_POLICY_VALIDATED: domain.StreamPolicy.VALIDATED,
    pb.STREAM_POLICY_RAW: domain.StreamPolicy.RAW,
}
CITATION_POLICIES = {
    pb.CITATION_POLICY_UNSPECIFIED: None,
    pb.CITATION_POLICY_STRICT: domain.CitationPolicy.STRICT,
    pb.CITATION_POLICY_DROP_INVALID: domain.CitationPolicy.DROP_INVALID,
}
CITATION_POLICIES_TO_PROTO = {policy: number for number, policy in CITATION_POLICIES.items()}
_REWRITES = {
    domain.QueryRewrite.NONE: pb.QUERY_REWRITE_NONE,
    domain.QueryRewrite.RULE: pb.QUERY_REWRITE_RULE,
    domain.QueryRewrite.LLM: pb.QUERY_REWRITE_LLM,
    domain.QueryRewrite.RULE_FALLBACK: pb.QUERY_REWRITE_RULE_FALLBACK,
}
_PURPOSES = {
    domain.CallPurpose.ANSWER: pb.MODEL_CALL_PURPOSE_ANSWER,
    domain.CallPurpose.CONDENSE: pb.MODEL_CALL_PURPOSE_CONDENSE,
    domain.CallPurpose.CLASSIFY: pb.MODEL_CALL_PURPOSE_CLASSIFY,
    domain.CallPurpose.RERUN: pb.MODEL_CALL_PURPOSE_RERUN,
    domain.CallPurpose.SELF_SCORE: pb.MODEL_CALL_PURPOSE_SELF_SCORE,
    domain.CallPurpose.FOLLOW_UPS: pb.MODEL_CALL_PURPOSE_FOLLOW_UPS,
}
_REFUSALS = {
    domain.RefusalReason.NONE: pb.REFUSAL_REASON_NONE,
    domain.RefusalReason.NO_CHUNKS: pb.REFUSAL_REASON_NO_CHUNKS,
    domain.RefusalReason.SCORE_GATE: pb.REFUSAL_REASON_SCORE_GATE,
    domain.RefusalReason.UNSUPPORTED_ANSWER: pb.REFUSAL_REASON_UNSUPPORTED_ANSWER,
    domain.RefusalReason.INVALID_CITATIONS: pb.REFUSAL_REASON_INVALID_CITATIONS,
    domain.RefusalReason.NOT_IN_SELECTION: pb.REFUSAL_REASON_NOT_IN_SELECTION,
    domain.RefusalReason.INSUFFICIENT_EVIDENCE: pb.REFUSAL_REASON_INSUFFICIENT_EVIDENCE,
    domain.RefusalReason.UNSUPPORTED_LANGUAGE: pb.REFUSAL_REASON_UNSUPPORTED_LANGUAGE,
}


def _enum(table: Mapping[Any, _V], value: int, field: str, violations: list[FieldViolation]) -> _V:
    """table[value], or a violation naming `field` when the client sent a number the table does not know."""
    if value not in table:
        violations.append(FieldViolation(field, f"unsupported value {value}"))
        return next(iter(table.values()))
    return table[value]


def question_from_proto(request: pb.AskRequest | pb.AskStreamRequest, request_id: str) -> domain.Question:
    """AskRequest and AskStreamRequest mirror each other field for field, so one function serves both."""
    violations: list[FieldViolation] = []
    history = tuple(
        domain.ChatMessage(_enum(_ROLES, m.role, f"chat_history[{i}].role", violations), m.content)
        for i, m in enumerate(request.chat_history)
    )
    retrieval, generation = request.retrieval, request.generation
    question = domain.Question(
        query=request.query,
        tenant_id=request.tenant_id,
        user_tags=tuple(request.user_tags),
        chat_history=history,
        session_id=request.session_id,
        mode=_enum(_MODES, request.mode, "mode", violations),
        selected_text=request.selected_text,
        top_k=retrieval.top_k if retrieval.HasField("top_k") else None,
        score_threshold=retrieval.score_threshold if retrieval.HasField("score_threshold") else None,
        filters=domain.MetadataFilter(
            source_urls=tuple(retrieval.filter.source_urls),
            page_titles=tuple(retrieval.filter.page_titles),
            section_headings=tuple(retrieval.filter.section_headings),
            expression=retrieval.filter.expression,
        ),
        search_mode=_enum(_SEARCH_MODES, retrieval.search_mode, "retrieval.search_mode", violations),
        response_style=_enum(RESPONSE_STYLES, generation.response_style, "generation.response_style", violations),
        model=generation.model,
        template_id=generation.template_id,
        citation_style=_enum(_STYLES, generation.citation_style, "generation.citation_style", violations),
        strictness=_enum(_STRICTNESS, generation.strictness, "generation.strictness", violations),
        temperature=generation.temperature if generation.HasField("temperature") else None,
        seed=generation.seed if generation.HasField("seed") else None,
        citation_policy=_enum(CITATION_POLICIES, generation.citation_policy, "generation.citation_policy", violations),
        explain=request.explain,
        dry_run=request.dry_run,
        follow_up_count=request.follow_up_count if request.HasField("follow_up_count") else None,
        idempotency_key=request.idempotency_key,
        request_id=request_id,
        stream_policy=_enum(_STREAM_POLICIES, request.stream_policy, "stream_policy", violations),
    )
    if violations:
        raise InvalidRequest(violations)
    return question


def _duration(ms: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromNanoseconds(int(ms * 1e6))
    return duration


def citation_to_proto(citation: domain.Citation) -> pb.Citation:
    return _chunk_to_proto(citation.chunk, citation.relevance_score, marker=citation.marker, rank=citation.rank_score)


def _scored_to_proto(scored: domain.ScoredChunk, *, marker: int = 0) -> pb.Citation:
    return _chunk_to_proto(scored.chunk, scored.score, marker=marker, rank=scored.rank_score)


def _chunk_to_proto(chunk: domain.Chunk, score: float, *, marker: int = 0, rank: float | None = None) -> pb.Citation:
    snippet = domain.Citation(marker=marker, chunk=chunk, relevance_score=score).snippet
    return pb.Citation(
        marker=marker,
        source_id=chunk.source_id,
        document_id=chunk.document_id,
        document_name=chunk.document_name,
        chunk_index=chunk.chunk_index,
        page_number=chunk.page_number,
        section=chunk.section,
        source_url=chunk.source_url,
        relevance_score=score,
        snippet=snippet,
        text=chunk.text,
        char_start=chunk.char_start,
        char_end=chunk.char_end,
        line_start=chunk.line_start,
        line_end=chunk.line_end,
        page_title=chunk.page_title,
        rank_score=rank,
        page_numbers=chunk.page_numbers,
    )


def answer_to_proto(answer: domain.Answer) -> pb.Answer:
    confidence, timings, flags = answer.confidence, answer.timings, answer.flags
    message = pb.Answer(
        text=answer.text,
        citations=[citation_to_proto(c) for c in answer.citations],
        confidence=pb.Confidence(
            overall=confidence.overall, retrieval=confidence.retrieval, coverage=confidence.coverage, llm=confidence.llm
        ),
        action=_ACTIONS[answer.action],
        grounded=answer.grounded,
        refusal_reason=_REFUSALS[answer.refusal],
        candidates=[_scored_to_proto(s) for s in answer.candidates],
        model=answer.model,
        usage=_usage(answer.usage),
        timings=pb.Timings(
            retrieval=_duration(timings.retrieval_ms),
            budget=_duration(timings.budget_ms),
            generation=_duration(timings.generation_ms),
            time_to_first_token=_duration(timings.first_token_ms),
            total=_duration(timings.total_ms),
            embedding=_duration(timings.embedding_ms),
            validation=_duration(timings.validation_ms),
            store=_duration(timings.store_ms),
        ),
        context_chunks_used=answer.context_chunks_used,
        context_tokens_used=answer.context_tokens_used,
        prompt_template_version=answer.template_version,
        follow_up_questions=list(answer.follow_up_questions),
        flags=pb.AnswerFlags(
            hallucination_detected=flags.hallucination_detected,
            mitigation_applied=flags.mitigation_applied,
            cache_hit=flags.cache_hit,
            degraded=flags.degraded,
            injection_suspected=flags.injection_suspected,
            redactions_applied=flags.redactions_applied,
            partial=flags.partial,
            repetition_stopped=flags.repetition_stopped,
            citations_dropped=flags.citations_dropped,
            citations_attributed=flags.citations_attributed,
        ),
        request_id=answer.request_id,
        query_class=_QUERY_CLASSES[answer.query_class],
        cost_estimate_usd=answer.cost_estimate_usd,
        index_version=answer.index_version,
        language=answer.language,
    )
    if answer.created_at is not None:
        message.create_time.CopyFrom(timestamp_of(answer.created_at))
    if answer.route is not None:
        route = answer.route
        message.route.CopyFrom(
            pb.RouteTarget(
                tag=route.tag,
                owner_user_id=route.owner_user_id,
                owner_email=route.owner_email,
                reason=route.reason,
                fallback=route.fallback,
            )
        )
    if answer.explanation is not None:
        explanation = answer.explanation
        message.explanation.CopyFrom(
            pb.Explanation(
                prompt=[pb.ChatMessage(role=_ROLES_TO_PROTO[m.role], content=m.content) for m in explanation.prompt],
                packed_chunks=[_scored_to_proto(s, marker=n) for n, s in enumerate(explanation.packed, start=1)],
                prompt_tokens=explanation.prompt_tokens,
                search_query=answer.search.text if answer.search is not None else "",
                query_rewrite=_REWRITES[answer.search.rewrite] if answer.search is not None else pb.QUERY_REWRITE_UNSPECIFIED,
                draft=answer.draft,
                model_usage=[
                    pb.ModelUsage(
                        purpose=_PURPOSES[u.purpose],
                        model=u.model,
                        calls=u.calls,
                        usage=_usage(u.usage),
                        cost_estimate_usd=u.cost_estimate_usd,
                    )
                    for u in answer.model_usage
                ],
            )
        )
    return message


def _usage(usage: domain.Usage) -> pb.Usage:
    return pb.Usage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)


def event_to_proto(event: domain.Event) -> pb.AskStreamResponse:
    if isinstance(event, domain.TextDelta):
        return pb.AskStreamResponse(text_delta=event.text)
    if isinstance(event, domain.Citation):
        return pb.AskStreamResponse(citation=citation_to_proto(event))
    return pb.AskStreamResponse(answer=answer_to_proto(event))


def documents_from_proto(request: index_pb.IngestDocumentsRequest, default_tenant: str) -> list[domain.SourceDocument]:
    """The documents of an ingest; InvalidRequest naming each metadata value that sets no kind."""
    tenant = request.tenant_id.strip() or default_tenant
    violations: list[FieldViolation] = []
    documents = [
        domain.SourceDocument(
            document_id=d.document_id,
            name=d.name or d.document_id,
            content=d.content,
            media_type=d.media_type or "text/plain",
            tenant_id=tenant,
            tags=tuple(d.tags),
            source_url=d.source_url,
            title=d.title,
            trust=d.trust if d.HasField("trust") else None,
            published_at=d.published_date,
            confidential=d.confidential,
            metadata=_metadata_from_proto(d.metadata, f"documents[{i}]", violations),
        )
        for i, d in enumerate(request.documents)
    ]
    if violations:
        raise InvalidRequest(violations)
    return documents


def _metadata_from_proto(
    values: Mapping[str, index_pb.MetadataValue], at: str, violations: list[FieldViolation]
) -> dict[str, MetadataValue]:
    metadata: dict[str, MetadataValue] = {}
    for key, value in sorted(values.items()):
        kind = value.WhichOneof("kind")
        if kind is None:
            violations.append(FieldViolation(f'{at}.metadata["{key}"]', "sets no value"))
        elif kind == "timestamp_value":
            metadata[key] = value.timestamp_value.ToDatetime(tzinfo=UTC)
        else:
            metadata[key] = getattr(value, kind)
    return metadata


def metadata_to_proto(metadata: Mapping[str, MetadataValue]) -> dict[str, index_pb.MetadataValue]:
    values = {}
    for key, value in metadata.items():
        if isinstance(value, bool):
            values[key] = index_pb.MetadataValue(bool_value=value)
        elif isinstance(value, int | float):
            values[key] = index_pb.MetadataValue(number_value=float(value))
        elif isinstance(value, datetime):
            values[key] = index_pb.MetadataValue(timestamp_value=timestamp_of(value))
        else:
            values[key] = index_pb.MetadataValue(string_value=value)
    return values


def document_to_proto(document: domain.SourceDocument) -> index_pb.Document:
    """The wire form of a document to ingest (what clients such as `ragsvc ingest` send)."""
    return index_pb.Document(
        document_id=document.document_id,
        name=document.name,
        content=document.content,
        media_type=document.media_type,
        tags=document.tags,
        source_url=document.source_url,
        title=document.title,
        trust=document.trust,
        published_date=document.published_at,
        confidential=document.confidential,
        metadata=metadata_to_proto(document.metadata),
    )


def ingest_result_to_proto(result: domain.IngestResult, field_prefix: str) -> index_pb.DocumentResult:
    """A document's result; its failure's fields named from the request's root (`field_prefix`: "documents[2]"
    or "document")."""
    message = index_pb.DocumentResult(
        document_id=result.document_id,
        chunks_created=result.chunks_created,
        chunks_indexed=result.chunks_indexed,
        elapsed=_duration(result.elapsed_ms),
        error=result.error,
        unchanged=result.unchanged,
        encoding=result.encoding,
    )
    if (failure := result.failure) is not None:
        message.failure.CopyFrom(
            index_pb.DocumentFailure(
                code=code_pb2.INVALID_ARGUMENT,
                message=failure.message,
                reason=failure.reason,
                metadata=failure.metadata,
                field_violations=[
                    index_pb.DocumentFailure.FieldViolation(field=f"{field_prefix}.{v.field}", description=v.description)
                    for v in failure.violations
                ],
            )
        )
    return message


def stored_document_to_proto(document: domain.StoredDocument) -> index_pb.IndexedDocument:
    message = index_pb.IndexedDocument(
        document_id=document.document_id,
        name=document.name,
        title=document.title,
        tags=document.tags,
        source_url=document.source_url,
        confidential=document.confidential,
        chunk_count=document.chunks,
        metadata=metadata_to_proto(document.metadata),
        trust=document.trust,
    )
    source = document.source
    if source is not None:
        message.media_type = source.media_type
        message.size_bytes = source.content_bytes
        message.content_sha256 = source.content_sha256
        message.encoding = source.encoding
        ingested = timestamp_pb2.Timestamp()
        ingested.FromNanoseconds(round(source.ingested_at * 1e9))
        message.ingest_time.CopyFrom(ingested)
    return message


def index_stats_to_proto(stats: domain.IndexStats, keys: Mapping[str, MetadataType]) -> index_pb.GetIndexStatsResponse:
    return index_pb.GetIndexStatsResponse(
        document_count=stats.documents,
        chunk_count=stats.chunks,
        content_bytes=stats.content_bytes,
        engine=stats.engine,
        metadata_keys=[index_pb.MetadataKey(name=name, type=kind.value) for name, kind in sorted(keys.items())],
    )


def timestamp_of(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


def session_to_proto(page: SessionPage) -> pb.Session:
    """A page of a session's turns as GetSession returns it."""
    session = pb.Session(
        session_id=page.key.session_id,
        tenant_id=page.key.tenant_id,
        turns=[
            pb.SessionTurn(
                turn_number=turn.number,
                query=turn.query,
                answer=turn.answer,
                cited_document_ids=turn.cited_document_ids,
                create_time=timestamp_of(turn.created_at),
            )
            for turn in page.turns
        ],
    )
    if page.created_at is not None and page.updated_at is not None:
        session.create_time.CopyFrom(timestamp_of(page.created_at))
        session.update_time.CopyFrom(timestamp_of(page.updated_at))
    return session
