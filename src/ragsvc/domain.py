"""Plain domain types shared by every component. No gRPC, no engine, no HTTP types here."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime

from ragsvc.errors import InvalidRequest
from ragsvc.filters import Where
from ragsvc.metadata import MetadataValue


class Mode(enum.Enum):
    """Where the evidence comes from."""

    GENERAL = "general"
    SELECTED_TEXT = "selected_text"


class Role(enum.Enum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


class CitationStyle(enum.Enum):
    MARKER = "marker"  # [#1]
    SOURCE_ID = "source_id"  # [SourceId: doc:chunk]
    END_LIST = "end_list"  # [#1] in the text, and the cited sources listed at its end (R-003-11)


class ResponseStyle(enum.Enum):
    """The length and shape of an answer (R-003-12): a line of the system prompt."""

    CONCISE = "concise"
    DETAILED = "detailed"
    BULLETS = "bullets"


class SearchMode(enum.Enum):
    """Which of the index's vectors a search ranks by (R-002-03)."""

    HYBRID = "hybrid"  # dense and sparse, fused (retrieval.layout.fuse)
    DENSE = "dense"
    SPARSE = "sparse"


class CitationPolicy(enum.Enum):
    """What becomes of an answer citing markers that name no packed chunk (see citation_policy.py)."""

    STRICT = "strict"  # it is re-run strictly, and refused when no run cites only valid markers
    DROP_INVALID = "drop_invalid"  # the sentences backed only by invalid markers are dropped


class Strictness(enum.Enum):
    LENIENT = "lenient"
    NORMAL = "normal"
    STRICT = "strict"


class RefusalReason(enum.Enum):
    NONE = "none"
    NO_CHUNKS = "no_chunks"
    SCORE_GATE = "score_gate"
    UNSUPPORTED_ANSWER = "unsupported_answer"
    INVALID_CITATIONS = "invalid_citations"
    NOT_IN_SELECTION = "not_in_selection"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"  # the answerability gate: the evidence cannot answer it
    UNSUPPORTED_LANGUAGE = "unsupported_language"  # no template answers in the question's language (R-003-04)


class QueryClass(enum.Enum):
    """What kind of question it is (R-000-14); every class still goes through retrieval."""

    FACTUAL = "factual"
    PROCEDURAL = "procedural"
    CLARIFICATION = "clarification"
    GREETING = "greeting"


class Action(enum.Enum):
    CITE = "cite"
    ROUTE = "route"


class StreamPolicy(enum.Enum):
    """What an answer stream releases before the final answer (see answering/release.py)."""

    VALIDATED = "validated"  # complete sentences whose markers are all valid
    RAW = "raw"  # every token as the model writes it


class QueryRewrite(enum.Enum):
    """How the question became the text searched for."""

    NONE = "none"  # searched as asked: no conversation to follow up on
    RULE = "rule"  # a follow-up, rewritten by the deterministic rule
    LLM = "llm"  # a follow-up, condensed by the LLM
    RULE_FALLBACK = "rule_fallback"  # the LLM's condensing failed; the rule rewrote it


class CallPurpose(enum.Enum):
    """Why a model was called for an answer."""

    ANSWER = "answer"
    CONDENSE = "condense"
    CLASSIFY = "classify"
    RERUN = "rerun"
    SELF_SCORE = "self_score"
    FOLLOW_UPS = "follow_ups"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class MetadataFilter:
    """Metadata constraints; each tuple is "any of these values", empty means unconstrained. `expression` is a
    filter over the documents' typed metadata (`ragsvc.filters`), as the caller wrote it; `where` is that
    expression resolved against the tenant's declared keys (`retrieval.schema.MetadataSchema.resolve`), which is
    what the engines apply."""

    source_urls: tuple[str, ...] = ()
    page_titles: tuple[str, ...] = ()
    section_headings: tuple[str, ...] = ()
    expression: str = ""
    where: Where | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable passage of a document."""

    document_id: str
    chunk_index: int
    text: str
    document_name: str = ""
    tenant_id: str = ""
    tags: tuple[str, ...] = ()
    source_url: str = ""
    page_title: str = ""
    section: str | None = None
    page_number: int | None = None
    trust: float = 1.0  # source trust weight used in ranking, 0-1
    published_at: str = ""  # ISO 8601 date of the document, empty when unknown
    # Readable only by callers holding the confidential clearance tag; redacted for the others (R-003-07).
    confidential: bool = False
    # Tokens of the text between its data fences (prompts.fenced) in cl100k_base, counted once at ingest (see
    # budget.py); None when not counted (stored before counts were, or made from a caller's selection).
    token_count: int | None = None
    # Offsets of the text's span: into the caller's selection (selected-text mode), else into the document's text
    # as ingest extracted it (ingest/spans.py; R-004-03); None for chunks indexed before offsets were recorded.
    char_start: int | None = None
    char_end: int | None = None
    line_start: int | None = None
    line_end: int | None = None

    @property
    def source_id(self) -> str:
        return f"{self.document_id}:{self.chunk_index}"

    @property
    def page_numbers(self) -> tuple[int, ...]:
        """The pages the chunk spans (R-004-04): a chunk never crosses a page, so its page or none."""
        return () if self.page_number is None else (self.page_number,)


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    """A chunk with its relevance to a query: cosine similarity in [-1, 1] (higher is closer), and its rank
    among the evidence (weighted similarity, recency and trust; None where nothing ranked it: a selection)."""

    chunk: Chunk
    score: float
    rank_score: float | None = None
    # The chunk's reading as the index stores it (`reading.chunks`, packed at ingest), which the reader reads its
    # passages from; None for a chunk that was never stored (a caller's selection), read from its text instead.
    # Derived from the chunk, so not compared.
    reading: str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class TermCounts:
    """Corpus statistics of some terms over the chunks a caller can see: how many of those chunks carry index
    terms (`chunks`), and in how many of them each term occurs."""

    chunks: int
    frequencies: dict[str, int]


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    """What a retriever is asked. Access control (tenant, tags) is part of the query, never applied after it."""

    text: str
    tenant_id: str
    user_tags: tuple[str, ...] = ()
    top_k: int = 5
    score_threshold: float | None = None
    filters: MetadataFilter = field(default_factory=MetadataFilter)
    search_mode: SearchMode = SearchMode.HYBRID


@dataclass(frozen=True, slots=True)
class Retrieval:
    """A retriever's result: `hits` passed the quality filters, best first; `rejected` are the nearest
    candidates that fell below the similarity threshold (listed when the score gate refuses)."""

    hits: tuple[ScoredChunk, ...] = ()
    rejected: tuple[ScoredChunk, ...] = ()
    # Confidential chunks that met the threshold but that the caller may not read, already redacted: never
    # evidence, reported so the answer can say redactions were applied (R-003-07).
    redacted: tuple[ScoredChunk, ...] = ()
    embedding_ms: float = 0.0  # spent embedding the query
    store_ms: float = 0.0  # spent inside the vector engine's query call

    @property
    def redactions_applied(self) -> bool:
        return bool(self.redacted)


@dataclass(frozen=True, slots=True)
class Question:
    """A validated Ask request in domain terms."""

    query: str
    tenant_id: str = ""
    user_tags: tuple[str, ...] = ()
    chat_history: tuple[ChatMessage, ...] = ()
    session_id: str = ""
    mode: Mode = Mode.GENERAL
    selected_text: str = ""
    top_k: int | None = None
    score_threshold: float | None = None
    filters: MetadataFilter = field(default_factory=MetadataFilter)
    model: str = ""
    template_id: str = ""
    citation_style: CitationStyle = CitationStyle.MARKER
    strictness: Strictness = Strictness.NORMAL
    temperature: float | None = None
    seed: int | None = None
    explain: bool = False
    dry_run: bool = False
    request_id: str = ""
    follow_up_count: int | None = None  # None: the server default
    idempotency_key: str = ""  # a retry with the same key (by the same caller) gets the recorded answer
    caller: str = ""  # who asks (set at admission, never from the request): binds replays and sessions to it
    stream_policy: StreamPolicy | None = None  # None: the server default
    search_mode: SearchMode = SearchMode.HYBRID
    response_style: ResponseStyle | None = None  # None: the template's
    # The question's language (ISO 639-1), set at admission (answering/language.py); "" when too short to tell.
    language: str = ""
    citation_policy: CitationPolicy | None = None  # None: the template's, else the server default


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """The model calls of one purpose (with one model) made for an answer, and their usage and cost."""

    purpose: CallPurpose
    model: str
    calls: int
    usage: Usage
    cost_estimate_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What was searched for: the question, or a follow-up rewritten into a standalone question."""

    text: str
    rewrite: QueryRewrite = QueryRewrite.NONE


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """What a generator is asked: the rendered messages, plus the packed context for generators that read it."""

    messages: tuple[ChatMessage, ...]
    query: str
    context: tuple[ScoredChunk, ...]  # marker n refers to context[n - 1]
    model: str
    max_tokens: int
    temperature: float | None = None
    seed: int | None = None
    question: str = ""  # the user's own words when `query` is a follow-up's standalone search, else ""
    stop: tuple[str, ...] = ()  # where the model stops writing (the template's stop sequences)
    deadline: float | None = None  # event loop time by which the generation must end; no retry waits past it
    side_call: bool = False  # an auxiliary call around an answer: a server's free slot goes to answers first
    term_counts: TermCounts | None = None  # the corpus statistics the question was read with (the extractive reader's)


@dataclass(frozen=True, slots=True)
class GenerationDelta:
    """One item of a generator's stream: a piece of text, and usage on the last item when the server reports it."""

    text: str = ""
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class Citation:
    marker: int
    chunk: Chunk
    relevance_score: float
    rank_score: float | None = None  # the chunk's rank among the evidence (ScoredChunk.rank_score)

    @property
    def snippet(self) -> str:
        """The first 200 characters of the chunk, with "..." when cut."""
        text = self.chunk.text
        return text if len(text) <= 200 else text[:200] + "..."


@dataclass(frozen=True, slots=True)
class Confidence:
    """overall is 0-100; the parts are 0-1 (llm is 0-100, as the model scores it)."""

    overall: float = 0.0
    retrieval: float = 0.0
    coverage: float = 0.0
    llm: float = 0.0


@dataclass(frozen=True, slots=True)
class RouteTarget:
    tag: str = ""
    owner_user_id: str = ""
    owner_email: str = ""
    reason: str = ""
    fallback: bool = False


@dataclass(frozen=True, slots=True)
class Timings:
    """Milliseconds spent per stage."""

    retrieval_ms: float = 0.0
    budget_ms: float = 0.0
    generation_ms: float = 0.0
    first_token_ms: float = 0.0
    total_ms: float = 0.0
    embedding_ms: float = 0.0  # part of retrieval_ms
    validation_ms: float = 0.0
    store_ms: float = 0.0  # inside the vector engine's query call, part of retrieval_ms


@dataclass(frozen=True, slots=True)
class Flags:
    hallucination_detected: bool = False
    mitigation_applied: bool = False
    cache_hit: bool = False
    degraded: bool = False
    injection_suspected: bool = False
    redactions_applied: bool = False
    partial: bool = False  # grounded, and says what the documents do not cover
    repetition_stopped: bool = False  # the model looped; its generation was stopped early
    citations_dropped: bool = False  # sentences backed only by invalid markers were dropped (DROP_INVALID)
    citations_attributed: bool = False  # sentences written without a marker were given their chunk's (attribution)


@dataclass(frozen=True, slots=True)
class Explanation:
    """How an answer was built: the rendered prompt and the packed chunks (marker n is packed[n - 1])."""

    prompt: tuple[ChatMessage, ...]
    packed: tuple[ScoredChunk, ...]
    prompt_tokens: int


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    citations: tuple[Citation, ...] = ()
    confidence: Confidence = field(default_factory=Confidence)
    action: Action = Action.CITE
    route: RouteTarget | None = None
    grounded: bool = False
    refusal: RefusalReason = RefusalReason.NONE
    candidates: tuple[ScoredChunk, ...] = ()
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    timings: Timings = field(default_factory=Timings)
    context_chunks_used: int = 0
    context_tokens_used: int = 0
    template_version: str = ""
    follow_up_questions: tuple[str, ...] = ()
    flags: Flags = field(default_factory=Flags)
    request_id: str = ""
    explanation: Explanation | None = None
    query_class: QueryClass = QueryClass.FACTUAL
    cost_estimate_usd: float = 0.0
    # Similarity of every chunk retrieval returned, best first (request log and metrics: docs retrieved and the
    # similarity distribution); empty when no retrieval ran.
    retrieval_scores: tuple[float, ...] = ()
    search: SearchQuery | None = None  # what was searched for (None: no search ran, e.g. a cached answer)
    draft: str = ""  # the model's text when the answer was refused (`text` is then the refusal)
    model_usage: tuple[ModelUsage, ...] = ()  # the model calls made for it, by purpose; `usage` is their sum
    # Provenance (R-003-13): the tenant's index version searched, and when the answer was written (UTC).
    index_version: str = ""
    created_at: datetime | None = None
    language: str = ""  # the question's language (Question.language)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Pipeline event: a piece of answer text, forwarded as soon as the generator produced it."""

    text: str


# Pipeline events, in stream order: any number of TextDelta and Citation, then exactly one Answer.
Event = TextDelta | Citation | Answer


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """A document to ingest: its text (or raw bytes for binary formats) and metadata."""

    document_id: str
    name: str
    content: bytes
    media_type: str = "text/plain"  # one of ingest.media.SUPPORTED, maybe with a charset parameter
    tenant_id: str = ""
    tags: tuple[str, ...] = ()
    source_url: str = ""
    title: str = ""
    trust: float | None = None  # None: the weight of its source type (ragsvc.source_trust)
    published_at: str = ""  # ISO 8601 date, empty when unknown
    confidential: bool = False  # see Chunk.confidential
    # Typed metadata by key (ragsvc.metadata); `source_type` and `published_at` are completed at ingest.
    metadata: dict[str, MetadataValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IngestResult:
    document_id: str
    chunks_created: int = 0
    chunks_indexed: int = 0
    elapsed_ms: float = 0.0
    # Why the document was not indexed (None when it was): a document that cannot be read, or is past a limit.
    failure: InvalidRequest | None = None
    unchanged: bool = False  # already indexed from the same content and metadata: nothing was written
    encoding: str = ""  # the IANA name of the encoding its text was read in (empty for PDF, .docx, or unread)

    @property
    def error(self) -> str:
        """The failure's message; empty when the document was indexed."""
        return self.failure.message if self.failure is not None else ""


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """How far an ingest got: documents finished (indexed, unchanged or refused) out of all of them, and chunks
    embedded out of those of the documents read and chunked so far; the document being embedded ("" when none)."""

    documents_done: int = 0
    documents_total: int = 0
    chunks_done: int = 0
    chunks_total: int = 0
    current_document_id: str = ""


@dataclass(frozen=True, slots=True)
class DocumentSource:
    """What a document's chunks were made from, stored with each of them."""

    content_sha256: str  # of the document's raw content
    content_bytes: int
    media_type: str
    # A hash of the content and of everything else the chunks were made from (metadata, chunking settings):
    # re-ingesting a document whose fingerprint is stored already would change nothing.
    fingerprint: str
    ingested_at: float  # Unix time, seconds
    encoding: str = ""  # the IANA name of the encoding its text was read in; empty for PDF and .docx


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """A document as the engine holds it: its fields as stored with its chunks, and how many chunks it has."""

    document_id: str
    name: str
    title: str
    tags: tuple[str, ...]
    source_url: str
    confidential: bool
    chunks: int
    source: DocumentSource | None  # None for documents stored before sources were
    metadata: dict[str, MetadataValue] = field(default_factory=dict)  # empty for documents stored before metadata
    trust: float = 1.0


@dataclass(frozen=True, slots=True)
class IndexStats:
    """A tenant's share of the index, and which engine holds it."""

    documents: int
    chunks: int
    content_bytes: int  # of the documents' raw content (documents stored without a source count 0)
    engine: str
