"""The worker's HTTP API (read-only): health and one job's projection."""

from __future__ import annotations

from collections import Counter
from uuid import UUID

from aiohttp import web

from projections.jobstore import JobStore
from projections.views import job_view
from streams.agents.lifecycle import Lifecycle


def build_web(store: JobStore, lifecycle: Lifecycle, counters: Counter[str]) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response(
            {
                "status": "ok",
                "owned_partitions": lifecycle.owned,
                "counters": dict(counters) | {"fold.duplicates_ignored": store.duplicates_ignored},
            }
        )

    async def job(request: web.Request) -> web.Response:
        try:
            job_id = UUID(request.match_info["job_id"])
        except ValueError:
            return web.json_response({"error": "job_id must be a UUID"}, status=400)
        state = store.load_job(job_id)
        if state is None:
            return web.json_response({"error": f"no job {job_id} on this worker"}, status=404)
        return web.json_response(job_view(state))

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/jobs/{job_id}", job)
    return app


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner and the bound port (useful when `port` is 0)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    bound = server.sockets[0].getsockname()[1] if server is not None and server.sockets else port  # type: ignore[attr-defined]
    return runner, int(bound)
