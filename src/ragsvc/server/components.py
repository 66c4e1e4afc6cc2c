"""Everything a server runs on, opened in one place from the settings and closed in reverse order.

`open_components` is an async context manager over one AsyncExitStack: each resource is registered for closing
the moment it is open, so a failure at any step of start-up (an unreachable embedding server, a Qdrant server
that refuses, a database that cannot be opened, a bad owners file) closes exactly what was opened before it,
and leaving the block closes everything, newest first.

State has two backends, chosen by the settings: the records on SQLite (RAG_DB_PATH) or PostgreSQL
(RAG_DATABASE_URL); the answer cache, replays and rate limit in memory, or on Redis (RAG_REDIS_URL) with the
change feed that carries template and weight changes to the other replicas.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ragsvc.access import AccessPolicy
from ragsvc.answering.admission import Admission
from ragsvc.answering.cache import AnswerStore, MemoryAnswerCache, keeps_every_answer
from ragsvc.answering.conversation import Condenser, Conversation
from ragsvc.answering.gate import Gate
from ragsvc.answering.generate import GenerateStage
from ragsvc.answering.hints import NoChunksHint
from ragsvc.answering.language import LanguageGate
from ragsvc.answering.pack import Packer
from ragsvc.answering.pipeline import Pipeline
from ragsvc.answering.read import ReadStage
from ragsvc.answering.retrieve import QueryClassifier, RetrieveStage
from ragsvc.answering.service import AnsweringService
from ragsvc.answering.validate import ValidateStage
from ragsvc.budget import ModelCatalog
from ragsvc.config import EmbedderKind, GeneratorKind, ReaderKind, Settings, TrustSettings
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.generation.base import Generator
from ragsvc.generation.extractive import ExtractiveGenerator
from ragsvc.generation.fallback import FallbackChain
from ragsvc.generation.ollama import OllamaGenerator
from ragsvc.generation.openai_compat import OpenAICompatGenerator
from ragsvc.generation.retry import RetryPolicy
from ragsvc.ingest.indexer import Indexer
from ragsvc.ingest.loaders import source_documents_from_paths
from ragsvc.language import LanguageDetector
from ragsvc.management import ranking, templates
from ragsvc.management.erasure import CallerErasure
from ragsvc.management.owners import OwnerControl
from ragsvc.management.ranking import RankingControl
from ragsvc.management.templates import TemplateCatalog
from ragsvc.prompts import TemplateRegistry
from ragsvc.reading import Reader
from ragsvc.reading.cross import CrossEncoder
from ragsvc.reading.rules import RuleReader
from ragsvc.reading.trained import Model, TrainedReader
from ragsvc.retrieval.base import Embedder, VectorEngine
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import INT8_NAME, MiniLMEmbedder
from ragsvc.retrieval.http_embedders import OllamaEmbedder, OpenAIEmbedder
from ragsvc.retrieval.hybrid import HybridRetriever
from ragsvc.retrieval.qdrant_server import QdrantServerEngine
from ragsvc.retrieval.schema import MetadataSchema
from ragsvc.retrieval.stored_terms import check_analyser
from ragsvc.server.health import Probe
from ragsvc.server.limits import RateLimit, TokenBuckets
from ragsvc.server.operation_runner import OperationRunner
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.backend import Backend
from ragsvc.storage.database import open_database
from ragsvc.storage.index_versions import IndexVersions
from ragsvc.storage.metadata_keys import MetadataKeyStore
from ragsvc.storage.operations import OperationStore
from ragsvc.storage.owners import OwnerDirectory
from ragsvc.storage.retention import RetentionJob
from ragsvc.storage.sessions import SessionStore
from ragsvc.storage.settings import SettingStore
from ragsvc.storage.templates import TemplateStore
from ragsvc.validation import AnswerPolicy

if TYPE_CHECKING:
    from ragsvc.shared.state import SharedState

_log = logging.getLogger(__name__)
RULES_CITE_THRESHOLD = 60.0  # the rule reader's confidence (0-100) from which an answer is CITEd


def demo_corpus_path() -> Path:
    return Path(str(resources.files("ragsvc") / "demo_corpus"))


@dataclass(frozen=True, slots=True)
class Components:
    """What the servicers and the health monitor work with."""

    settings: Settings
    embedder: Embedder
    engine: VectorEngine
    retriever: HybridRetriever
    generator: Generator  # the configured one: the first step of the fallback chain
    database: Backend  # the records: SQLite, or PostgreSQL
    answers: AnswerLog  # the audit log
    indexer: Indexer
    answering: AnsweringService
    templates: TemplateCatalog
    ranking: RankingControl
    cache: AnswerStore | None
    replays: AnswerStore | None  # the answers of idempotency keys
    retention: RetentionJob
    shared: SharedState | None  # Redis, when RAG_REDIS_URL is set
    rate_limit: RateLimit | None  # the limit of all replicas together, on Redis (None: the server's own)
    conversation: Conversation  # the stored sessions, as their callers may read and delete them
    owners: OwnerControl  # the tag-owner directory
    schema: MetadataSchema  # each tenant's metadata keys and their types
    operations: OperationRunner  # the long-running operations (SubmitAsk, SubmitIngest) this replica runs
    erasure: CallerErasure  # everything one caller stored, erased on an admin's request

    def probes(self) -> Mapping[str, Probe]:
        """The health probe of each dependency, by its health name (`redis` only when Redis is configured)."""
        probes = {
            "retrieval": self.engine.check_health,
            "embedder": self.embedder.check_health,
            "llm": self.generator.check_health,
            "db": self.database.check_health,
        }
        if self.shared is not None:
            probes["redis"] = self.shared.guard.check_health
        return probes


@contextlib.asynccontextmanager
async def open_components(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    engine: VectorEngine | None = None,
    engine_dir: Path | None = None,
) -> AsyncIterator[Components]:
    """Open every component; `embedder`, when given, replaces the one RAG_EMBEDDER names (a program embedding
    ragsvc with its own model) and stays the caller's to close; so does `engine`, for the vector engine (a
    program with a Qdrant client of its own, such as qdrant-client's local mode). `engine_dir` holds the embedded
    engine's shards instead of RAG_DATA_DIR (a worker's read-only copy: `server.workers`)."""
    async with contextlib.AsyncExitStack() as stack:
        models = ModelCatalog(settings.generation.model_limits, settings.budget)
        injected = embedder is not None
        if embedder is None:
            embedder = await open_embedder(settings)
            stack.push_async_callback(embedder.aclose)
        if engine is None:
            engine = await open_engine(settings, embedder, injected=injected, directory=engine_dir)
            stack.push_async_callback(engine.close)
            location = engine_location(settings, embedder, injected=injected)
        else:
            location = f"the {type(engine).__name__} given to the server"
        await check_analyser(engine, location)
        reader = build_reader(settings.trust, extractive=settings.generation.generator is GeneratorKind.EXTRACTIVE)
        generator = build_generator(settings, models, reader)
        stack.push_async_callback(generator.aclose)
        records = settings.records
        database = await open_database(
            records.database_location(settings.server.data_dir),
            pool_min_size=records.database_pool_min_size,
            pool_max_size=records.database_pool_max_size,
            connect_timeout_s=records.database_connect_timeout_s,
            command_timeout_s=records.database_command_timeout_s,
        )
        stack.push_async_callback(database.aclose)
        answers = AnswerLog(database, default_tenant=settings.server.default_tenant, before_answer=records.audit_before_answer)
        stack.push_async_callback(answers.drain)  # the last rows are written before the database closes

        owners = OwnerDirectory(database, admin_email=settings.trust.admin_email)
        if records.owners is not None:
            await owners.load(records.owners)
        sessions = SessionStore(database, max_messages=records.session_history_messages)
        operation_store = OperationStore(database)
        retention = RetentionJob(
            sessions=sessions,
            session_retention_days=records.session_retention_days,
            answers=answers,
            audit_retention_days=records.audit_retention_days,
            audit_text_retention_days=records.audit_text_days,
            operations=operation_store,
            operation_retention_days=settings.operations.operation_retention_days,
            interval_s=records.retention_interval_s,
        )
        retention.start()  # purges now, then every interval
        stack.push_async_callback(retention.stop)

        shared = await open_shared_state(settings, stack)
        cache, replays = answer_stores(settings, shared)
        retriever = HybridRetriever(embedder, engine, settings.retrieval)
        registry = TemplateRegistry()  # the built-ins, and this server's custom templates once loaded
        catalog, weights = await open_management(database, registry, retriever, cache, shared)

        conversation = Conversation(sessions, retrieval_access(settings), answers=answers)
        pipeline = build_pipeline(settings, retriever, generator, reader, models, registry, owners, conversation)
        schema = MetadataSchema(MetadataKeyStore(database), engine)
        index_versions = IndexVersions(database)
        answering = AnsweringService(
            pipeline,
            Admission(settings.hardening, models, default_tenant=settings.server.default_tenant),
            schema,
            fingerprint=f"{reader.fingerprint} settings={settings.answer_fingerprint()}",
            cache=cache,
            replays=replays,
            answers=answers,
            languages=language_gate(settings, registry, owners),
            index_versions=index_versions,
            hints=NoChunksHint(engine),
        )
        indexer = Indexer(
            embedder,
            engine,
            schema,
            sources=settings.ingest.source_trust,
            chunk_tokens=settings.ingest.chunk_tokens,
            overlap_tokens=settings.ingest.chunk_overlap_tokens,
            versions=index_versions,
            limits=settings.ingest.limits,
        )
        # Stopped before everything its operations use is closed: they finish, or fail, first.
        operations = OperationRunner(operation_store, settings.operations, grace_s=settings.server.grace_period_s)
        await operations.start()
        stack.push_async_callback(operations.stop)
        yield Components(
            settings, embedder, engine, retriever, generator, database, answers, indexer, answering,
            catalog, weights, cache, replays, retention, shared, global_rate_limit(settings, shared), conversation,
            OwnerControl(owners), schema, operations,
            CallerErasure(answers, sessions=sessions, cache=cache, replays=replays, operations=operation_store),
        )  # fmt: skip


async def open_shared_state(settings: Settings, stack: contextlib.AsyncExitStack) -> SharedState | None:
    """Redis when RAG_REDIS_URL names one (closed with `stack`), else None. The change feed's counters are read
    once now, before the templates and weights are loaded, so that no change made meanwhile goes unseen."""
    if not settings.shared.redis_url.get_secret_value():
        if settings.records.database_url.get_secret_value():
            _log.warning("RAG_DATABASE_URL without RAG_REDIS_URL: replicas share the records, but each keeps its own "
                         "answer cache and rate limit, and sees template and weight changes only after a restart")  # fmt: skip
        return None
    from ragsvc.shared.state import SharedState  # redis is imported only when Redis is used

    shared = SharedState.connect(settings.shared)
    stack.push_async_callback(shared.aclose)
    await shared.changes.poll_once()
    return shared


async def open_management(
    database: Backend,
    registry: TemplateRegistry,
    retriever: HybridRetriever,
    cache: AnswerStore | None,
    shared: SharedState | None,
) -> tuple[TemplateCatalog, RankingControl]:
    """The custom templates and the ranking weights, loaded from the database. With Redis, each announces its
    changes on the change feed and reloads on the other replicas' (the feed starts polling here)."""
    changes = shared.changes if shared is not None else None
    catalog = TemplateCatalog(
        registry,
        TemplateStore(database),
        cache,
        announce=functools.partial(changes.announce, templates.CHANGES_TOPIC) if changes else None,
    )
    _log.info("loaded %d custom prompt templates", await catalog.load())
    weights = RankingControl(
        retriever,
        SettingStore(database),
        cache,
        announce=functools.partial(changes.announce, ranking.CHANGES_TOPIC) if changes else None,
    )
    await weights.load()
    if changes is not None:
        changes.on_change(templates.CHANGES_TOPIC, catalog.reload)
        changes.on_change(ranking.CHANGES_TOPIC, weights.reload)
        changes.start()
    return catalog, weights


def language_gate(settings: Settings, registry: TemplateRegistry, owners: OwnerDirectory) -> LanguageGate | None:
    """The question's language and its template (RAG_LANGUAGE_DETECTION; the detector loads in ~50 ms)."""
    generation = settings.generation
    if not generation.language_detection:
        return None
    detector = LanguageDetector.load(min_confidence=generation.language_min_confidence)
    return LanguageGate(detector, registry, owners, default_template=generation.default_template)


def answer_stores(settings: Settings, shared: SharedState | None) -> tuple[AnswerStore | None, AnswerStore | None]:
    """The answer cache and the replay store (kept RAG_IDEMPOTENCY_TTL_SECONDS): on Redis when it is configured,
    else in memory; none when RAG_CACHE_MAX_ENTRIES is 0."""
    hardening = settings.hardening
    if hardening.cache_max_entries == 0:
        return None, None
    if shared is not None:
        return shared.answer_stores(ttl_s=hardening.cache_ttl_s, replay_ttl_s=hardening.idempotency_ttl_s)
    return (
        MemoryAnswerCache(max_entries=hardening.cache_max_entries, ttl_s=hardening.cache_ttl_s),
        MemoryAnswerCache(max_entries=hardening.cache_max_entries, ttl_s=hardening.idempotency_ttl_s, admits=keeps_every_answer),
    )


def global_rate_limit(settings: Settings, shared: SharedState | None) -> RateLimit | None:
    """RAG_API_RATE_LIMIT for all replicas together when Redis is configured (this replica's own buckets while it
    is out); None otherwise (the server counts its own calls)."""
    per_minute = settings.hardening.rate_limit_per_minute
    if shared is None or per_minute == 0:
        return None
    return shared.rate_limit(per_minute, fallback=TokenBuckets(per_minute).take)


def build_pipeline(
    settings: Settings,
    retriever: HybridRetriever,
    generator: Generator,
    reader: Reader,
    models: ModelCatalog,
    templates: TemplateRegistry,
    owners: OwnerDirectory,
    conversation: Conversation,
) -> Pipeline:
    """The pipeline's stages over the given components."""
    generation = settings.generation
    chain = FallbackChain(
        generator,
        fallback_model=generation.fallback_model,
        extractive=ExtractiveGenerator(reader) if generation.fallback_extractive else None,
    )
    policy = AnswerPolicy(
        confidence_threshold=cite_threshold(settings.trust, reader), default_llm_score=settings.trust.default_llm_score
    )
    packer = Packer(models)
    generate = GenerateStage(chain, packer, models, generation)
    classifier = QueryClassifier(generator, reader, default_model=generation.chat_model, by_model=generation.llm_classify)
    condenser = Condenser(
        generator,
        reader,
        default_model=generation.chat_model,
        by_model=generation.llm_condense,
        timeout_s=generation.condense_timeout_s,
    )
    gate = Gate(settings.trust)
    return Pipeline(
        retrieve=RetrieveStage(retriever, reader, classifier, condenser, settings.retrieval),
        gate=gate,
        read=ReadStage(reader, retriever, refuses=settings.trust.answerability_gate, top_k=settings.retrieval.top_k),
        packer=packer,
        generate=generate,
        validate=ValidateStage(reader, policy, generate, packer, templates, generation),
        policy=policy,
        conversation=conversation,
        owners=owners,
        templates=templates,
        server=settings.server,
        generation=generation,
    )


def build_reader(settings: TrustSettings, *, extractive: bool) -> Reader:
    """The reader RAG_READER names: the trained models (RAG_READER_MODEL, else the shipped ones) or the rules; with
    the `extractive` generator, the trained reader re-ranks its quotes with the cross-encoder
    (RAG_READER_CROSS_CANDIDATES, RAG_READER_CROSS_MODEL), loaded at its first answer."""
    if settings.reader is ReaderKind.RULES:
        return RuleReader(min_coverage=settings.answerability_min_coverage, rare_share=settings.answerability_rare_share)
    try:
        model = Model.load(Path(settings.reader_model) if settings.reader_model else None)
    except (OSError, ValueError, KeyError) as exc:
        which = settings.reader_model or "the shipped model"
        raise InvalidRequest([FieldViolation("RAG_READER_MODEL", f"cannot load {which}: {exc}")]) from exc
    candidates = settings.reader_cross_candidates if extractive else 0
    cross = CrossEncoder(Path(settings.reader_cross_model) if settings.reader_cross_model else None) if candidates else None
    return TrainedReader(
        model, rare_share=settings.answerability_rare_share, pool=settings.reader_pool, cross=cross, candidates=candidates
    )


def cite_threshold(settings: TrustSettings, reader: Reader) -> float:
    """RAG_CONFIDENCE_THRESHOLD, else the reader's own calibration (as a confidence, 0-100: the level of the answer
    model that judges its answers, `Reader.cite_threshold`), else 60."""
    if settings.confidence_threshold is not None:
        return settings.confidence_threshold
    return 100 * reader.cite_threshold if reader.cite_threshold is not None else RULES_CITE_THRESHOLD


def build_generator(settings: Settings, models: ModelCatalog, reader: Reader) -> Generator:
    """The configured generator: RAG_GENERATOR picks extractive, openai or ollama."""
    generation = settings.generation
    retry = RetryPolicy(retries=generation.llm_retries, backoff_s=generation.llm_retry_backoff_s)
    if generation.generator is GeneratorKind.OPENAI:
        return OpenAICompatGenerator(
            generation.openai_base_url,
            model=generation.chat_model,
            api_key=generation.openai_api_key.get_secret_value(),
            timeout_s=generation.timeout_s,
            models_ttl_s=generation.model_list_ttl_s,
            retry=retry,
        )
    if generation.generator is GeneratorKind.OLLAMA:
        return OllamaGenerator(
            generation.ollama_base_url,
            model=generation.chat_model,
            context_windows=models.context_windows(),
            keep_alive=generation.ollama_keep_alive,
            timeout_s=generation.timeout_s,
            models_ttl_s=generation.model_list_ttl_s,
            retry=retry,
        )
    return ExtractiveGenerator(reader)


async def open_embedder(settings: Settings) -> Embedder:
    """The embedder RAG_EMBEDDER names: the bundled MiniLM, or a served model (Ollama, OpenAI-compatible), whose
    dimension is asked at start when EMBEDDING_DIMENSION does not give it."""
    retrieval, generation = settings.retrieval, settings.generation
    if retrieval.embedder is EmbedderKind.MINILM:
        return MiniLMEmbedder.load(int8=retrieval.embedder_int8)
    ollama = retrieval.embedder is EmbedderKind.OLLAMA
    served = (OllamaEmbedder if ollama else OpenAIEmbedder)(
        retrieval.embedding_base_url or (generation.ollama_base_url if ollama else generation.openai_base_url),
        model=retrieval.served_embedding_model,
        dimension=retrieval.embedding_dimension,
        api_key="" if ollama else generation.openai_api_key.get_secret_value(),
        timeout_s=retrieval.embedding_timeout_s,
        batch_size=retrieval.embedding_batch_size,
    )
    if not served.dimension:
        try:
            await served.probe()  # the collection's vector size must be known before it is opened
        except BaseException:
            await served.aclose()
            raise
    return served


def retrieval_access(settings: Settings) -> AccessPolicy:
    """Who sees and reads what within a tenant (RAG_UNTAGGED_VISIBLE, RAG_CLEARANCE_TAG)."""
    retrieval = settings.retrieval
    return AccessPolicy(untagged_visible=retrieval.untagged_visible, clearance_tag=retrieval.clearance_tag)


async def open_engine(
    settings: Settings, embedder: Embedder, *, injected: bool, directory: Path | None = None
) -> EdgeEngine | QdrantServerEngine:
    """The Qdrant server engine when RAG_QDRANT_URL is set, else the embedded qdrant-edge shard in `directory`
    (default RAG_DATA_DIR)."""
    retrieval = settings.retrieval
    access = retrieval_access(settings)
    if retrieval.qdrant_url:
        return await QdrantServerEngine.connect(
            retrieval.qdrant_url,
            dimension=embedder.dimension,
            api_key=retrieval.qdrant_api_key.get_secret_value(),
            collection=retrieval.qdrant_collection,
            prefer_grpc=retrieval.qdrant_prefer_grpc,
            timeout_s=retrieval.qdrant_timeout_s,
            access=access,
        )
    return EdgeEngine.open(
        (directory or settings.server.data_dir) / _edge_shard(settings, embedder, injected=injected),
        dimension=embedder.dimension,
        access=access,
        index_after_points=retrieval.edge_index_after_points,
        index_delay_s=retrieval.edge_index_delay_s,
        search_threads=retrieval.edge_search_threads,
    )


def engine_location(settings: Settings, embedder: Embedder, *, injected: bool) -> str:
    """Where `open_engine`'s store is, as an operator finds it: the Qdrant collection, or the embedded engine's
    shard in RAG_DATA_DIR (the live one, of which a worker serves a copy)."""
    retrieval = settings.retrieval
    if retrieval.qdrant_url:
        return f"collection {retrieval.qdrant_collection!r} of the Qdrant server at {retrieval.qdrant_url}"
    return str(settings.server.data_dir / _edge_shard(settings, embedder, injected=injected))


def _edge_shard(settings: Settings, embedder: Embedder, *, injected: bool) -> str:
    """A shard per embedding model, so that switching embedders never mixes vectors of two models."""
    retrieval = settings.retrieval
    if injected:
        return f"qdrant-edge-{type(embedder).__name__}-{embedder.dimension}"
    if retrieval.embedder is EmbedderKind.MINILM:
        return f"qdrant-edge-{INT8_NAME}" if retrieval.embedder_int8 else "qdrant-edge"  # fp32's keeps its old name
    model = re.sub(r"[^A-Za-z0-9.-]+", "-", retrieval.served_embedding_model)
    return f"qdrant-edge-{retrieval.embedder.value}-{model}-{embedder.dimension}"


async def index_demo_corpus(components: Components) -> int:
    """Index the bundled demo corpus into the default tenant when that tenant is empty; returns chunks indexed."""
    server = components.settings.server
    if not server.demo_corpus or await components.engine.count(server.default_tenant):
        return 0
    documents = source_documents_from_paths([demo_corpus_path()], tenant_id=server.default_tenant)
    indexed = sum(result.chunks_indexed for result in await components.indexer.ingest_many(documents))
    _log.info("indexed the demo corpus: %d documents, %d chunks", len(documents), indexed)
    return indexed
