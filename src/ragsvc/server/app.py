"""Start-up and shutdown: build the components from settings, serve them over grpc.aio, drain on SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import re
import signal
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from ragsvc.budget import ModelCatalog
from ragsvc.config import Settings, generation_violations
from ragsvc.errors import InvalidRequest
from ragsvc.generation.base import Generator
from ragsvc.generation.extractive import ExtractiveGenerator
from ragsvc.generation.fallback import FallbackChain
from ragsvc.generation.ollama import OllamaGenerator
from ragsvc.generation.openai_compat import OpenAICompatGenerator
from ragsvc.ingest.indexer import Indexer
from ragsvc.ingest.loaders import source_documents_from_paths
from ragsvc.pipeline import Pipeline, PipelineSettings
from ragsvc.pricing import PriceTable
from ragsvc.prompts import TemplateRegistry
from ragsvc.retrieval.base import Embedder, VectorEngine
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.http_embedders import OllamaEmbedder, OpenAIEmbedder
from ragsvc.retrieval.hybrid import HybridRetriever
from ragsvc.retrieval.layout import AccessPolicy
from ragsvc.retrieval.qdrant_server import QdrantServerEngine
from ragsvc.retrieval.quality import RankingWeights
from ragsvc.server.admin import AdminServicer
from ragsvc.server.cache import AnswerCache
from ragsvc.server.front import AskFront
from ragsvc.server.hardening import (
    Hardening,
    dependency_probes,
    log_requests_as_json_lines,
)
from ragsvc.server.health import HealthMonitor
from ragsvc.server.servicers import IndexServicer, RagServicer
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.database import Database
from ragsvc.storage.owners import OwnerDirectory
from ragsvc.storage.sessions import SessionStore
from ragsvc.storage.settings import SettingStore
from ragsvc.storage.templates import TemplateStore
from ragsvc.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    index_service_pb2,
    index_service_pb2_grpc,
    rag_service_pb2,
    rag_service_pb2_grpc,
)
from ragsvc.validation import AnswerPolicy

RAG_SERVICE = rag_service_pb2.DESCRIPTOR.services_by_name["RagService"].full_name
INDEX_SERVICE = index_service_pb2.DESCRIPTOR.services_by_name["IndexService"].full_name
ADMIN_SERVICE = admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name
_log = logging.getLogger(__name__)


def demo_corpus_path() -> Path:
    return Path(str(resources.files("ragsvc") / "demo_corpus"))


@dataclass
class Components:
    """Everything a server runs on, built once at start-up."""

    engine: VectorEngine
    retriever: HybridRetriever
    generator: Generator
    indexer: Indexer
    pipeline: Pipeline
    embedder: Embedder | None = None
    database: Database | None = None
    answers: AnswerLog | None = None
    templates: TemplateRegistry = field(default_factory=TemplateRegistry)

    async def aclose(self) -> None:
        if self.answers is not None:
            await self.answers.drain()
        await self.generator.aclose()
        await self.engine.close()
        if self.embedder is not None:
            await self.embedder.aclose()
        if self.database is not None:
            self.database.close()


def build_models(settings: Settings) -> ModelCatalog:
    """The model allowlist with a token budget per model; InvalidRequest naming the setting when it is bad."""
    if violations := generation_violations(settings):
        raise InvalidRequest(violations, "invalid configuration: " + "; ".join(v.field for v in violations))
    return ModelCatalog(
        settings.model_limits(),
        system_prompt_tokens=settings.system_prompt_tokens,
        max_context_tokens=settings.max_context_tokens,
        max_history_tokens=settings.max_history_tokens,
    )


def build_generator(settings: Settings) -> Generator:
    """The configured generator: RAG_GENERATOR picks extractive, openai or ollama."""
    if settings.generator == "openai":
        return OpenAICompatGenerator(
            settings.openai_base_url,
            model=settings.chat_model,
            api_key=settings.openai_api_key,
            timeout_s=settings.timeout_s,
            models_ttl_s=settings.model_list_ttl_s,
        )
    if settings.generator == "ollama":
        return OllamaGenerator(
            settings.ollama_base_url,
            model=settings.chat_model,
            context_windows={name: limits.context_window for name, limits in settings.model_limits().items()},
            keep_alive=settings.ollama_keep_alive,
            timeout_s=settings.timeout_s,
            models_ttl_s=settings.model_list_ttl_s,
        )
    return ExtractiveGenerator()


async def build_embedder(settings: Settings) -> Embedder:
    """The embedder RAG_EMBEDDER names: the bundled MiniLM, or a served model (Ollama, OpenAI-compatible)."""
    if settings.embedder == "minilm":
        return MiniLMEmbedder.load()
    ollama = settings.embedder == "ollama"
    served = (OllamaEmbedder if ollama else OpenAIEmbedder)(
        settings.embedding_base_url or (settings.ollama_base_url if ollama else settings.openai_base_url),
        model=_embedding_model(settings),
        dimension=settings.embedding_dimension,
        api_key=settings.openai_api_key if settings.embedder == "openai" else "",
        timeout_s=settings.embedding_timeout_s,
        batch_size=settings.embedding_batch_size,
    )
    if not served.dimension:
        try:
            await served.probe()  # the collection's vector size must be known before it is opened
        except BaseException:
            await served.aclose()
            raise
    return served


def _embedding_model(settings: Settings) -> str:
    return settings.embedding_model or ("nomic-embed-text" if settings.embedder == "ollama" else "text-embedding-3-small")


def _edge_shard(settings: Settings, embedder: Embedder, *, injected: bool) -> str:
    """A shard per embedding model, so that switching embedders never mixes vectors of two models."""
    if injected:
        return f"qdrant-edge-{type(embedder).__name__}-{embedder.dimension}"
    if settings.embedder == "minilm":
        return "qdrant-edge"
    model = re.sub(r"[^A-Za-z0-9.-]+", "-", _embedding_model(settings))
    return f"qdrant-edge-{settings.embedder}-{model}-{embedder.dimension}"


async def build_components(settings: Settings, *, embedder: Embedder | None = None) -> Components:
    """Everything the server runs on; `embedder`, when given, replaces the one RAG_EMBEDDER names (a program
    embedding ragsvc with its own model)."""
    models = build_models(settings)  # first: a bad model table fails before anything is opened
    injected = embedder is not None
    embedder = embedder if embedder is not None else await build_embedder(settings)
    access = AccessPolicy(untagged_visible=settings.untagged_visible, clearance_tag=settings.clearance_tag)
    engine: VectorEngine
    try:
        if settings.qdrant_url:
            engine = await QdrantServerEngine.connect(
                settings.qdrant_url,
                dimension=embedder.dimension,
                api_key=settings.qdrant_api_key,
                collection=settings.qdrant_collection,
                prefer_grpc=settings.qdrant_prefer_grpc,
                timeout_s=settings.qdrant_timeout_s,
                access=access,
            )
        else:
            engine = EdgeEngine.open(
                settings.data_dir / _edge_shard(settings, embedder, injected=injected),
                dimension=embedder.dimension,
                access=access,
                index_after_points=settings.edge_index_after_points,
                index_delay_s=settings.edge_index_delay_s,
            )
    except BaseException:
        await embedder.aclose()
        raise
    retriever = HybridRetriever(
        embedder,
        engine,
        min_similarity=settings.min_similarity,
        overlap_threshold=settings.chunk_overlap_threshold,
        max_chunks_per_document=settings.max_chunks_per_doc,
        weights=RankingWeights(settings.similarity_weight, settings.recency_weight, settings.trust_weight),
    )
    generator = build_generator(settings)
    generators = FallbackChain(
        generator,
        fallback_model=settings.fallback_model,
        extractive=ExtractiveGenerator() if settings.fallback_extractive else None,
    )
    policy = AnswerPolicy(
        confidence_threshold=settings.confidence_threshold, default_llm_score=settings.default_llm_score
    )
    database = Database.open(settings.database_path or settings.data_dir / "ragsvc.sqlite3")
    owners = OwnerDirectory(database, admin_email=settings.admin_email)
    if settings.owners_file:
        await owners.load_file(Path(settings.owners_file))
    templates = TemplateRegistry()  # the admin RPCs add this server's custom templates
    sessions = SessionStore(database, max_messages=settings.session_history_messages)
    purged = await sessions.purge(retention_days=settings.session_retention_days)
    _log.info("purged %d session messages older than %g days", purged, settings.session_retention_days)
    pipeline = Pipeline(
        PipelineSettings(
            default_tenant=settings.default_tenant,
            default_model=settings.chat_model,
            top_k=settings.top_k,
            score_gate=settings.score_gate,
            temperature=settings.temperature,
            generation_timeout_s=settings.timeout_s,
            retrieval_timeout_s=settings.retrieval_timeout_s,
            total_timeout_s=settings.total_timeout_s,
            default_template=settings.default_template,
            llm_self_score=settings.llm_self_score,
            llm_classify=settings.llm_classify,
            follow_up_count=settings.follow_up_count,
            hallucination_retries=settings.hallucination_retries,
        ),
        retriever,
        generators,
        models,
        policy,
        owners=owners,
        sessions=sessions,
        prices=PriceTable.parse(settings.model_prices),
        templates=templates,
    )
    indexer = Indexer(
        embedder, engine, chunk_tokens=settings.chunk_tokens, overlap_tokens=settings.chunk_overlap_tokens
    )
    answers = AnswerLog(database, default_tenant=settings.default_tenant)
    return Components(engine, retriever, generator, indexer, pipeline, embedder, database, answers, templates)


async def index_demo_corpus(components: Components, settings: Settings) -> int:
    """Index the bundled demo corpus into the default tenant when that tenant is empty; returns chunks indexed."""
    if not settings.demo_corpus or await components.engine.count(settings.default_tenant):
        return 0
    documents = source_documents_from_paths([demo_corpus_path()], tenant_id=settings.default_tenant)
    indexed = 0
    for document in documents:
        result = await components.indexer.ingest(document)
        indexed += result.chunks_indexed
    _log.info("indexed the demo corpus: %d documents, %d chunks", len(documents), indexed)
    return indexed


def build_servicers(
    components: Components, settings: Settings, *, front: AskFront, cache: AnswerCache | None = None
) -> tuple[RagServicer, IndexServicer, AdminServicer]:
    """The servicers over `components`, as the server serves them (in-process tests drive the same ones); the
    admin servicer must `load()` before its first call."""
    assert components.database is not None
    rag = RagServicer(components.pipeline, front=front, answers=components.answers)
    index = IndexServicer(components.indexer, default_tenant=settings.default_tenant, cache=cache)
    admin = AdminServicer(
        registry=components.templates,  # the admin RPCs change the registry the pipeline renders from
        templates=TemplateStore(components.database),
        settings=SettingStore(components.database),
        retriever=components.retriever,
        pipeline=components.pipeline,
        default_model=settings.chat_model,
        model_limits=settings.model_limits(),
        front=front,
        cache=cache,
        answers=components.answers,
    )
    return rag, index, admin


class RagServer:
    """A running ragsvc server. `start` binds and serves; `stop` drains and releases everything."""

    def __init__(self, settings: Settings, components: Components, server: grpc.aio.Server, port: int,
                 health: HealthMonitor, hardening: Hardening | None = None) -> None:  # fmt: skip
        self.settings = settings
        self.components = components
        self.port = port
        self.health = health
        self.hardening = hardening
        self._server = server

    @property
    def address(self) -> str:
        host = self.settings.grpc_address.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    @classmethod
    async def start(cls, settings: Settings, *, embedder: Embedder | None = None) -> RagServer:
        """Serve `settings`; `embedder` replaces the one RAG_EMBEDDER names (see `build_components`)."""
        hardening = Hardening.build(settings)  # auth, limits, TLS, cache, metrics: checked before anything loads
        try:
            components = await build_components(settings, embedder=embedder)
        except BaseException:
            await hardening.aclose()
            raise
        try:
            await index_demo_corpus(components, settings)
            server = hardening.server()
            rag, index, admin = build_servicers(components, settings, front=hardening.front, cache=hardening.cache)
            await admin.load()  # custom templates and stored ranking weights, before the first call
            rag_service_pb2_grpc.add_RagServiceServicer_to_server(rag, server)
            index_service_pb2_grpc.add_IndexServiceServicer_to_server(index, server)
            admin_service_pb2_grpc.add_AdminServiceServicer_to_server(admin, server)
            health = HealthMonitor(
                health_aio.HealthServicer(),
                dependency_probes(components),
                service_names=(RAG_SERVICE, INDEX_SERVICE, ADMIN_SERVICE),
                interval_s=settings.health_probe_interval_s,
            )
            health_pb2_grpc.add_HealthServicer_to_server(health.servicer, server)
            reflection.enable_server_reflection(
                (RAG_SERVICE, INDEX_SERVICE, ADMIN_SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                 reflection.SERVICE_NAME),
                server,
            )  # fmt: skip
            port = hardening.bind(server, settings.grpc_address)
            await server.start()
            await health.start()
            hardening.start_metrics(settings.grpc_address.rsplit(":", 1)[0])
        except BaseException:
            await hardening.aclose()
            await components.aclose()
            raise
        return cls(settings, components, server, port, health, hardening)

    async def stop(self) -> None:
        """Drain: report NOT_SERVING, refuse new RPCs, let in-flight ones finish within the grace period."""
        await self.health.shutdown()
        await self._server.stop(self.settings.grace_period_s)
        if self.hardening is not None:
            await self.hardening.aclose()
        await self.components.aclose()

    async def wait_for_termination(self) -> None:
        await self._server.wait_for_termination()


async def serve(settings: Settings, *, embedder: Embedder | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then drain; `embedder` as in `build_components`."""
    if settings.request_log:
        log_requests_as_json_lines()
    server = await RagServer.start(settings, embedder=embedder)
    print(f"ragsvc serving on {server.address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    _log.info("shutting down: draining for up to %.1f s", settings.grace_period_s)
    await server.stop()
