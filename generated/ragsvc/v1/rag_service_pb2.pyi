import datetime

from google.longrunning import operations_pb2 as _operations_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StreamPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STREAM_POLICY_UNSPECIFIED: _ClassVar[StreamPolicy]
    STREAM_POLICY_VALIDATED: _ClassVar[StreamPolicy]
    STREAM_POLICY_RAW: _ClassVar[StreamPolicy]

class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODE_UNSPECIFIED: _ClassVar[Mode]
    MODE_GENERAL: _ClassVar[Mode]
    MODE_SELECTED_TEXT: _ClassVar[Mode]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_USER: _ClassVar[Role]
    ROLE_ASSISTANT: _ClassVar[Role]
    ROLE_SYSTEM: _ClassVar[Role]

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]
    SEARCH_MODE_DENSE: _ClassVar[SearchMode]
    SEARCH_MODE_SPARSE: _ClassVar[SearchMode]

class ResponseStyle(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESPONSE_STYLE_UNSPECIFIED: _ClassVar[ResponseStyle]
    RESPONSE_STYLE_CONCISE: _ClassVar[ResponseStyle]
    RESPONSE_STYLE_DETAILED: _ClassVar[ResponseStyle]
    RESPONSE_STYLE_BULLETS: _ClassVar[ResponseStyle]

class CitationPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CITATION_POLICY_UNSPECIFIED: _ClassVar[CitationPolicy]
    CITATION_POLICY_STRICT: _ClassVar[CitationPolicy]
    CITATION_POLICY_DROP_INVALID: _ClassVar[CitationPolicy]

class CitationStyle(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CITATION_STYLE_UNSPECIFIED: _ClassVar[CitationStyle]
    CITATION_STYLE_MARKER: _ClassVar[CitationStyle]
    CITATION_STYLE_SOURCE_ID: _ClassVar[CitationStyle]
    CITATION_STYLE_END_LIST: _ClassVar[CitationStyle]

class Strictness(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STRICTNESS_UNSPECIFIED: _ClassVar[Strictness]
    STRICTNESS_LENIENT: _ClassVar[Strictness]
    STRICTNESS_NORMAL: _ClassVar[Strictness]
    STRICTNESS_STRICT: _ClassVar[Strictness]

class QueryClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUERY_CLASS_UNSPECIFIED: _ClassVar[QueryClass]
    QUERY_CLASS_FACTUAL: _ClassVar[QueryClass]
    QUERY_CLASS_PROCEDURAL: _ClassVar[QueryClass]
    QUERY_CLASS_CLARIFICATION: _ClassVar[QueryClass]
    QUERY_CLASS_GREETING: _ClassVar[QueryClass]

class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTION_UNSPECIFIED: _ClassVar[Action]
    ACTION_CITE: _ClassVar[Action]
    ACTION_ROUTE: _ClassVar[Action]

class RefusalReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REFUSAL_REASON_UNSPECIFIED: _ClassVar[RefusalReason]
    REFUSAL_REASON_NONE: _ClassVar[RefusalReason]
    REFUSAL_REASON_NO_CHUNKS: _ClassVar[RefusalReason]
    REFUSAL_REASON_SCORE_GATE: _ClassVar[RefusalReason]
    REFUSAL_REASON_UNSUPPORTED_ANSWER: _ClassVar[RefusalReason]
    REFUSAL_REASON_INVALID_CITATIONS: _ClassVar[RefusalReason]
    REFUSAL_REASON_NOT_IN_SELECTION: _ClassVar[RefusalReason]
    REFUSAL_REASON_INSUFFICIENT_EVIDENCE: _ClassVar[RefusalReason]
    REFUSAL_REASON_UNSUPPORTED_LANGUAGE: _ClassVar[RefusalReason]

class QueryRewrite(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUERY_REWRITE_UNSPECIFIED: _ClassVar[QueryRewrite]
    QUERY_REWRITE_NONE: _ClassVar[QueryRewrite]
    QUERY_REWRITE_RULE: _ClassVar[QueryRewrite]
    QUERY_REWRITE_LLM: _ClassVar[QueryRewrite]
    QUERY_REWRITE_RULE_FALLBACK: _ClassVar[QueryRewrite]

class ModelCallPurpose(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODEL_CALL_PURPOSE_UNSPECIFIED: _ClassVar[ModelCallPurpose]
    MODEL_CALL_PURPOSE_ANSWER: _ClassVar[ModelCallPurpose]
    MODEL_CALL_PURPOSE_CONDENSE: _ClassVar[ModelCallPurpose]
    MODEL_CALL_PURPOSE_CLASSIFY: _ClassVar[ModelCallPurpose]
    MODEL_CALL_PURPOSE_RERUN: _ClassVar[ModelCallPurpose]
    MODEL_CALL_PURPOSE_SELF_SCORE: _ClassVar[ModelCallPurpose]
    MODEL_CALL_PURPOSE_FOLLOW_UPS: _ClassVar[ModelCallPurpose]
STREAM_POLICY_UNSPECIFIED: StreamPolicy
STREAM_POLICY_VALIDATED: StreamPolicy
STREAM_POLICY_RAW: StreamPolicy
MODE_UNSPECIFIED: Mode
MODE_GENERAL: Mode
MODE_SELECTED_TEXT: Mode
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_HYBRID: SearchMode
SEARCH_MODE_DENSE: SearchMode
SEARCH_MODE_SPARSE: SearchMode
RESPONSE_STYLE_UNSPECIFIED: ResponseStyle
RESPONSE_STYLE_CONCISE: ResponseStyle
RESPONSE_STYLE_DETAILED: ResponseStyle
RESPONSE_STYLE_BULLETS: ResponseStyle
CITATION_POLICY_UNSPECIFIED: CitationPolicy
CITATION_POLICY_STRICT: CitationPolicy
CITATION_POLICY_DROP_INVALID: CitationPolicy
CITATION_STYLE_UNSPECIFIED: CitationStyle
CITATION_STYLE_MARKER: CitationStyle
CITATION_STYLE_SOURCE_ID: CitationStyle
CITATION_STYLE_END_LIST: CitationStyle
STRICTNESS_UNSPECIFIED: Strictness
STRICTNESS_LENIENT: Strictness
STRICTNESS_NORMAL: Strictness
STRICTNESS_STRICT: Strictness
QUERY_CLASS_UNSPECIFIED: QueryClass
QUERY_CLASS_FACTUAL: QueryClass
QUERY_CLASS_PROCEDURAL: QueryClass
QUERY_CLASS_CLARIFICATION: QueryClass
QUERY_CLASS_GREETING: QueryClass
ACTION_UNSPECIFIED: Action
ACTION_CITE: Action
ACTION_ROUTE: Action
REFUSAL_REASON_UNSPECIFIED: RefusalReason
REFUSAL_REASON_NONE: RefusalReason
REFUSAL_REASON_NO_CHUNKS: RefusalReason
REFUSAL_REASON_SCORE_GATE: RefusalReason
REFUSAL_REASON_UNSUPPORTED_ANSWER: RefusalReason
REFUSAL_REASON_INVALID_CITATIONS: RefusalReason
REFUSAL_REASON_NOT_IN_SELECTION: RefusalReason
REFUSAL_REASON_INSUFFICIENT_EVIDENCE: RefusalReason
REFUSAL_REASON_UNSUPPORTED_LANGUAGE: RefusalReason
QUERY_REWRITE_UNSPECIFIED: QueryRewrite
QUERY_REWRITE_NONE: QueryRewrite
QUERY_REWRITE_RULE: QueryRewrite
QUERY_REWRITE_LLM: QueryRewrite
QUERY_REWRITE_RULE_FALLBACK: QueryRewrite
MODEL_CALL_PURPOSE_UNSPECIFIED: ModelCallPurpose
MODEL_CALL_PURPOSE_ANSWER: ModelCallPurpose
MODEL_CALL_PURPOSE_CONDENSE: ModelCallPurpose
MODEL_CALL_PURPOSE_CLASSIFY: ModelCallPurpose
MODEL_CALL_PURPOSE_RERUN: ModelCallPurpose
MODEL_CALL_PURPOSE_SELF_SCORE: ModelCallPurpose
MODEL_CALL_PURPOSE_FOLLOW_UPS: ModelCallPurpose

class GetSessionRequest(_message.Message):
    __slots__ = ("tenant_id", "session_id", "user_tags", "page_size", "page_token")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_TAGS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    session_id: str
    user_tags: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    page_token: str
    def __init__(self, tenant_id: _Optional[str] = ..., session_id: _Optional[str] = ..., user_tags: _Optional[_Iterable[str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ("session", "next_page_token")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    session: Session
    next_page_token: str
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("session_id", "tenant_id", "create_time", "update_time", "turns")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tenant_id: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    turns: _containers.RepeatedCompositeFieldContainer[SessionTurn]
    def __init__(self, session_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., turns: _Optional[_Iterable[_Union[SessionTurn, _Mapping]]] = ...) -> None: ...

class SessionTurn(_message.Message):
    __slots__ = ("turn_number", "query", "answer", "cited_document_ids", "create_time")
    TURN_NUMBER_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CITED_DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    turn_number: int
    query: str
    answer: str
    cited_document_ids: _containers.RepeatedScalarFieldContainer[str]
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, turn_number: _Optional[int] = ..., query: _Optional[str] = ..., answer: _Optional[str] = ..., cited_document_ids: _Optional[_Iterable[str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ("tenant_id", "session_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    session_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ("turns_deleted", "audit_records_erased")
    TURNS_DELETED_FIELD_NUMBER: _ClassVar[int]
    AUDIT_RECORDS_ERASED_FIELD_NUMBER: _ClassVar[int]
    turns_deleted: int
    audit_records_erased: int
    def __init__(self, turns_deleted: _Optional[int] = ..., audit_records_erased: _Optional[int] = ...) -> None: ...

class AskRequest(_message.Message):
    __slots__ = ("query", "tenant_id", "user_tags", "chat_history", "session_id", "mode", "selected_text", "retrieval", "generation", "explain", "dry_run", "idempotency_key", "follow_up_count", "stream_policy")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_TAGS_FIELD_NUMBER: _ClassVar[int]
    CHAT_HISTORY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SELECTED_TEXT_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_COUNT_FIELD_NUMBER: _ClassVar[int]
    STREAM_POLICY_FIELD_NUMBER: _ClassVar[int]
    query: str
    tenant_id: str
    user_tags: _containers.RepeatedScalarFieldContainer[str]
    chat_history: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    session_id: str
    mode: Mode
    selected_text: str
    retrieval: RetrievalOptions
    generation: GenerationOptions
    explain: bool
    dry_run: bool
    idempotency_key: str
    follow_up_count: int
    stream_policy: StreamPolicy
    def __init__(self, query: _Optional[str] = ..., tenant_id: _Optional[str] = ..., user_tags: _Optional[_Iterable[str]] = ..., chat_history: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., session_id: _Optional[str] = ..., mode: _Optional[_Union[Mode, str]] = ..., selected_text: _Optional[str] = ..., retrieval: _Optional[_Union[RetrievalOptions, _Mapping]] = ..., generation: _Optional[_Union[GenerationOptions, _Mapping]] = ..., explain: _Optional[bool] = ..., dry_run: _Optional[bool] = ..., idempotency_key: _Optional[str] = ..., follow_up_count: _Optional[int] = ..., stream_policy: _Optional[_Union[StreamPolicy, str]] = ...) -> None: ...

class AskResponse(_message.Message):
    __slots__ = ("answer",)
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    answer: Answer
    def __init__(self, answer: _Optional[_Union[Answer, _Mapping]] = ...) -> None: ...

class AskStreamRequest(_message.Message):
    __slots__ = ("query", "tenant_id", "user_tags", "chat_history", "session_id", "mode", "selected_text", "retrieval", "generation", "explain", "dry_run", "idempotency_key", "follow_up_count", "stream_policy")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_TAGS_FIELD_NUMBER: _ClassVar[int]
    CHAT_HISTORY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SELECTED_TEXT_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_COUNT_FIELD_NUMBER: _ClassVar[int]
    STREAM_POLICY_FIELD_NUMBER: _ClassVar[int]
    query: str
    tenant_id: str
    user_tags: _containers.RepeatedScalarFieldContainer[str]
    chat_history: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    session_id: str
    mode: Mode
    selected_text: str
    retrieval: RetrievalOptions
    generation: GenerationOptions
    explain: bool
    dry_run: bool
    idempotency_key: str
    follow_up_count: int
    stream_policy: StreamPolicy
    def __init__(self, query: _Optional[str] = ..., tenant_id: _Optional[str] = ..., user_tags: _Optional[_Iterable[str]] = ..., chat_history: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., session_id: _Optional[str] = ..., mode: _Optional[_Union[Mode, str]] = ..., selected_text: _Optional[str] = ..., retrieval: _Optional[_Union[RetrievalOptions, _Mapping]] = ..., generation: _Optional[_Union[GenerationOptions, _Mapping]] = ..., explain: _Optional[bool] = ..., dry_run: _Optional[bool] = ..., idempotency_key: _Optional[str] = ..., follow_up_count: _Optional[int] = ..., stream_policy: _Optional[_Union[StreamPolicy, str]] = ...) -> None: ...

class AskStreamResponse(_message.Message):
    __slots__ = ("text_delta", "citation", "answer")
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    CITATION_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    text_delta: str
    citation: Citation
    answer: Answer
    def __init__(self, text_delta: _Optional[str] = ..., citation: _Optional[_Union[Citation, _Mapping]] = ..., answer: _Optional[_Union[Answer, _Mapping]] = ...) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: Role
    content: str
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., content: _Optional[str] = ...) -> None: ...

class RetrievalOptions(_message.Message):
    __slots__ = ("top_k", "score_threshold", "filter", "search_mode")
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    SCORE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    SEARCH_MODE_FIELD_NUMBER: _ClassVar[int]
    top_k: int
    score_threshold: float
    filter: MetadataFilter
    search_mode: SearchMode
    def __init__(self, top_k: _Optional[int] = ..., score_threshold: _Optional[float] = ..., filter: _Optional[_Union[MetadataFilter, _Mapping]] = ..., search_mode: _Optional[_Union[SearchMode, str]] = ...) -> None: ...

class MetadataFilter(_message.Message):
    __slots__ = ("source_urls", "page_titles", "section_headings", "expression")
    SOURCE_URLS_FIELD_NUMBER: _ClassVar[int]
    PAGE_TITLES_FIELD_NUMBER: _ClassVar[int]
    SECTION_HEADINGS_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    source_urls: _containers.RepeatedScalarFieldContainer[str]
    page_titles: _containers.RepeatedScalarFieldContainer[str]
    section_headings: _containers.RepeatedScalarFieldContainer[str]
    expression: str
    def __init__(self, source_urls: _Optional[_Iterable[str]] = ..., page_titles: _Optional[_Iterable[str]] = ..., section_headings: _Optional[_Iterable[str]] = ..., expression: _Optional[str] = ...) -> None: ...

class GenerationOptions(_message.Message):
    __slots__ = ("model", "template_id", "citation_style", "strictness", "temperature", "seed", "citation_policy", "response_style")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    CITATION_STYLE_FIELD_NUMBER: _ClassVar[int]
    STRICTNESS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    CITATION_POLICY_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_STYLE_FIELD_NUMBER: _ClassVar[int]
    model: str
    template_id: str
    citation_style: CitationStyle
    strictness: Strictness
    temperature: float
    seed: int
    citation_policy: CitationPolicy
    response_style: ResponseStyle
    def __init__(self, model: _Optional[str] = ..., template_id: _Optional[str] = ..., citation_style: _Optional[_Union[CitationStyle, str]] = ..., strictness: _Optional[_Union[Strictness, str]] = ..., temperature: _Optional[float] = ..., seed: _Optional[int] = ..., citation_policy: _Optional[_Union[CitationPolicy, str]] = ..., response_style: _Optional[_Union[ResponseStyle, str]] = ...) -> None: ...

class Answer(_message.Message):
    __slots__ = ("text", "citations", "confidence", "action", "route", "grounded", "refusal_reason", "candidates", "model", "usage", "timings", "context_chunks_used", "context_tokens_used", "prompt_template_version", "follow_up_questions", "flags", "request_id", "explanation", "query_class", "cost_estimate_usd", "index_version", "create_time", "language")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    GROUNDED_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_REASON_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_CHUNKS_USED_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TOKENS_USED_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEMPLATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    QUERY_CLASS_FIELD_NUMBER: _ClassVar[int]
    COST_ESTIMATE_USD_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    text: str
    citations: _containers.RepeatedCompositeFieldContainer[Citation]
    confidence: Confidence
    action: Action
    route: RouteTarget
    grounded: bool
    refusal_reason: RefusalReason
    candidates: _containers.RepeatedCompositeFieldContainer[Citation]
    model: str
    usage: Usage
    timings: Timings
    context_chunks_used: int
    context_tokens_used: int
    prompt_template_version: str
    follow_up_questions: _containers.RepeatedScalarFieldContainer[str]
    flags: AnswerFlags
    request_id: str
    explanation: Explanation
    query_class: QueryClass
    cost_estimate_usd: float
    index_version: str
    create_time: _timestamp_pb2.Timestamp
    language: str
    def __init__(self, text: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., confidence: _Optional[_Union[Confidence, _Mapping]] = ..., action: _Optional[_Union[Action, str]] = ..., route: _Optional[_Union[RouteTarget, _Mapping]] = ..., grounded: _Optional[bool] = ..., refusal_reason: _Optional[_Union[RefusalReason, str]] = ..., candidates: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., model: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., timings: _Optional[_Union[Timings, _Mapping]] = ..., context_chunks_used: _Optional[int] = ..., context_tokens_used: _Optional[int] = ..., prompt_template_version: _Optional[str] = ..., follow_up_questions: _Optional[_Iterable[str]] = ..., flags: _Optional[_Union[AnswerFlags, _Mapping]] = ..., request_id: _Optional[str] = ..., explanation: _Optional[_Union[Explanation, _Mapping]] = ..., query_class: _Optional[_Union[QueryClass, str]] = ..., cost_estimate_usd: _Optional[float] = ..., index_version: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., language: _Optional[str] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("marker", "source_id", "document_id", "document_name", "chunk_index", "page_number", "section", "source_url", "relevance_score", "snippet", "text", "char_start", "char_end", "line_start", "line_end", "page_title", "rank_score", "page_numbers")
    MARKER_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    PAGE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    SECTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CHAR_START_FIELD_NUMBER: _ClassVar[int]
    CHAR_END_FIELD_NUMBER: _ClassVar[int]
    LINE_START_FIELD_NUMBER: _ClassVar[int]
    LINE_END_FIELD_NUMBER: _ClassVar[int]
    PAGE_TITLE_FIELD_NUMBER: _ClassVar[int]
    RANK_SCORE_FIELD_NUMBER: _ClassVar[int]
    PAGE_NUMBERS_FIELD_NUMBER: _ClassVar[int]
    marker: int
    source_id: str
    document_id: str
    document_name: str
    chunk_index: int
    page_number: int
    section: str
    source_url: str
    relevance_score: float
    snippet: str
    text: str
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    page_title: str
    rank_score: float
    page_numbers: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, marker: _Optional[int] = ..., source_id: _Optional[str] = ..., document_id: _Optional[str] = ..., document_name: _Optional[str] = ..., chunk_index: _Optional[int] = ..., page_number: _Optional[int] = ..., section: _Optional[str] = ..., source_url: _Optional[str] = ..., relevance_score: _Optional[float] = ..., snippet: _Optional[str] = ..., text: _Optional[str] = ..., char_start: _Optional[int] = ..., char_end: _Optional[int] = ..., line_start: _Optional[int] = ..., line_end: _Optional[int] = ..., page_title: _Optional[str] = ..., rank_score: _Optional[float] = ..., page_numbers: _Optional[_Iterable[int]] = ...) -> None: ...

class Confidence(_message.Message):
    __slots__ = ("overall", "retrieval", "coverage", "llm")
    OVERALL_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    overall: float
    retrieval: float
    coverage: float
    llm: float
    def __init__(self, overall: _Optional[float] = ..., retrieval: _Optional[float] = ..., coverage: _Optional[float] = ..., llm: _Optional[float] = ...) -> None: ...

class RouteTarget(_message.Message):
    __slots__ = ("tag", "owner_user_id", "owner_email", "reason", "fallback")
    TAG_FIELD_NUMBER: _ClassVar[int]
    OWNER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_EMAIL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    tag: str
    owner_user_id: str
    owner_email: str
    reason: str
    fallback: bool
    def __init__(self, tag: _Optional[str] = ..., owner_user_id: _Optional[str] = ..., owner_email: _Optional[str] = ..., reason: _Optional[str] = ..., fallback: _Optional[bool] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ...) -> None: ...

class Timings(_message.Message):
    __slots__ = ("retrieval", "budget", "generation", "time_to_first_token", "total", "embedding", "validation", "store")
    RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_FIRST_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    retrieval: _duration_pb2.Duration
    budget: _duration_pb2.Duration
    generation: _duration_pb2.Duration
    time_to_first_token: _duration_pb2.Duration
    total: _duration_pb2.Duration
    embedding: _duration_pb2.Duration
    validation: _duration_pb2.Duration
    store: _duration_pb2.Duration
    def __init__(self, retrieval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., budget: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., generation: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., time_to_first_token: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., total: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., embedding: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., validation: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., store: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AnswerFlags(_message.Message):
    __slots__ = ("hallucination_detected", "mitigation_applied", "cache_hit", "degraded", "injection_suspected", "redactions_applied", "partial", "repetition_stopped", "citations_dropped", "citations_attributed")
    HALLUCINATION_DETECTED_FIELD_NUMBER: _ClassVar[int]
    MITIGATION_APPLIED_FIELD_NUMBER: _ClassVar[int]
    CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    INJECTION_SUSPECTED_FIELD_NUMBER: _ClassVar[int]
    REDACTIONS_APPLIED_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    REPETITION_STOPPED_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_ATTRIBUTED_FIELD_NUMBER: _ClassVar[int]
    hallucination_detected: bool
    mitigation_applied: bool
    cache_hit: bool
    degraded: bool
    injection_suspected: bool
    redactions_applied: bool
    partial: bool
    repetition_stopped: bool
    citations_dropped: bool
    citations_attributed: bool
    def __init__(self, hallucination_detected: _Optional[bool] = ..., mitigation_applied: _Optional[bool] = ..., cache_hit: _Optional[bool] = ..., degraded: _Optional[bool] = ..., injection_suspected: _Optional[bool] = ..., redactions_applied: _Optional[bool] = ..., partial: _Optional[bool] = ..., repetition_stopped: _Optional[bool] = ..., citations_dropped: _Optional[bool] = ..., citations_attributed: _Optional[bool] = ...) -> None: ...

class Explanation(_message.Message):
    __slots__ = ("prompt", "packed_chunks", "prompt_tokens", "search_query", "query_rewrite", "draft", "model_usage")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    PACKED_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SEARCH_QUERY_FIELD_NUMBER: _ClassVar[int]
    QUERY_REWRITE_FIELD_NUMBER: _ClassVar[int]
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    MODEL_USAGE_FIELD_NUMBER: _ClassVar[int]
    prompt: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    packed_chunks: _containers.RepeatedCompositeFieldContainer[Citation]
    prompt_tokens: int
    search_query: str
    query_rewrite: QueryRewrite
    draft: str
    model_usage: _containers.RepeatedCompositeFieldContainer[ModelUsage]
    def __init__(self, prompt: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., packed_chunks: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., prompt_tokens: _Optional[int] = ..., search_query: _Optional[str] = ..., query_rewrite: _Optional[_Union[QueryRewrite, str]] = ..., draft: _Optional[str] = ..., model_usage: _Optional[_Iterable[_Union[ModelUsage, _Mapping]]] = ...) -> None: ...

class ModelUsage(_message.Message):
    __slots__ = ("purpose", "model", "calls", "usage", "cost_estimate_usd")
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    COST_ESTIMATE_USD_FIELD_NUMBER: _ClassVar[int]
    purpose: ModelCallPurpose
    model: str
    calls: int
    usage: Usage
    cost_estimate_usd: float
    def __init__(self, purpose: _Optional[_Union[ModelCallPurpose, str]] = ..., model: _Optional[str] = ..., calls: _Optional[int] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., cost_estimate_usd: _Optional[float] = ...) -> None: ...
