"""Artifact downloads: any worker finds the jobs that stored it, checks the reader, audits, streams.

The bytes are streamed from the artifact store, never read whole: a shared one (S3) answers every
worker; from a local one, this worker's directory, else the first peer that holds them. An artifact
the caller may not read is answered as one that does not exist. The internal routes answer peers
only (`streams.auth.peering`).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import StreamingResponse

from projections.access import job_read_refusal
from projections.artifacts import KEY_PATTERN, is_content_key
from schemas.enums import AuditAction
from streams.artifacts.port import ArtifactStore
from streams.auth.principals import Principal
from streams.web.auth import Caller, PeerCaller
from streams.web.context import reads_of, stored_of
from streams.web.errors import ApiError, responses
from streams.web.jobs import JSON
from streams.web.models import ArtifactReference, ArtifactReferences
from streams.web.peers import relay
from streams.web.ports import Reads, Stored

# Stored pages are served from the API's origin: never run as its scripts, never sniffed.
DIGEST_HEADER = "Repr-Digest"  # RFC 9530: the SHA-256 of the bytes, which a client checks them against
AUDIT_ID_HEADER = "X-Audit-Id"  # the download's audit record, as `GET /audit` lists it
UNTRUSTED_CONTENT = {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"}
BYTES_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The stored bytes, with their content type",
        "content": {"*/*": {}},
        "headers": {AUDIT_ID_HEADER: {"description": "Its audit record's id", "schema": {"type": "string"}}},
    }
}


router = APIRouter(tags=["artifacts"])


@router.get(
    "/artifacts/{artifact_id}",
    response_class=Response,
    responses=BYTES_RESPONSE | responses(400, 401, 404, 429, 503),
    summary="Download an artifact's bytes (audited)",
)
async def download(artifact_id: UUID, request: Request, principal: Caller) -> Response:
    reads, stored = reads_of(request), stored_of(request)
    reads.refusals.check(principal)
    target = f"artifact:{artifact_id}"
    refs = await _references(reads, stored, principal, artifact_id)
    allowed = [ref for ref in refs if job_read_refusal(principal.name, principal.role, ref.caller) is None]
    if not allowed:
        if refs:  # stored, but by jobs this caller may not read: answered as nothing stored
            refusal = "a service may download only the artifacts of its own jobs"
            await reads.audit(principal, request, AuditAction.ARTIFACT_DOWNLOAD, refusal, target)
        reads.refusals.refused(principal)  # nothing stored counts alike
        raise ApiError(404, "not_found", f"no job of yours stored artifact {artifact_id}")
    audit_id = await reads.audit(principal, request, AuditAction.ARTIFACT_DOWNLOAD, None, target)
    ref = allowed[0]
    answer = await stored_bytes(stored, principal, ref.key, ref.content_type, artifact_id)
    answer.headers[AUDIT_ID_HEADER] = str(audit_id)  # to match the download with storage access logs
    return answer


@router.get("/_shard/artifacts/{artifact_id}", include_in_schema=False)
async def references_shard(artifact_id: UUID, request: Request, principal: PeerCaller) -> Response:
    references = ArtifactReferences(references=await _local_refs(reads_of(request), artifact_id))
    return Response(references.model_dump_json(), media_type=JSON)


@router.get("/_shard/artifact-bytes/{key:path}", include_in_schema=False)
async def bytes_shard(
    key: Annotated[str, Path(pattern=KEY_PATTERN.pattern)], request: Request, principal: PeerCaller
) -> Response:
    chunks = await _open(stored_of(request).artifacts, key)
    if chunks is None:
        raise ApiError(404, "not_found", "this worker does not hold those bytes")
    return StreamingResponse(chunks, media_type="application/octet-stream")


async def _references(
    reads: Reads, stored: Stored, principal: Principal, artifact_id: UUID
) -> list[ArtifactReference]:
    path = f"/_shard/artifacts/{artifact_id}"
    peers = stored.routing.everyone()[1:]
    remote = await asyncio.gather(
        *(stored.peers.shard(peer, path, {}, principal, ArtifactReferences) for peer in peers)
    )
    return await _local_refs(reads, artifact_id) + [ref for answer in remote for ref in answer.references]


async def _local_refs(reads: Reads, artifact_id: UUID) -> list[ArtifactReference]:
    found = reads.store.artifact_refs(reads.ownership.owned, artifact_id)
    if not found:  # perhaps stored by a job whose completion is out and whose events are folding
        await reads.decisions.written()
        found = reads.store.artifact_refs(reads.ownership.owned, artifact_id)
    return [
        ArtifactReference(
            job_id=job.job_id,
            caller=job.accepted.caller_identity,
            key=artifact.key,
            content_type=artifact.content_type,
        )
        for job, artifact in found
    ]


async def stored_bytes(
    stored: Stored, principal: Principal, key: str, content_type: str, artifact_id: UUID
) -> Response:
    """The bytes stored under `key`, streamed from this worker's store or the first peer's that holds them."""
    if not is_content_key(key):
        raise ApiError(404, "gone", f"artifact {artifact_id} has no stored content address")
    headers = UNTRUSTED_CONTENT | {DIGEST_HEADER: repr_digest(key)}
    chunks = await _open(stored.artifacts, key)
    if chunks is not None:
        return StreamingResponse(chunks, media_type=content_type, headers=headers)
    peers = () if stored.artifacts.shared else stored.routing.everyone()[1:]
    for peer in peers:
        answer = await stored.peers.open_stream(peer, f"/_shard/artifact-bytes/{key}", principal)
        if answer is not None:
            return StreamingResponse(relay(answer), media_type=content_type, headers=headers)
    raise ApiError(
        404,
        "gone",
        f"no worker holds the bytes of artifact {artifact_id} any more (expired, or its worker is gone)",
    )


async def _open(store: ArtifactStore, key: str) -> AsyncIterator[bytes] | None:
    """The stored bytes as a stream, or None; a store that fails to answer is a 503, never a 500."""
    try:
        return await store.open(key)
    except Exception as exc:  # any store, any client library: S3's raise their own error types
        raise ApiError(
            503, "unavailable", f"the artifact store did not answer: {type(exc).__name__}"
        ) from exc


def repr_digest(key: str) -> str:
    """`sha-256=:…:` of the bytes a content key names (its last part is their SHA-256)."""
    return f"sha-256=:{base64.b64encode(bytes.fromhex(key.rsplit('/', 1)[-1])).decode()}:"
