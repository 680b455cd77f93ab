"""Errors as JSON with a stable `code` and a `message`, for every failure the API can answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

STATUS_CODES = {
    400: "invalid_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "out_of_history",
    429: "too_many_refusals",
    503: "unavailable",
}


class ErrorBody(BaseModel):
    code: str
    message: str


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status, headers=headers)


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route can answer."""
    return {status: {"model": ErrorBody, "description": STATUS_CODES[status]} for status in statuses}


def problems_of(errors: Sequence[Any], skip: int = 0) -> str:
    """Pydantic's errors as one line, each where it is (less the first `skip` parts) and what is wrong."""
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc'][skip:]) or 'request'}: {error['msg']}"
        for error in errors
    )


def install(app: FastAPI) -> None:
    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, ApiError):
            raise exc
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, RequestValidationError):
            raise exc
        return error_response(400, "invalid_request", problems_of(exc.errors(), skip=1) or "invalid request")

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, HTTPException):
            raise exc
        code = STATUS_CODES.get(exc.status_code, "error")
        return error_response(exc.status_code, code, str(exc.detail), getattr(exc, "headers", None))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
