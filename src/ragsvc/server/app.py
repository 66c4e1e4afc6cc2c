"""Start-up and shutdown: build the components from settings, serve them over grpc.aio, drain on SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from ragsvc.budget import TokenBudget
from ragsvc.config import Settings
from ragsvc.encodings import encoding_for_model
from ragsvc.generation.base import Generator
from ragsvc.generation.extractive import ExtractiveGenerator
from ragsvc.generation.openai_compat import OpenAICompatGenerator
from ragsvc.ingest.indexer import Indexer
from ragsvc.ingest.loaders import source_documents_from_paths
from ragsvc.pipeline import Pipeline, PipelineSettings
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.hybrid import HybridRetriever
from ragsvc.server.health import HealthMonitor
from ragsvc.server.servicers import IndexServicer, RagServicer
from ragsvc.v1 import index_service_pb2, index_service_pb2_grpc, rag_service_pb2, rag_service_pb2_grpc
from ragsvc.validation import AnswerPolicy

RAG_SERVICE = rag_service_pb2.DESCRIPTOR.services_by_name["RagService"].full_name
INDEX_SERVICE = index_service_pb2.DESCRIPTOR.services_by_name["IndexService"].full_name
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_log = logging.getLogger(__name__)


def demo_corpus_path() -> Path:
    return Path(str(resources.files("ragsvc") / "demo_corpus"))


@dataclass
class Components:
    """Everything a server runs on, built once at start-up."""

    engine: EdgeEngine
    retriever: HybridRetriever
    generator: Generator
    indexer: Indexer
    pipeline: Pipeline

    async def aclose(self) -> None:
        await self.generator.aclose()
        await self.engine.close()


def build_generator(settings: Settings) -> Generator:
    if settings.generator == "openai":
        return OpenAICompatGenerator(
            settings.openai_base_url,
            model=settings.chat_model,
            api_key=settings.openai_api_key,
            timeout_s=settings.timeout_s,
        )
    return ExtractiveGenerator()


async def build_components(settings: Settings) -> Components:
    embedder = MiniLMEmbedder.load()
    engine = EdgeEngine.open(settings.data_dir / "qdrant-edge", dimension=embedder.dimension)
    retriever = HybridRetriever(embedder, engine, min_similarity=settings.min_similarity)
    generator = build_generator(settings)
    budget = TokenBudget(
        encoding=encoding_for_model(settings.chat_model),
        context_window=settings.model_context_tokens,
        max_response_tokens=settings.max_response_tokens,
        system_prompt_tokens=settings.system_prompt_tokens,
        max_context_tokens=settings.max_context_tokens,
        max_history_tokens=settings.max_history_tokens,
    )
    policy = AnswerPolicy(
        confidence_threshold=settings.confidence_threshold,
        default_llm_score=settings.default_llm_score,
        admin_email=settings.admin_email,
    )
    pipeline = Pipeline(
        PipelineSettings(
            default_tenant=settings.default_tenant,
            default_model=settings.chat_model,
            allowed_models=frozenset({settings.chat_model}),
            top_k=settings.top_k,
            score_gate=settings.score_gate,
            temperature=settings.temperature,
            max_response_tokens=settings.max_response_tokens,
            generation_timeout_s=settings.timeout_s,
        ),
        retriever,
        generator,
        budget,
        policy,
    )
    indexer = Indexer(
        embedder, engine, chunk_tokens=settings.chunk_tokens, overlap_tokens=settings.chunk_overlap_tokens
    )
    return Components(engine, retriever, generator, indexer, pipeline)


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


class RagServer:
    """A running ragsvc server. `start` binds and serves; `stop` drains and releases everything."""

    def __init__(self, settings: Settings, components: Components, server: grpc.aio.Server, port: int,
                 health: HealthMonitor) -> None:  # fmt: skip
        self.settings = settings
        self.components = components
        self.port = port
        self.health = health
        self._server = server

    @property
    def address(self) -> str:
        host = self.settings.grpc_address.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    @classmethod
    async def start(cls, settings: Settings) -> RagServer:
        components = await build_components(settings)
        try:
            await index_demo_corpus(components, settings)
            server = grpc.aio.server(
                options=[
                    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ]
            )
            rag_service_pb2_grpc.add_RagServiceServicer_to_server(RagServicer(components.pipeline), server)
            index_service_pb2_grpc.add_IndexServiceServicer_to_server(
                IndexServicer(components.indexer, default_tenant=settings.default_tenant), server
            )
            health = HealthMonitor(
                health_aio.HealthServicer(),
                {"retrieval": components.retriever.check_health, "llm": components.generator.check_health},
                service_names=(RAG_SERVICE, INDEX_SERVICE),
                interval_s=settings.health_probe_interval_s,
            )
            health_pb2_grpc.add_HealthServicer_to_server(health.servicer, server)
            reflection.enable_server_reflection(
                (RAG_SERVICE, INDEX_SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                 reflection.SERVICE_NAME),
                server,
            )  # fmt: skip
            port = server.add_insecure_port(settings.grpc_address)
            await server.start()
            await health.start()
        except BaseException:
            await components.aclose()
            raise
        return cls(settings, components, server, port, health)

    async def stop(self) -> None:
        """Drain: report NOT_SERVING, refuse new RPCs, let in-flight ones finish within the grace period."""
        await self.health.shutdown()
        await self._server.stop(self.settings.grace_period_s)
        await self.components.aclose()

    async def wait_for_termination(self) -> None:
        await self._server.wait_for_termination()


async def serve(settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then drain."""
    server = await RagServer.start(settings)
    print(f"ragsvc serving on {server.address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    _log.info("shutting down: draining for up to %.1f s", settings.grace_period_s)
    await server.stop()
