"""`POST /_shard/sessions/{id}/revoke`: another worker signed a console session out (peers only)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from streams.web.auth import PeerCaller
from streams.web.console.session import sessions_of

router = APIRouter(include_in_schema=False)


@router.post("/_shard/sessions/{session_id}/revoke")
async def revoke_session(session_id: str, expires: int, request: Request, principal: PeerCaller) -> Response:
    sessions_of(request).revoke_id(session_id, expires)
    return Response(status_code=204)
