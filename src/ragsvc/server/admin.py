"""AdminService (R-003-21, admin controls) over gRPC: prompt templates, ranking weights, the tag-owner directory,
the dry run, and erasing a caller.

Transport only: resource names, field masks and pages are read here (Google AIP style); what they ask is done
by `management.templates.TemplateCatalog`, `management.ranking.RankingControl`,
`management.owners.OwnerControl`, `management.erasure.CallerErasure` and, for SimulateAsk, the
answering service itself (the Ask's own path with `dry_run` and `explain`, recorded in the audit log like any
dry run).

With auth on, the auth interceptor lets only keys with `"admin": true` in (server/auth.py).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
from collections.abc import Sequence

from google.protobuf import field_mask_pb2

from ragsvc import domain
from ragsvc.access import Principal, key_caller, peer_caller
from ragsvc.answering.service import AnsweringService
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.management.erasure import CallerErasure
from ragsvc.management.owners import OwnerControl
from ragsvc.management.ranking import RankingControl
from ragsvc.management.templates import (
    TEMPLATE_FIELDS,
    UPDATABLE_FIELDS,
    VALUE_FIELDS,
    TemplateCatalog,
    TemplateChange,
    TemplateEntry,
)
from ragsvc.model_table import ModelLimits
from ragsvc.retrieval.quality import RankingWeights
from ragsvc.sanitize import tenant_violations
from ragsvc.server.boundary import call_context, call_state, unary_boundary
from ragsvc.server.interceptors import Context
from ragsvc.server.pages import page_after, page_size_of, page_token
from ragsvc.storage.owners import TagOwner
from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import admin_service_pb2_grpc as admin_grpc
from ragsvc.v1 import rag_service_pb2 as rag_pb
from ragsvc.wire import convert

TEMPLATE_COLLECTION = "promptTemplates/"
MAX_IDENTITY_CHARS = 256  # EraseCallerRequest.key_name and peer
TAG_OWNER_COLLECTION = "tagOwners/"
WEIGHTS_NAME = "rankingWeights"
WEIGHT_FIELDS = ("similarity_weight", "recency_weight", "trust_weight")


def resource_id_of(name: str, collection: str, id_name: str, field: str = "name") -> str:
    """The id in "{collection}{id}"; InvalidRequest naming `field` when `name` is not of that form."""
    resource_id = name.removeprefix(collection)
    if not name.startswith(collection) or not resource_id:
        raise InvalidRequest([FieldViolation(field, f'must be "{collection}{{{id_name}}}"')])
    return resource_id


def template_id_of(name: str, field: str = "name") -> str:
    """The id in "promptTemplates/{id}"; InvalidRequest naming `field` when `name` is not of that form."""
    return resource_id_of(name, TEMPLATE_COLLECTION, "prompt_template_id", field)


def _tag_owner_to_proto(owner: TagOwner) -> admin_pb.TagOwner:
    return admin_pb.TagOwner(
        name=TAG_OWNER_COLLECTION + owner.tag, owner_user_id=owner.owner_user_id, owner_email=owner.owner_email
    )


def _template_to_proto(entry: TemplateEntry) -> admin_pb.PromptTemplate:
    template, stored = entry.template, entry.stored
    message = admin_pb.PromptTemplate(
        name=TEMPLATE_COLLECTION + template.version,
        display_name=template.display_name,
        instructions=template.length_rule,
        user_prompt=template.user,
        built_in=entry.built_in,
        language=template.language,
        response_style=convert.RESPONSE_STYLES_TO_PROTO[template.response_style],
        stop_sequences=list(template.stop),
        citation_policy=convert.CITATION_POLICIES_TO_PROTO[template.citation_policy],
    )
    if stored is not None:
        message.create_time.CopyFrom(convert.timestamp_of(stored.created_at))
        message.update_time.CopyFrom(convert.timestamp_of(stored.updated_at))
    return message


def _response_style(value: int) -> domain.ResponseStyle | None:
    """A template's response style from the wire; INVALID_ARGUMENT for a number this server does not know."""
    for number, style in convert.RESPONSE_STYLES.items():
        if number == value:
            return style
    raise InvalidRequest([FieldViolation("prompt_template.response_style", f"unsupported value {value}")])


def _citation_policy_of(value: rag_pb.CitationPolicy) -> domain.CitationPolicy | None:
    """A template's citation policy from its message; InvalidRequest for a number this server does not know."""
    if value not in convert.CITATION_POLICIES:
        raise InvalidRequest([FieldViolation("prompt_template.citation_policy", f"unsupported value {value}")])
    return convert.CITATION_POLICIES[value]


def _weights_to_proto(weights: RankingWeights) -> admin_pb.RankingWeights:
    return admin_pb.RankingWeights(
        name=WEIGHTS_NAME,
        similarity_weight=weights.similarity,
        recency_weight=weights.recency,
        trust_weight=weights.trust,
    )


def _mask_paths(
    mask: field_mask_pb2.FieldMask, allowed: Sequence[str], default: Sequence[str] | None = None
) -> tuple[str, ...]:
    """The fields an update changes: the mask's paths (`default`, else all of `allowed`, when empty); InvalidRequest
    on others."""
    paths = tuple(mask.paths) or tuple(allowed if default is None else default)
    if unknown := [path for path in paths if path not in allowed]:
        raise InvalidRequest(
            [FieldViolation("update_mask", f"unknown field {p!r} (updatable: {', '.join(allowed)})") for p in unknown]
        )
    return paths


def _prefixed(error: InvalidRequest, prefix: str) -> InvalidRequest:
    """`error` with its field violations named from the enclosing message (e.g. "request.query")."""
    error.violations = [dataclasses.replace(v, field=prefix + v.field) for v in error.violations]
    return error


class AdminServicer(admin_grpc.AdminServiceServicer):
    def __init__(
        self,
        *,
        templates: TemplateCatalog,
        ranking: RankingControl,
        owners: OwnerControl,
        answering: AnsweringService,
        erasure: CallerErasure,
        default_model: str,
        model_limits: dict[str, ModelLimits],
        default_tenant: str,
    ) -> None:
        self._templates = templates
        self._ranking = ranking
        self._owners = owners
        self._answering = answering
        self._erasure = erasure
        self._default_model = default_model
        self._model_limits = model_limits
        self._default_tenant = default_tenant

    @unary_boundary
    async def CreatePromptTemplate(
        self, request: admin_pb.CreatePromptTemplateRequest, context: Context
    ) -> admin_pb.CreatePromptTemplateResponse:
        given = request.prompt_template
        entry = await self._templates.create(
            request.prompt_template_id,
            given.display_name,
            given.instructions,
            given.user_prompt,
            language=given.language,
            response_style=_response_style(given.response_style),
            stop_sequences=tuple(given.stop_sequences),
            citation_policy=_citation_policy_of(given.citation_policy),
        )
        return admin_pb.CreatePromptTemplateResponse(prompt_template=_template_to_proto(entry))

    @unary_boundary
    async def GetPromptTemplate(
        self, request: admin_pb.GetPromptTemplateRequest, context: Context
    ) -> admin_pb.GetPromptTemplateResponse:
        entry = await self._templates.get(template_id_of(request.name))
        return admin_pb.GetPromptTemplateResponse(prompt_template=_template_to_proto(entry))

    @unary_boundary
    async def ListPromptTemplates(
        self, request: admin_pb.ListPromptTemplatesRequest, context: Context
    ) -> admin_pb.ListPromptTemplatesResponse:
        size = page_size_of(request.page_size)
        start = 0
        if request.page_token:
            try:
                start = int(base64.urlsafe_b64decode(request.page_token.encode()).decode().removeprefix("offset:"))
            except ValueError:
                start = -1
            if start < 0:
                raise InvalidRequest([FieldViolation("page_token", "not a token this server returned")])
        listed = [_template_to_proto(entry) for entry in await self._templates.list()]
        page = listed[start : start + size]
        token = ""
        if start + size < len(listed):
            token = base64.urlsafe_b64encode(f"offset:{start + size}".encode()).decode()
        return admin_pb.ListPromptTemplatesResponse(prompt_templates=page, next_page_token=token)

    @unary_boundary
    async def UpdatePromptTemplate(
        self, request: admin_pb.UpdatePromptTemplateRequest, context: Context
    ) -> admin_pb.UpdatePromptTemplateResponse:
        paths = _mask_paths(request.update_mask, UPDATABLE_FIELDS, TEMPLATE_FIELDS)
        given = request.prompt_template
        template_id = template_id_of(given.name, "prompt_template.name")
        texts = {path: getattr(given, path) for path in paths if path in VALUE_FIELDS}
        if "stop_sequences" in texts:
            texts["stop_sequences"] = tuple(texts["stop_sequences"])
        change = TemplateChange(
            **texts,
            citation_policy=_citation_policy_of(given.citation_policy),
            sets_citation_policy="citation_policy" in paths,
        )
        if "response_style" in paths:
            change = dataclasses.replace(
                change, response_style=_response_style(given.response_style), sets_response_style=True
            )
        entry, dropped = await self._templates.update(template_id, change)
        return admin_pb.UpdatePromptTemplateResponse(
            prompt_template=_template_to_proto(entry), cached_answers_dropped=dropped
        )

    @unary_boundary
    async def DeletePromptTemplate(
        self, request: admin_pb.DeletePromptTemplateRequest, context: Context
    ) -> admin_pb.DeletePromptTemplateResponse:
        dropped = await self._templates.delete(template_id_of(request.name))
        return admin_pb.DeletePromptTemplateResponse(cached_answers_dropped=dropped)

    @staticmethod
    def _check_weights_name(name: str, field: str) -> None:
        if name not in ("", WEIGHTS_NAME):
            raise InvalidRequest([FieldViolation(field, f'must be "{WEIGHTS_NAME}" or empty')])

    @unary_boundary
    async def GetRankingWeights(
        self, request: admin_pb.GetRankingWeightsRequest, context: Context
    ) -> admin_pb.GetRankingWeightsResponse:
        self._check_weights_name(request.name, "name")
        return admin_pb.GetRankingWeightsResponse(ranking_weights=_weights_to_proto(self._ranking.weights))

    @unary_boundary
    async def UpdateRankingWeights(
        self, request: admin_pb.UpdateRankingWeightsRequest, context: Context
    ) -> admin_pb.UpdateRankingWeightsResponse:
        given = request.ranking_weights
        self._check_weights_name(given.name, "ranking_weights.name")
        paths = _mask_paths(request.update_mask, WEIGHT_FIELDS)
        weights = await self._ranking.update(
            given.similarity_weight if "similarity_weight" in paths else None,
            given.recency_weight if "recency_weight" in paths else None,
            given.trust_weight if "trust_weight" in paths else None,
        )
        return admin_pb.UpdateRankingWeightsResponse(ranking_weights=_weights_to_proto(weights))

    @unary_boundary
    async def SimulateAsk(
        self, request: admin_pb.SimulateAskRequest, context: Context
    ) -> admin_pb.SimulateAskResponse:
        call = call_context(context)
        try:
            question = convert.question_from_proto(request.request, call.request_id)
            question = dataclasses.replace(question, dry_run=True, explain=True)
            answer: domain.Answer | None = None
            async with contextlib.aclosing(self._answering.answer(question, call)) as events:
                async for event in events:
                    if isinstance(event, domain.Answer):
                        answer = event
        except InvalidRequest as exc:
            raise _prefixed(exc, "request.") from None
        if answer is None:
            raise RuntimeError("the answering service ended without an answer")
        response = admin_pb.SimulateAskResponse(answer=convert.answer_to_proto(answer))
        if answer.explanation is not None and answer.refusal is domain.RefusalReason.NONE:  # the model would be called
            response.model = answer.model
            limits = self._model_limits.get(question.model or self._default_model)
            reserve = limits.max_response_tokens if limits is not None else 0
            response.estimated_tokens = answer.explanation.prompt_tokens + reserve
        return response

    @unary_boundary
    async def ListTagOwners(self, request: admin_pb.ListTagOwnersRequest, context: Context) -> admin_pb.ListTagOwnersResponse:
        size = page_size_of(request.page_size)
        owners = await self._owners.list(after=page_after(request.page_token, TAG_OWNER_COLLECTION), limit=size)
        token = page_token(TAG_OWNER_COLLECTION, owners[-1].tag) if len(owners) == size else ""
        return admin_pb.ListTagOwnersResponse(tag_owners=[_tag_owner_to_proto(owner) for owner in owners], next_page_token=token)

    @unary_boundary
    async def SetTagOwner(self, request: admin_pb.SetTagOwnerRequest, context: Context) -> admin_pb.SetTagOwnerResponse:
        given = request.tag_owner
        tag = resource_id_of(given.name, TAG_OWNER_COLLECTION, "tag", "tag_owner.name")
        owner = await self._owners.set(TagOwner(tag, given.owner_user_id, given.owner_email))
        return admin_pb.SetTagOwnerResponse(tag_owner=_tag_owner_to_proto(owner))

    @unary_boundary
    async def DeleteTagOwner(self, request: admin_pb.DeleteTagOwnerRequest, context: Context) -> admin_pb.DeleteTagOwnerResponse:
        await self._owners.delete(resource_id_of(request.name, TAG_OWNER_COLLECTION, "tag"))
        return admin_pb.DeleteTagOwnerResponse()

    @unary_boundary
    async def EraseCaller(self, request: admin_pb.EraseCallerRequest, context: Context) -> admin_pb.EraseCallerResponse:
        caller, tenant = erasure_scope(request, call_state(context).principal, self._default_tenant)
        erased = await self._erasure.erase(caller, tenant)
        return admin_pb.EraseCallerResponse(
            sessions_deleted=erased.sessions,
            session_messages_deleted=erased.session_messages,
            audit_records_erased=erased.audit_records,
            operations_deleted=erased.operations,
            cached_answers_dropped=erased.cached_answers,
            replayed_answers_dropped=erased.replayed_answers,
        )


def erasure_scope(
    request: admin_pb.EraseCallerRequest, principal: Principal | None, default_tenant: str
) -> tuple[str, str | None]:
    """The caller an EraseCaller request names and the tenant to erase it in (None: every tenant); InvalidRequest
    naming the bad fields. The auth interceptor has already refused a `tenant_id` other than the admin key's."""
    key_name, peer = request.key_name.strip(), request.peer.strip()
    violations = [
        FieldViolation(field, problem)
        for field, value in (("key_name", key_name), ("peer", peer))
        if value and (problem := _identity_problem(value))
    ]
    if bool(key_name) == bool(peer):
        violations += [FieldViolation(field, "set exactly one of key_name and peer") for field in ("key_name", "peer")]
    violations += tenant_violations(request.tenant_id)
    if violations:
        raise InvalidRequest(violations)
    named = request.tenant_id.strip()
    own = principal.tenant_id if principal is not None else ""
    if key_name:
        tenant = named or own or default_tenant
        return key_caller(tenant, key_name), tenant
    return peer_caller(_without_port(peer)), named or own or None


def _without_port(peer: str) -> str:
    """A peer as the request log shows it ("ipv4:10.0.0.7:51234") as callers are bound to it: without the port
    (a client's next connection comes from another one). Other identities are kept as they are."""
    address, _, port = peer.rpartition(":")
    if peer.startswith(("ipv4:", "ipv6:")) and port.isdigit() and address not in ("ipv4", "ipv6"):
        return address
    return peer


def _identity_problem(value: str) -> str:
    if len(value) > MAX_IDENTITY_CHARS:
        return f"must be at most {MAX_IDENTITY_CHARS} characters"
    if not value.isprintable():
        return "must not contain control characters"
    return ""

