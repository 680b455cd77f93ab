"""The FastAPI application: its OpenAPI document comes from the models the handlers return."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from streams.web import artifacts, jobs, listings, operations
from streams.web.context import ApiContext
from streams.web.errors import install
from streams.web.fastpath import FastJobReads

DESCRIPTION = """Read models of every scrapestream job on any worker, audited mutations, health and metrics.

Send `Authorization: Bearer <token>` (unless the worker runs with auth off). Errors are JSON
with a stable `code` and a `message`. Lists are newest first; pass `next_cursor` back as `cursor`.
"""


def build_api(context: ApiContext) -> FastJobReads:
    """The API as served: the documented FastAPI app behind the fast path of the common read."""
    return FastJobReads(documented_api(context), context)


def documented_api(context: ApiContext) -> FastAPI:
    app = FastAPI(
        title="scrapestream", version="1", description=DESCRIPTION, docs_url="/docs", redoc_url=None
    )
    app.state.context = context
    app.state.principals = context.principals
    app.state.peer_key = context.peer_key
    for router in (operations.router, jobs.router, listings.router, artifacts.router):
        app.include_router(router)
    install(app)
    generated = app.openapi

    def openapi() -> dict[str, Any]:
        # Validation failures are answered as 400 with the error body, never FastAPI's 422.
        if app.openapi_schema is None:
            document = generated()
            for operations in document.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            schemas = document.get("components", {}).get("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
