import datetime

from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from ragsvc.v1 import rag_service_pb2 as _rag_service_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EraseCallerRequest(_message.Message):
    __slots__ = ("tenant_id", "key_name", "peer")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_NAME_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    key_name: str
    peer: str
    def __init__(self, tenant_id: _Optional[str] = ..., key_name: _Optional[str] = ..., peer: _Optional[str] = ...) -> None: ...

class EraseCallerResponse(_message.Message):
    __slots__ = ("sessions_deleted", "session_messages_deleted", "audit_records_erased", "operations_deleted", "cached_answers_dropped", "replayed_answers_dropped")
    SESSIONS_DELETED_FIELD_NUMBER: _ClassVar[int]
    SESSION_MESSAGES_DELETED_FIELD_NUMBER: _ClassVar[int]
    AUDIT_RECORDS_ERASED_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_DELETED_FIELD_NUMBER: _ClassVar[int]
    CACHED_ANSWERS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_ANSWERS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    sessions_deleted: int
    session_messages_deleted: int
    audit_records_erased: int
    operations_deleted: int
    cached_answers_dropped: int
    replayed_answers_dropped: int
    def __init__(self, sessions_deleted: _Optional[int] = ..., session_messages_deleted: _Optional[int] = ..., audit_records_erased: _Optional[int] = ..., operations_deleted: _Optional[int] = ..., cached_answers_dropped: _Optional[int] = ..., replayed_answers_dropped: _Optional[int] = ...) -> None: ...

class TagOwner(_message.Message):
    __slots__ = ("name", "owner_user_id", "owner_email")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_EMAIL_FIELD_NUMBER: _ClassVar[int]
    name: str
    owner_user_id: str
    owner_email: str
    def __init__(self, name: _Optional[str] = ..., owner_user_id: _Optional[str] = ..., owner_email: _Optional[str] = ...) -> None: ...

class ListTagOwnersRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTagOwnersResponse(_message.Message):
    __slots__ = ("tag_owners", "next_page_token")
    TAG_OWNERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tag_owners: _containers.RepeatedCompositeFieldContainer[TagOwner]
    next_page_token: str
    def __init__(self, tag_owners: _Optional[_Iterable[_Union[TagOwner, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SetTagOwnerRequest(_message.Message):
    __slots__ = ("tag_owner",)
    TAG_OWNER_FIELD_NUMBER: _ClassVar[int]
    tag_owner: TagOwner
    def __init__(self, tag_owner: _Optional[_Union[TagOwner, _Mapping]] = ...) -> None: ...

class SetTagOwnerResponse(_message.Message):
    __slots__ = ("tag_owner",)
    TAG_OWNER_FIELD_NUMBER: _ClassVar[int]
    tag_owner: TagOwner
    def __init__(self, tag_owner: _Optional[_Union[TagOwner, _Mapping]] = ...) -> None: ...

class DeleteTagOwnerRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteTagOwnerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PromptTemplate(_message.Message):
    __slots__ = ("name", "display_name", "instructions", "user_prompt", "built_in", "create_time", "update_time", "stop_sequences", "citation_policy", "language", "response_style")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    USER_PROMPT_FIELD_NUMBER: _ClassVar[int]
    BUILT_IN_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    STOP_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    CITATION_POLICY_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_STYLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    display_name: str
    instructions: str
    user_prompt: str
    built_in: bool
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    stop_sequences: _containers.RepeatedScalarFieldContainer[str]
    citation_policy: _rag_service_pb2.CitationPolicy
    language: str
    response_style: _rag_service_pb2.ResponseStyle
    def __init__(self, name: _Optional[str] = ..., display_name: _Optional[str] = ..., instructions: _Optional[str] = ..., user_prompt: _Optional[str] = ..., built_in: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., stop_sequences: _Optional[_Iterable[str]] = ..., citation_policy: _Optional[_Union[_rag_service_pb2.CitationPolicy, str]] = ..., language: _Optional[str] = ..., response_style: _Optional[_Union[_rag_service_pb2.ResponseStyle, str]] = ...) -> None: ...

class CreatePromptTemplateRequest(_message.Message):
    __slots__ = ("prompt_template", "prompt_template_id")
    PROMPT_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    prompt_template: PromptTemplate
    prompt_template_id: str
    def __init__(self, prompt_template: _Optional[_Union[PromptTemplate, _Mapping]] = ..., prompt_template_id: _Optional[str] = ...) -> None: ...

class GetPromptTemplateRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListPromptTemplatesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPromptTemplatesResponse(_message.Message):
    __slots__ = ("prompt_templates", "next_page_token")
    PROMPT_TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    prompt_templates: _containers.RepeatedCompositeFieldContainer[PromptTemplate]
    next_page_token: str
    def __init__(self, prompt_templates: _Optional[_Iterable[_Union[PromptTemplate, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdatePromptTemplateRequest(_message.Message):
    __slots__ = ("prompt_template", "update_mask")
    PROMPT_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    prompt_template: PromptTemplate
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, prompt_template: _Optional[_Union[PromptTemplate, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class DeletePromptTemplateRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeletePromptTemplateResponse(_message.Message):
    __slots__ = ("cached_answers_dropped",)
    CACHED_ANSWERS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    cached_answers_dropped: int
    def __init__(self, cached_answers_dropped: _Optional[int] = ...) -> None: ...

class RankingWeights(_message.Message):
    __slots__ = ("name", "similarity_weight", "recency_weight", "trust_weight")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    RECENCY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    TRUST_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    name: str
    similarity_weight: float
    recency_weight: float
    trust_weight: float
    def __init__(self, name: _Optional[str] = ..., similarity_weight: _Optional[float] = ..., recency_weight: _Optional[float] = ..., trust_weight: _Optional[float] = ...) -> None: ...

class GetRankingWeightsRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class UpdateRankingWeightsRequest(_message.Message):
    __slots__ = ("ranking_weights", "update_mask")
    RANKING_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    ranking_weights: RankingWeights
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, ranking_weights: _Optional[_Union[RankingWeights, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class SimulateAskRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _rag_service_pb2.AskRequest
    def __init__(self, request: _Optional[_Union[_rag_service_pb2.AskRequest, _Mapping]] = ...) -> None: ...

class SimulateAskResponse(_message.Message):
    __slots__ = ("answer", "model", "estimated_tokens")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    answer: _rag_service_pb2.Answer
    model: str
    estimated_tokens: int
    def __init__(self, answer: _Optional[_Union[_rag_service_pb2.Answer, _Mapping]] = ..., model: _Optional[str] = ..., estimated_tokens: _Optional[int] = ...) -> None: ...

class CreatePromptTemplateResponse(_message.Message):
    __slots__ = ("prompt_template",)
    PROMPT_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    prompt_template: PromptTemplate
    def __init__(self, prompt_template: _Optional[_Union[PromptTemplate, _Mapping]] = ...) -> None: ...

class GetPromptTemplateResponse(_message.Message):
    __slots__ = ("prompt_template",)
    PROMPT_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    prompt_template: PromptTemplate
    def __init__(self, prompt_template: _Optional[_Union[PromptTemplate, _Mapping]] = ...) -> None: ...

class UpdatePromptTemplateResponse(_message.Message):
    __slots__ = ("prompt_template", "cached_answers_dropped")
    PROMPT_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    CACHED_ANSWERS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    prompt_template: PromptTemplate
    cached_answers_dropped: int
    def __init__(self, prompt_template: _Optional[_Union[PromptTemplate, _Mapping]] = ..., cached_answers_dropped: _Optional[int] = ...) -> None: ...

class GetRankingWeightsResponse(_message.Message):
    __slots__ = ("ranking_weights",)
    RANKING_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    ranking_weights: RankingWeights
    def __init__(self, ranking_weights: _Optional[_Union[RankingWeights, _Mapping]] = ...) -> None: ...

class UpdateRankingWeightsResponse(_message.Message):
    __slots__ = ("ranking_weights",)
    RANKING_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    ranking_weights: RankingWeights
    def __init__(self, ranking_weights: _Optional[_Union[RankingWeights, _Mapping]] = ...) -> None: ...
