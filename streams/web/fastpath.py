"""The common read, answered before FastAPI's routing: `GET /jobs/{id}` of a job this worker keeps.

Only the plain case is answered here (this worker owns the job, the caller may read it); every
other case (no token, a refusal, another worker's job, no such job) falls through to the
documented route, which answers it. The body is the same `JobViews` rendering either way.
Dependency resolution and routing cost more than the read itself (docs/PERFORMANCE.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from uuid import UUID

from projections.access import job_read_refusal, reads_own_only
from streams.auth.principals import TRUSTED, Principal, Principals
from streams.web.ports import Reads

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]
JOB_PATH = "/jobs/"
UUID_LENGTH = 36


class FastJobReads:
    def __init__(self, app: Asgi, reads: Reads, principals: Principals | None) -> None:
        self._app = app
        self._reads = reads
        self._principals = principals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = self._answer(scope) if scope["type"] == "http" and scope["method"] == "GET" else None
        if body is None:
            await self._app(scope, receive, send)
            return
        scope["scrapestream.route"] = "/jobs/{job_id}"
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _answer(self, scope: Scope) -> bytes | None:
        path: str = scope["path"]
        if len(path) != len(JOB_PATH) + UUID_LENGTH or not path.startswith(JOB_PATH):
            return None
        if scope.get("query_string"):
            return None  # a read as of a time, answered by the documented route
        try:
            job_id = UUID(path[len(JOB_PATH) :])
        except ValueError:
            return None
        reads = self._reads
        if reads.partition_of(job_id) not in reads.ownership.owned or reads.decisions.unfolded(job_id):
            return None  # the documented route answers (and waits for a batch in flight)
        principal = self._principal(scope)
        job = None if principal is None else reads.store.load_job(job_id)
        if principal is None or job is None:
            return None
        if job_read_refusal(principal.name, principal.role, job.accepted.caller_identity) is not None:
            return None
        return reads.views.json(job, own=reads_own_only(principal.role))

    def _principal(self, scope: Scope) -> Principal | None:
        principals = self._principals
        if principals is None:
            return TRUSTED
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                return principals.by_token(token.strip()) if scheme.lower() == "bearer" else None
        return None
