"""The FastAPI application: its OpenAPI document comes from the models the handlers return."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from streams.web import (
    artifacts,
    cache_reads,
    controls,
    jobs,
    listings,
    operations,
    overview,
    processes,
    replays,
    uploads,
)
from streams.web.console import pages as console
from streams.web.console import revocations
from streams.web.context import ApiContext
from streams.web.edge import EdgeGuard
from streams.web.errors import install
from streams.web.fastpath import FastJobReads
from streams.web.monitors import feeds, images, routes
from streams.web.requests import RequestMetrics

DOCS_ASSETS = "/docs-assets"  # Swagger UI's scripts and styles, from the installed package
DESCRIPTION = """Read models of every scrapestream job on any worker, audited mutations, health and metrics.

Send `Authorization: Bearer <token>` (unless the worker runs with auth off). Errors are JSON
with a stable `code` and a `message`. Lists are newest first; pass `next_cursor` back as `cursor`.
"""


def build_api(context: ApiContext) -> RequestMetrics:
    """The API as served: the documented FastAPI app behind the fast path of the common read, behind
    the edge (authentication and body limits before any body is read), every request counted."""
    guarded = EdgeGuard(
        FastJobReads(documented_api(context), context, context.principals),
        context.principals,
        context.sessions,
        context.peer_key,
        context.settings.max_request_body_bytes,
        context.settings.remote_result_max_bytes,
    )
    return RequestMetrics(guarded, context.metrics)


def documented_api(context: ApiContext) -> FastAPI:
    app = FastAPI(title="scrapestream", version="1", description=DESCRIPTION, docs_url=None, redoc_url=None)
    app.mount(
        DOCS_ASSETS, StaticFiles(directory=str(files("fastapi_offline") / "static")), name="docs-assets"
    )

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="scrapestream API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
        )

    console_assets = StaticFiles(directory=str(files("streams.web.console") / "static"))
    app.mount("/ui/static", console_assets, name="console-assets")
    app.state.context = context
    app.state.principals = context.principals
    app.state.peer_key = context.peer_key
    app.state.sessions = context.sessions
    routers = (
        operations.router,
        processes.router,
        overview.router,
        controls.router,
        jobs.router,
        listings.router,
        feeds.router,  # before monitors': /monitors/changes.atom is no monitor id
        routes.router,
        images.router,
    )
    for router in (*routers, artifacts.router, cache_reads.router, replays.router, uploads.router):
        app.include_router(router)
    app.include_router(console.router)
    app.include_router(revocations.router)
    install(app)
    generated = app.openapi

    def openapi() -> dict[str, Any]:
        # Validation failures are answered as 400 with the error body, never FastAPI's 422.
        if app.openapi_schema is None:
            document = generated()
            for operations in document.get("paths", {}).values():
                for operation in operations.values():
                    answers = operation.get("responses", {})
                    if "HTTPValidationError" in json.dumps(answers.get("422", {})):
                        answers.pop("422")
            schemas = document.get("components", {}).get("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
