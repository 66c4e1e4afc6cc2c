"""Start-up and shutdown: open the components, serve them over grpc.aio, drain on SIGTERM.

Everything a server holds is registered on one AsyncExitStack as it is opened, so a failure at any step of
start-up (a port in use, a metrics port taken, any component that cannot open) closes what was opened before
it, and `stop` closes everything in reverse order: health goes NOT_SERVING, in-flight RPCs drain within the
grace period, then the components close.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Callable

from google.longrunning import operations_pb2_grpc as lro_grpc
from google.longrunning import operations_proto_pb2 as lro
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from ragsvc.config import Settings
from ragsvc.ingest.uploads import UploadStaging
from ragsvc.retrieval.base import Embedder, VectorEngine
from ragsvc.server.admin import AdminServicer
from ragsvc.server.components import Components, index_demo_corpus, open_components
from ragsvc.server.hardening import Hardening, log_requests_as_json_lines
from ragsvc.server.health import HealthMonitor, requirements
from ragsvc.server.operations import OperationsServicer
from ragsvc.server.servicers import IndexServicer, RagServicer
from ragsvc.server.worker_slot import WorkerSlot
from ragsvc.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    index_service_pb2,
    index_service_pb2_grpc,
    rag_service_pb2,
    rag_service_pb2_grpc,
)

RAG_SERVICE = rag_service_pb2.DESCRIPTOR.services_by_name["RagService"].full_name
INDEX_SERVICE = index_service_pb2.DESCRIPTOR.services_by_name["IndexService"].full_name
ADMIN_SERVICE = admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name
OPERATIONS_SERVICE = lro.DESCRIPTOR.services_by_name["Operations"].full_name
HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
_log = logging.getLogger(__name__)


def build_servicers(components: Components) -> tuple[RagServicer, IndexServicer, AdminServicer, OperationsServicer]:
    """The servicers over `components`, as the server serves them (in-process tests drive the same ones)."""
    settings = components.settings
    rag = RagServicer(
        components.answering, components.conversation, components.operations, default_tenant=settings.server.default_tenant
    )
    uploads = UploadStaging(settings.server.data_dir / "uploads", max_bytes=settings.ingest.max_document_bytes)
    index = IndexServicer(
        components.indexer,
        components.engine,
        uploads,
        components.schema,
        components.operations,
        default_tenant=settings.server.default_tenant,
        chunk_limit=settings.ingest.call_chunk_limit,
        cache=components.cache,
    )
    admin = AdminServicer(
        templates=components.templates,
        ranking=components.ranking,
        owners=components.owners,
        answering=components.answering,
        erasure=components.erasure,
        default_model=settings.generation.chat_model,
        model_limits=settings.generation.model_limits,
        default_tenant=settings.server.default_tenant,
    )
    return rag, index, admin, OperationsServicer(components.operations)


def health_monitor(components: Components, hardening: Hardening) -> HealthMonitor:
    settings = components.settings
    needs = requirements(
        rag_service=RAG_SERVICE,
        index_service=INDEX_SERVICE,
        admin_service=ADMIN_SERVICE,
        llm_fallback=settings.generation.fallback_extractive,
    )
    return HealthMonitor(
        health_aio.HealthServicer(),
        components.probes(),
        needs=needs,
        interval_s=settings.server.health_probe_interval_s,
        on_change=hardening.metrics.dependencies,
    )


class RagServer:
    """A running ragsvc server. `start` opens and serves; `stop` drains and closes everything."""

    def __init__(
        self,
        settings: Settings,
        components: Components,
        port: int,
        health: HealthMonitor,
        hardening: Hardening,
        stack: contextlib.AsyncExitStack,
        stopped: asyncio.Event,
    ) -> None:
        self.settings = settings
        self.components = components
        self.port = port
        self.health = health
        self.hardening = hardening
        self._stack = stack
        self._stopped = stopped

    @property
    def address(self) -> str:
        return f"{self.settings.server.host}:{self.port}"

    @classmethod
    async def start(
        cls,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        engine: VectorEngine | None = None,
        slot: WorkerSlot | None = None,
    ) -> RagServer:
        """Serve `settings`; `embedder` and `engine` replace the ones the settings name (see `open_components`).
        `slot` makes this server one of several worker processes on one address (`workers`)."""
        async with contextlib.AsyncExitStack() as stack:
            engine_dir = slot.snapshot if slot is not None else None
            components = await stack.enter_async_context(
                open_components(settings, embedder=embedder, engine=engine, engine_dir=engine_dir)
            )
            hardening = Hardening.build(settings, rate_limit=components.rate_limit)
            stack.push_async_callback(hardening.aclose)
            if slot is None or (slot.index == 0 and slot.snapshot is None):
                await index_demo_corpus(components)  # once, and never into a read-only copy
            if slot is not None:
                hardening.interceptors.extend(slot.interceptors())
            server = hardening.server(reuse_port=slot is not None)
            stopped = asyncio.Event()

            async def stop_server() -> None:
                # The operations finish (or fail) while the calls drain, so a WaitOperation in flight sees the end;
                # their task starts once server.stop has refused new calls (its first step, before it waits).
                operations = asyncio.ensure_future(components.operations.stop())
                await server.stop(settings.server.grace_period_s)
                await operations
                stopped.set()

            stack.push_async_callback(stop_server)
            rag, index, admin, operations = build_servicers(components)
            rag_service_pb2_grpc.add_RagServiceServicer_to_server(rag, server)
            index_service_pb2_grpc.add_IndexServiceServicer_to_server(index, server)
            admin_service_pb2_grpc.add_AdminServiceServicer_to_server(admin, server)
            lro_grpc.add_OperationsServicer_to_server(operations, server)
            health = health_monitor(components, hardening)
            health_pb2_grpc.add_HealthServicer_to_server(health.servicer, server)
            services = (RAG_SERVICE, INDEX_SERVICE, ADMIN_SERVICE, OPERATIONS_SERVICE, HEALTH_SERVICE, reflection.SERVICE_NAME)
            reflection.enable_server_reflection(services, server)
            port = hardening.bind(server, settings.server.grpc_address)
            await health.start()  # before serving: no name says SERVING before the first probes ran
            stack.push_async_callback(health.shutdown)  # the first step of stopping: NOT_SERVING, then drain
            await server.start()
            hardening.start_metrics(settings.server.host)
            return cls(settings, components, port, health, hardening, stack.pop_all(), stopped)
        raise AssertionError("unreachable")  # the block returns or raises

    async def stop(self) -> None:
        """Drain: report NOT_SERVING, refuse new RPCs, let in-flight ones finish within the grace period, then
        close everything, newest first."""
        await self._stack.aclose()

    async def wait_for_termination(self) -> None:
        await self._stopped.wait()


async def serve(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    slot: WorkerSlot | None = None,
    on_serving: Callable[[int], None] | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT, then drain; `embedder` as in `open_components`. A worker process (see
    `workers`) passes its `slot`, and `on_serving` (given the port) in place of the start line. Returns the exit
    status."""
    if settings.hardening.request_log:
        log_requests_as_json_lines()
    server = await RagServer.start(settings, embedder=embedder, slot=slot)
    # What start-up allocated (modules, the embedder, word lists, encodings: ~130k tracked objects) lives as long
    # as the process: the garbage collector's full collections no longer walk it (~80 ms each on this machine,
    # a pause of whichever answers are in flight; `docs/profile/README.md`).
    gc.freeze()
    if on_serving is None:
        print(f"ragsvc serving on {server.address}", flush=True)
    else:
        on_serving(server.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    _log.info("shutting down: draining for up to %.1f s", settings.server.grace_period_s)
    await server.stop()
    return 0
