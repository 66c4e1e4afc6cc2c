"""google.longrunning.Operations (AIP-151) over the stored operations: Get, List, Wait, Cancel, Delete.

Every replica answers for every operation from the records (`OperationStore`); the one running it is found through
`OperationRunner` for a cancellation or a wait. An operation is its submitter's, as a session is: the caller of
every RPC here must be the operation's owner (`CallContext.caller`), else it gets the NOT_FOUND of a name that does
not exist; an admin key of the operation's tenant may also delete it. The contract is in
protos/ragsvc/v1/operations.proto and docs/operations.md.
"""

from __future__ import annotations

import asyncio

from google.longrunning import operations_pb2_grpc as lro_grpc
from google.longrunning import operations_proto_pb2 as lro
from google.protobuf import empty_pb2

from ragsvc.answering.context import CallContext
from ragsvc.answering.deadlines import DEADLINE_MARGIN_S
from ragsvc.errors import FieldViolation, InvalidRequest, NotFound, OperationDone
from ragsvc.server.boundary import call_context, unary_boundary
from ragsvc.server.interceptors import Context
from ragsvc.server.operation_runner import OperationRunner
from ragsvc.server.pages import BAD_PAGE_TOKEN, page_after, page_size_of, page_token
from ragsvc.storage.operations import OperationRecord
from ragsvc.wire.operations import NAME, operation_to_proto

COLLECTION = "operations"  # ListOperations' `name`: the one collection (or empty)
_FILTERS = {"": None, "done = true": True, "done = false": False}


class OperationsServicer(lro_grpc.OperationsServicer):
    def __init__(self, runner: OperationRunner) -> None:
        self._runner = runner
        self._store = runner.store
        self._settings = runner.settings

    async def _owned(self, name: str, call: CallContext, *, tenant_admin: bool = False) -> OperationRecord:
        """The operation `name` when `call`'s caller owns it (or, with `tenant_admin`, is an admin of its tenant);
        InvalidRequest for a malformed name, NotFound otherwise."""
        if not NAME.fullmatch(name):
            raise InvalidRequest([FieldViolation("name", "must be operations/ followed by 32 hex digits")])
        record = await self._store.get(name)
        if record is None or not _may_see(record, call, tenant_admin=tenant_admin):
            raise NotFound(f"no operation {name!r}", metadata={"name": name})
        return record

    @unary_boundary
    async def GetOperation(self, request: lro.GetOperationRequest, context: Context) -> lro.Operation:
        return operation_to_proto(await self._owned(request.name, call_context(context)))

    @unary_boundary
    async def ListOperations(self, request: lro.ListOperationsRequest, context: Context) -> lro.ListOperationsResponse:
        call = call_context(context)
        violations = []
        if request.name not in ("", COLLECTION):
            violations.append(FieldViolation("name", f"must be empty or {COLLECTION!r}"))
        if request.filter.strip() not in _FILTERS:
            violations.append(FieldViolation("filter", "must be empty, 'done = true' or 'done = false'"))
        if violations:
            raise InvalidRequest(violations)
        size = page_size_of(request.page_size)
        scope = f"{call.caller}?{request.filter.strip()}"  # a token continues the same listing only
        after = page_after(request.page_token, scope)
        if after and not after.isdigit():
            raise InvalidRequest([BAD_PAGE_TOKEN])
        records = await self._store.list_owned(
            call.caller, before_seq=int(after) if after else None, limit=size + 1, done=_FILTERS[request.filter.strip()]
        )
        token = page_token(scope, str(records[size - 1].seq)) if len(records) > size else ""
        return lro.ListOperationsResponse(operations=[operation_to_proto(r) for r in records[:size]], next_page_token=token)

    @unary_boundary
    async def DeleteOperation(self, request: lro.DeleteOperationRequest, context: Context) -> empty_pb2.Empty:
        record = await self._owned(request.name, call_context(context), tenant_admin=True)
        await self._store.delete(record.name)
        return empty_pb2.Empty()

    @unary_boundary
    async def CancelOperation(self, request: lro.CancelOperationRequest, context: Context) -> empty_pb2.Empty:
        record = await self._owned(request.name, call_context(context))
        if record.done or not await self._runner.cancel(record.name):
            raise OperationDone(f"operation {record.name!r} has finished: there is nothing to cancel",
                                metadata={"name": record.name})  # fmt: skip
        return empty_pb2.Empty()

    @unary_boundary
    async def WaitOperation(self, request: lro.WaitOperationRequest, context: Context) -> lro.Operation:
        call = call_context(context)
        record = await self._owned(request.name, call)
        loop = asyncio.get_running_loop()
        wait_s = self._settings.operation_wait_max_s
        if request.HasField("timeout"):
            asked = request.timeout.ToTimedelta().total_seconds()
            if asked < 0:
                raise InvalidRequest([FieldViolation("timeout", "must not be negative")])
            wait_s = min(wait_s, asked)
        until = loop.time() + wait_s
        if call.deadline is not None:
            until = min(until, call.deadline - DEADLINE_MARGIN_S)
        while not record.done and (left := until - loop.time()) > 0:
            await self._runner.changed(record.name, left)
            record = await self._owned(record.name, call)
        return operation_to_proto(record)


def _may_see(record: OperationRecord, call: CallContext, *, tenant_admin: bool) -> bool:
    """Its owner may; with `tenant_admin`, so may an admin key of its tenant."""
    if record.owner == call.caller:
        return True
    principal = call.principal
    return tenant_admin and principal is not None and principal.can_admin and principal.tenant_id == record.tenant_id
