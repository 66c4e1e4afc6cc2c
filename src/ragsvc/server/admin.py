"""AdminService (seed 003 "Admin Controls"): prompt templates, ranking weights and the dry run.

Templates: the built-ins (`ragsvc.prompts`) are read-only, FAILED_PRECONDITION `BUILT_IN_TEMPLATE` on an update
or delete, ALREADY_EXISTS on a create with their id. Custom templates are written to the database first
(`storage/templates.py`), then to the registry the pipeline renders from, and every change drops the cached
answers written from the template. A user prompt that does not render with {query} and {context} is
INVALID_ARGUMENT with a BadRequest violation naming the placeholder.

Ranking weights: validated (each finite and >= 0, not all zero), stored, then set on the retriever, so the next
query ranks with them (and the answer cache is emptied); the stored weights replace the environment's at the next
start.

SimulateAsk: the Ask's own path (the caller's principal, validation, the pipeline) with `dry_run` and `explain`,
recorded in the audit log like any dry run.

With auth on, the auth interceptor lets only keys with `"admin": true` in (server/auth.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import re
from collections.abc import Iterable, Sequence

import grpc
from google.protobuf import field_mask_pb2, timestamp_pb2

from ragsvc import domain
from ragsvc.budget import ModelLimits
from ragsvc.errors import (
    AlreadyExists,
    BuiltInTemplate,
    FieldViolation,
    InvalidRequest,
    NotFound,
)
from ragsvc.pipeline import Pipeline
from ragsvc.prompts import PromptTemplate, TemplateRegistry, user_prompt_violations
from ragsvc.retrieval.hybrid import HybridRetriever
from ragsvc.retrieval.quality import RankingWeights
from ragsvc.server import convert
from ragsvc.server.cache import AnswerCache
from ragsvc.server.front import AskFront
from ragsvc.server.interceptors import current_call
from ragsvc.server.servicers import request_id_of, unary_boundary
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.settings import RANKING_WEIGHTS, SettingStore
from ragsvc.storage.templates import StoredTemplate, TemplateStore
from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import admin_service_pb2_grpc as admin_grpc

TEMPLATE_COLLECTION = "promptTemplates/"
WEIGHTS_NAME = "rankingWeights"
TEMPLATE_ID = re.compile(r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?")
TEMPLATE_FIELDS = ("display_name", "instructions", "user_prompt")
WEIGHT_FIELDS = ("similarity_weight", "recency_weight", "trust_weight")
MAX_DISPLAY_NAME = 200
MAX_INSTRUCTIONS = 2000
MAX_USER_PROMPT = 8000
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
_log = logging.getLogger(__name__)


def template_id_of(name: str, field: str = "name") -> str:
    """The id in "promptTemplates/{id}"; InvalidRequest naming `field` when `name` is not of that form."""
    template_id = name.removeprefix(TEMPLATE_COLLECTION)
    if not name.startswith(TEMPLATE_COLLECTION) or not template_id:
        raise InvalidRequest([FieldViolation(field, f'must be "{TEMPLATE_COLLECTION}{{prompt_template_id}}"')])
    return template_id


def weights_from_store(value: object) -> RankingWeights | None:
    """Stored weights as RankingWeights; None when absent or unusable (then the environment's stay)."""
    if not isinstance(value, dict):
        return None
    try:
        weights = RankingWeights(
            float(value["similarity_weight"]), float(value["recency_weight"]), float(value["trust_weight"])
        )
    except (KeyError, TypeError, ValueError):
        return None
    return None if weights.violations() else weights


def _timestamp(value: object) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)  # type: ignore[arg-type]
    return stamp


def _template_to_proto(
    template: PromptTemplate, stored: StoredTemplate | None, *, built_in: bool
) -> admin_pb.PromptTemplate:
    message = admin_pb.PromptTemplate(
        name=TEMPLATE_COLLECTION + template.version,
        display_name=template.display_name,
        instructions=template.length_rule,
        user_prompt=template.user,
        built_in=built_in,
    )
    if stored is not None:
        message.create_time.CopyFrom(_timestamp(stored.created_at))
        message.update_time.CopyFrom(_timestamp(stored.updated_at))
    return message


def _weights_to_proto(weights: RankingWeights) -> admin_pb.RankingWeights:
    return admin_pb.RankingWeights(
        name=WEIGHTS_NAME,
        similarity_weight=weights.similarity,
        recency_weight=weights.recency,
        trust_weight=weights.trust,
    )


def _mask_paths(mask: field_mask_pb2.FieldMask, allowed: Sequence[str]) -> tuple[str, ...]:
    """The fields an update changes: the mask's paths (all of `allowed` when empty); InvalidRequest on others."""
    paths = tuple(mask.paths) or tuple(allowed)
    if unknown := [path for path in paths if path not in allowed]:
        raise InvalidRequest(
            [FieldViolation("update_mask", f"unknown field {p!r} (updatable: {', '.join(allowed)})") for p in unknown]
        )
    return paths


def _template_violations(template: PromptTemplate, fields: Iterable[str]) -> list[FieldViolation]:
    """What is wrong with the given fields of a template, named as fields of the request."""
    prefix = "prompt_template."
    found: list[FieldViolation] = []
    limits = {
        "display_name": (template.display_name, MAX_DISPLAY_NAME),
        "instructions": (template.length_rule, MAX_INSTRUCTIONS),
        "user_prompt": (template.user, MAX_USER_PROMPT),
    }
    for field in fields:
        value, limit = limits[field]
        if len(value) > limit:
            found.append(FieldViolation(prefix + field, f"at most {limit} characters, got {len(value)}"))
    if "user_prompt" in fields:
        found += user_prompt_violations(template.user, prefix + "user_prompt")
    return found


def _prefixed(error: InvalidRequest, prefix: str) -> InvalidRequest:
    """`error` with its field violations named from the enclosing message (e.g. "request.query")."""
    error.violations = [dataclasses.replace(v, field=prefix + v.field) for v in error.violations]
    return error


class AdminServicer(admin_grpc.AdminServiceServicer):
    def __init__(
        self,
        *,
        registry: TemplateRegistry,
        templates: TemplateStore,
        settings: SettingStore,
        retriever: HybridRetriever,
        pipeline: Pipeline,
        default_model: str,
        model_limits: dict[str, ModelLimits],
        front: AskFront | None = None,
        cache: AnswerCache | None = None,
        answers: AnswerLog | None = None,
    ) -> None:
        self._registry = registry
        self._templates = templates
        self._settings = settings
        self._retriever = retriever
        self._pipeline = pipeline
        self._default_model = default_model
        self._model_limits = model_limits
        self._front = front
        self._cache = cache
        self._answers = answers
        self._lock = asyncio.Lock()  # one change at a time: the database and the registry stay in step

    async def load(self) -> None:
        """At start: the stored custom templates into the registry, the stored ranking weights into the retriever."""
        stored = await self._templates.list()
        self._registry.replace_custom([s.template for s in stored])
        weights = weights_from_store(await self._settings.get(RANKING_WEIGHTS))
        if weights is not None:
            self._retriever.weights = weights
            _log.info("ranking weights from the database (they override RAG_*_WEIGHT): %s", weights)
        _log.info("loaded %d custom prompt templates", len(stored))

    def _invalidate(self, template_id: str) -> int:
        return self._cache.invalidate_template(template_id) if self._cache is not None else 0

    async def _custom(self, name: str, field: str = "name") -> StoredTemplate:
        """The custom template `name` names: BuiltInTemplate for a built-in, NotFound for none."""
        template_id = template_id_of(name, field)
        if self._registry.is_built_in(template_id):
            raise BuiltInTemplate(
                f"{template_id!r} is a built-in template: it cannot be changed or deleted (create a custom one)",
                metadata={"template_id": template_id},
            )
        stored = await self._templates.get(template_id)
        if stored is None:
            raise NotFound(f"no prompt template {template_id!r}", metadata={"template_id": template_id})
        return stored

    @unary_boundary
    async def CreatePromptTemplate(
        self, request: admin_pb.CreatePromptTemplateRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb.CreatePromptTemplateResponse:
        template_id = request.prompt_template_id
        violations: list[FieldViolation] = []
        if not TEMPLATE_ID.fullmatch(template_id):
            violations.append(
                FieldViolation(
                    "prompt_template_id",
                    "lower-case letters, digits and hyphens, starting with a letter and not ending with a hyphen, "
                    "at most 63 characters",
                )
            )
        given = request.prompt_template
        template = PromptTemplate(
            version=template_id, length_rule=given.instructions, user=given.user_prompt, display_name=given.display_name
        )
        violations += _template_violations(template, TEMPLATE_FIELDS)
        if violations:
            raise InvalidRequest(violations)
        async with self._lock:
            if self._registry.is_built_in(template_id):
                raise AlreadyExists(f"{template_id!r} is a built-in template", metadata={"template_id": template_id})
            stored = await self._templates.create(template)
            if stored is None:
                raise AlreadyExists(f"a prompt template {template_id!r} exists", metadata={"template_id": template_id})
            self._registry.put(template)
        return admin_pb.CreatePromptTemplateResponse(
            prompt_template=_template_to_proto(template, stored, built_in=False)
        )

    @unary_boundary
    async def GetPromptTemplate(
        self, request: admin_pb.GetPromptTemplateRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb.GetPromptTemplateResponse:
        template_id = template_id_of(request.name)
        if self._registry.is_built_in(template_id):
            template = self._registry.get(template_id)
            assert template is not None
            return admin_pb.GetPromptTemplateResponse(prompt_template=_template_to_proto(template, None, built_in=True))
        stored = await self._templates.get(template_id)
        if stored is None:
            raise NotFound(f"no prompt template {template_id!r}", metadata={"template_id": template_id})
        return admin_pb.GetPromptTemplateResponse(
            prompt_template=_template_to_proto(stored.template, stored, built_in=False)
        )

    @unary_boundary
    async def ListPromptTemplates(
        self, request: admin_pb.ListPromptTemplatesRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb.ListPromptTemplatesResponse:
        if not 0 <= request.page_size <= MAX_PAGE_SIZE:
            raise InvalidRequest([FieldViolation("page_size", f"must be 0 to {MAX_PAGE_SIZE}")])
        size = request.page_size or DEFAULT_PAGE_SIZE
        start = 0
        if request.page_token:
            try:
                start = int(base64.urlsafe_b64decode(request.page_token.encode()).decode().removeprefix("offset:"))
            except ValueError:
                start = -1
            if start < 0:
                raise InvalidRequest([FieldViolation("page_token", "not a token this server returned")])
        built_ins = [t for t in self._registry.all() if self._registry.is_built_in(t.version)]
        listed = [_template_to_proto(t, None, built_in=True) for t in built_ins]
        listed += [_template_to_proto(s.template, s, built_in=False) for s in await self._templates.list()]
        page = listed[start : start + size]
        token = ""
        if start + size < len(listed):
            token = base64.urlsafe_b64encode(f"offset:{start + size}".encode()).decode()
        return admin_pb.ListPromptTemplatesResponse(prompt_templates=page, next_page_token=token)

    @unary_boundary
    async def UpdatePromptTemplate(
        self, request: admin_pb.UpdatePromptTemplateRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb.UpdatePromptTemplateResponse:
        paths = _mask_paths(request.update_mask, TEMPLATE_FIELDS)
        async with self._lock:
            current = (await self._custom(request.prompt_template.name, "prompt_template.name")).template
            given = request.prompt_template
            template = dataclasses.replace(
                current,
                display_name=given.display_name if "display_name" in paths else current.display_name,
                length_rule=given.instructions if "instructions" in paths else current.length_rule,
                user=given.user_prompt if "user_prompt" in paths else current.user,
            )
            if violations := _template_violations(template, paths):
                raise InvalidRequest(violations)
            stored = await self._templates.update(template)
            if stored is None:  # deleted meanwhile by another server on the same database
                raise NotFound(f"no prompt template {template.version!r}")
            self._registry.put(template)
            dropped = self._invalidate(template.version)
        return admin_pb.UpdatePromptTemplateResponse(
            prompt_template=_template_to_proto(template, stored, built_in=False), cached_answers_dropped=dropped
        )

    @unary_boundary
    async def DeletePromptTemplate(
        self, request: admin_pb.DeletePromptTemplateRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb.DeletePromptTemplateResponse:
        async with self._lock:
            template_id = (await self._custom(request.name)).template.version
            await self._templates.delete(template_id)
            self._registry.remove(template_id)
            dropped = self._invalidate(template_id)
        return admin_pb.DeletePromptTemplateResponse(cached_answers_dropped=dropped)

    @staticmethod
    def _check_weights_name(name: str, field: str) -> None:
        if name not in ("", WEIGHTS_NAME):
            raise InvalidRequest([FieldViolation(field, f'must be "{WEIGHTS_NAME}" or empty')])

    @unary_boundary
    async def GetRankingWeights(
        self, request: admin_pb.GetRankingWeightsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb.GetRankingWeightsResponse:
        self._check_weights_name(request.name, "name")
        return admin_pb.GetRankingWeightsResponse(ranking_weights=_weights_to_proto(self._retriever.weights))

    @unary_boundary
    async def UpdateRankingWeights(
        self, request: admin_pb.UpdateRankingWeightsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb.UpdateRankingWeightsResponse:
        given = request.ranking_weights
        self._check_weights_name(given.name, "ranking_weights.name")
        paths = _mask_paths(request.update_mask, WEIGHT_FIELDS)
        async with self._lock:
            current = self._retriever.weights
            weights = RankingWeights(
                given.similarity_weight if "similarity_weight" in paths else current.similarity,
                given.recency_weight if "recency_weight" in paths else current.recency,
                given.trust_weight if "trust_weight" in paths else current.trust,
            )
            if violations := weights.violations("ranking_weights."):
                raise InvalidRequest(violations)
            await self._settings.put(
                RANKING_WEIGHTS,
                {
                    "similarity_weight": weights.similarity,
                    "recency_weight": weights.recency,
                    "trust_weight": weights.trust,
                },
            )
            self._retriever.weights = weights
            if self._cache is not None and weights != current:
                self._cache.clear()  # cached answers were ranked with the old weights
        _log.info("ranking weights set: %s", weights)
        return admin_pb.UpdateRankingWeightsResponse(ranking_weights=_weights_to_proto(weights))

    @unary_boundary
    async def SimulateAsk(
        self, request: admin_pb.SimulateAskRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb.SimulateAskResponse:
        try:
            question = convert.question_from_proto(request.request, request_id_of(context))
        except InvalidRequest as exc:
            raise _prefixed(exc, "request.") from None
        question = dataclasses.replace(question, dry_run=True, explain=True)
        call = current_call()
        if call is not None and call.principal is not None and not question.tenant_id:
            question = dataclasses.replace(question, tenant_id=call.principal.tenant_id)
        answering = (
            self._pipeline.run(question) if self._front is None else self._front.events(question, self._pipeline.run)
        )
        if self._answers is not None:
            answering = self._answers.recorded(question, answering)
        answer: domain.Answer | None = None
        try:
            async with contextlib.aclosing(answering) as events:
                async for event in events:
                    if isinstance(event, domain.Answer):
                        answer = event
        except InvalidRequest as exc:
            raise _prefixed(exc, "request.") from None
        if answer is None:
            raise RuntimeError("the pipeline ended without an answer")
        response = admin_pb.SimulateAskResponse(answer=convert.answer_to_proto(answer))
        if answer.explanation is not None:  # the gate passed: the model would be called
            response.model = answer.model
            limits = self._model_limits.get(question.model or self._default_model)
            reserve = limits.max_response_tokens if limits is not None else 0
            response.estimated_tokens = answer.explanation.prompt_tokens + reserve
        return response
