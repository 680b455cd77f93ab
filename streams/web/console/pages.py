"""The console's pages and actions; each asks the API what to show or do and renders the answer."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode
from uuid import UUID

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from projections.access import READERS_OF_EVERYTHING
from projections.lifecycle.mutations import REDRIVING_ROLES, offered_mutations
from projections.monitors.content import word_runs
from schemas.enums import AuditAction, JobStatus
from streams.auth.principals import Principals
from streams.web import summary
from streams.web.console.api import ConsoleApi, ConsoleError
from streams.web.console.session import (
    Session,
    csrf_of,
    csrf_refusal,
    protect,
    session_of,
    sign_in,
    sign_out,
)

RECENT = timedelta(hours=1)
RECENT_PAGES = 4
PAGE_SIZE = 50
RECENT_CHECKS = 50
RECENT_CHANGES = 20
MAX_PAGE_SIZE = 500
IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
MAX_IMAGE_BYTES = 16 * 1024 * 1024
TEXT_PREVIEWS = 3
PEER_METRICS_TIMEOUT_S = 2.0
ACTIONS = {
    "cancel": AuditAction.JOB_CANCEL,
    "redrive": AuditAction.JOB_REDRIVE,
    "delete-history": AuditAction.JOB_HISTORY_DELETE,
}
Built = Response | tuple[str, dict[str, Any]]
Build = Callable[[Session, ConsoleApi], Awaitable[Built]]

templates = Environment(
    loader=PackageLoader("streams.web.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
)
templates.filters["when"] = lambda at: "" if not at else str(at).replace("T", " ")[:19]
templates.filters["plain"] = lambda value: plain(value)
templates.filters["word_marks"] = lambda words: word_marks(words)
router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("")
async def overview(request: Request) -> Response:
    return await _serve(request, lambda session, api: _overview(request, session, api, "overview.html"))


@router.get("/overview/live")
async def overview_live(request: Request) -> Response:
    return await _serve(request, lambda session, api: _overview(request, session, api, "overview_body.html"))


async def _overview(request: Request, session: Session, api: ConsoleApi, template: str) -> Built:
    return template, {"overview": await api.get("/overview")}


@router.get("/login")
async def login_page(request: Request, next: str = "/ui") -> Response:
    session = session_of(request)
    if session is not None and session.token is None:
        return protect(request, RedirectResponse("/ui", 303), session)
    return _sign_in_page(request, 200, _local(next), None)


def _sign_in_page(request: Request, status: int, target: str, problem: str | None) -> Response:
    csrf = csrf_of(request)
    page = templates.get_template("login.html").render(
        session=None, path=request.url.path, next=target, problem=problem, csrf=csrf[0]
    )
    return protect(request, HTMLResponse(page, status), None, csrf)


@router.post("/login")
async def login(request: Request) -> Response:
    form = await _form(request)
    target = _local(form.get("next", "/ui"))
    refusal = csrf_refusal(request, str(form.get("csrf", "")), signing_in=True)
    if refusal is not None:  # a sign-in another site started (login CSRF) carries no console cookie
        return _sign_in_page(request, 403, target, refusal)
    principals: Principals | None = request.app.state.principals
    principal = None if principals is None else principals.by_token(form.get("token", "").strip())
    if principal is None:
        problem = "that token matches no principal (revoked, mistyped or for another deployment)"
        return _sign_in_page(request, 401, target, problem)
    response = RedirectResponse(target, 303)
    sign_in(request, response, principal)
    return protect(request, response, None)


@router.post("/logout")
async def logout(request: Request) -> Response:
    refusal = csrf_refusal(request, str((await _form(request)).get("csrf", "")))
    if refusal is not None:  # another site's form cannot sign a person out either
        return _render(request, session_of(request), "error.html", 403, code=403, problem=refusal)
    response = RedirectResponse("/ui/login", 303)
    await sign_out(request, response)
    return protect(request, response, None)


@router.get("/jobs")
async def jobs_page(request: Request) -> Response:
    return await _serve(request, lambda session, api: _jobs(request, api, "jobs.html"))


@router.get("/jobs/rows")
async def jobs_rows(request: Request) -> Response:
    return await _serve(request, lambda session, api: _jobs(request, api, "jobs_rows.html"))


async def _jobs(request: Request, api: ConsoleApi, template: str) -> Built:
    filters = _job_filters(request)
    cursor = request.query_params.get("cursor") or None
    page = await api.get("/jobs", _api_params(filters) | {"limit": filters["limit"], "cursor": cursor})
    shown = {name: value for name, value in filters.items() if value and value != PAGE_SIZE}
    return template, {
        "filters": filters,
        "states": [state.value for state in JobStatus],
        "jobs": page["items"],
        "next_url": None
        if page["next_cursor"] is None
        else "/ui/jobs?" + urlencode(shown | {"cursor": page["next_cursor"]}, doseq=True),
        "rows_url": "/ui/jobs/rows?" + urlencode(shown, doseq=True),
        "live": cursor is None,
    }


def _job_filters(request: Request) -> dict[str, Any]:
    query = request.query_params
    return {
        "state": [state for state in query.getlist("state") if state in JobStatus.__members__],
        "caller": query.get("caller", "").strip(),
        "type": query.get("type", "").strip(),
        "host": query.get("host", "").strip(),
        "since": query.get("since", "").strip(),
        "until": query.get("until", "").strip(),
        "q": query.get("q", "").strip(),
        "checks": "1" if query.get("checks") == "1" else "",
        "limit": _page_size(query.get("limit", "")),
    }


def _page_size(text: str) -> int:
    return min(int(text), MAX_PAGE_SIZE) if text.isdigit() and int(text) > 0 else PAGE_SIZE


def _api_params(filters: dict[str, Any]) -> dict[str, Any]:
    """The API's query for the console's filters; `q` is a job id (or its start) or text of a URL."""
    search = filters["q"].lower()
    is_id = 0 < len(search) <= 36 and all(char in "0123456789abcdef-" for char in search)
    return {
        "state": filters["state"],
        "caller": filters["caller"],
        "type": filters["type"],
        "host": filters["host"],
        "since": _instant(filters["since"]),
        "until": _instant(filters["until"]),
        "id_prefix": search if is_id else None,
        "url": None if is_id else filters["q"],
        "checks": None if filters["checks"] else "false",  # monitors' checks only when asked
    }


def _instant(text: str) -> str | None:
    """A form's time (UTC unless it names an offset), as the API takes it."""
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConsoleError(400, f"{text!r} is not a time: use YYYY-MM-DDTHH:MM (UTC)") from exc
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).isoformat()


@router.get("/jobs/{job_id}")
async def job_page(job_id: str, request: Request) -> Response:
    return await _serve(request, lambda session, api: _job(session, api, job_id, "job.html", request))


@router.get("/jobs/{job_id}/live")
async def job_live(job_id: str, request: Request) -> Response:
    return await _serve(request, lambda session, api: _job(session, api, job_id, "job_live.html", request))


def word_marks(words: str) -> Markup:
    """A word diff with its removed runs struck (`<del>`) and its added ones marked (`<ins>`)."""
    tags = {"": Markup("{}"), "-": Markup("<del>{}</del>"), "+": Markup("<ins>{}</ins>")}
    return Markup("").join(tags[kind].format(text) for kind, text in word_runs(words))


def plain(value: Any) -> str:
    """An event field as a person reads it: nested fields as `name value`, lists comma-separated."""
    if isinstance(value, dict):
        shown = (f"{name} {plain(inner)}" for name, inner in value.items() if inner not in (None, "", [], {}))
        return " · ".join(shown)
    if isinstance(value, list):
        return ", ".join(plain(item) for item in value)
    return str(value)


async def _job_id(api: ConsoleApi, given: str) -> str:
    """`given` when it is a job id, else the one job whose id starts with it (as lists show them)."""
    text = given.strip().lower()
    with contextlib.suppress(ValueError):
        return str(UUID(text))
    if text and len(text) <= 36 and all(char in "0123456789abcdef-" for char in text):
        found = (await api.get("/jobs", {"id_prefix": text, "limit": 2}))["items"]
        if len(found) == 1:
            return str(found[0]["job_id"])
    raise ConsoleError(
        404, f"no job {given[:80]!r}: a job id is a UUID (or its start); the Jobs page lists them"
    )


async def _job(session: Session, api: ConsoleApi, job_id: str, template: str, request: Request) -> Built:
    job_id = await _job_id(api, job_id)
    job = await api.get(f"/jobs/{job_id}")
    events = (await api.get(f"/jobs/{job_id}/events"))["items"]
    values: dict[str, Any] = {
        "job": job,
        "events": events,
        "callbacks": (await api.get(f"/jobs/{job_id}/callbacks"))["items"],
        "offered": {name for name, action in ACTIONS.items() if action in _offered(session, job)},
        "done": request.query_params.get("done"),
    }
    if template == "job.html":
        values["audit"] = (
            (await api.get("/audit", {"target": f"job:{job['job_id']}", "limit": 100}))["items"]
            if session.principal.role in READERS_OF_EVERYTHING
            else None
        )
        values["previews"] = await _previews(api, job)
    return template, values


def _offered(session: Session, job: dict[str, Any]) -> frozenset[AuditAction]:
    return offered_mutations(session.principal.role, JobStatus(job["state"]))


async def _previews(api: ConsoleApi, job: dict[str, Any]) -> dict[str, Any]:
    """Each artifact's preview: images by URL, text as (escaped) source, at most a few downloads."""
    previews: dict[str, Any] = {}
    for artifact in job["artifacts"]:
        kind = artifact["content_type"].split(";")[0].strip().lower()
        if kind in IMAGE_TYPES:
            previews[artifact["artifact_id"]] = {"image": f"/ui/artifacts/{artifact['artifact_id']}"}
        elif (kind.startswith("text/") or kind.endswith(("json", "xml"))) and len(previews) < TEXT_PREVIEWS:
            try:
                found = await api.artifact(f"/artifacts/{artifact['artifact_id']}")
            except ConsoleError as error:
                previews[artifact["artifact_id"]] = {"problem": error.message}
                continue
            text = found.body.decode("utf-8", errors="replace")
            previews[artifact["artifact_id"]] = {"text": text, "truncated": found.truncated}
    return previews


@router.post("/jobs/{job_id}/{action}")
async def job_action(job_id: str, action: str, request: Request) -> Response:
    async def act(session: Session, api: ConsoleApi) -> Built:
        if action not in ACTIONS:
            raise ConsoleError(404, f"no action {action!r}")
        form = await _checked_form(request)
        await api.post(f"/jobs/{job_id}/{action}", {"reason": form.get("reason", "")})
        if action == "delete-history":  # nothing left to show but the audit records
            return RedirectResponse("/ui/jobs", 303)
        return RedirectResponse(f"/ui/jobs/{job_id}?done={action}", 303)

    return await _serve(request, act)


@router.get("/artifacts/{artifact_id}")
async def artifact_image(artifact_id: str, request: Request) -> Response:
    return await _image(request, f"/artifacts/{artifact_id}")


@router.get("/monitors/{monitor_id}/changes/{check_job_id}/difference")
async def difference_image(monitor_id: UUID, check_job_id: UUID, request: Request) -> Response:
    return await _image(request, f"/monitors/{monitor_id}/changes/{check_job_id}/difference")


async def _image(request: Request, path: str) -> Response:
    async def image(session: Session, api: ConsoleApi) -> Built:
        found = await api.artifact(path, MAX_IMAGE_BYTES)
        kind = found.content_type.split(";")[0].strip().lower()
        if kind not in IMAGE_TYPES or found.truncated:
            raise ConsoleError(404, "the console shows images only; download other artifacts from the API")
        return Response(found.body, media_type=kind, headers={"Content-Security-Policy": "sandbox"})

    return await _serve(request, image)


@router.get("/dead-letters")
async def dead_letters(request: Request) -> Response:
    async def build(session: Session, api: ConsoleApi) -> Built:
        cursor = request.query_params.get("cursor") or None
        page = await api.get("/dead-letters", {"limit": 500, "cursor": cursor})
        return "dead_letters.html", {
            "groups": summary.dead_letters_by_failure(page["items"]),
            "next_url": None
            if page["next_cursor"] is None
            else "/ui/dead-letters?" + urlencode({"cursor": page["next_cursor"]}),
            "may_redrive": session.principal.role in REDRIVING_ROLES,
            "results": None,
        }

    return await _serve(request, build)


@router.post("/dead-letters/redrive")
async def redrive_dead_letters(request: Request) -> Response:
    async def build(session: Session, api: ConsoleApi) -> Built:
        form = await _checked_form(request, multiple=("job",))
        if not form.get("job"):
            raise ConsoleError(
                400, "no job was selected: tick the dead-lettered jobs to redrive, then redrive"
            )
        results: list[tuple[str, str]] = []
        for job_id in form.get("job", []):
            try:
                await api.post(f"/jobs/{job_id}/redrive", {"reason": form.get("reason", "")})
                results.append((job_id, "redriven"))
            except ConsoleError as error:
                results.append((job_id, f"refused ({error.status}): {error.message}"))
        if results and all(outcome.startswith("refused (403)") for _, outcome in results):
            raise ConsoleError(403, results[0][1].split(": ", 1)[1])
        return "dead_letters.html", {
            "groups": {},
            "next_url": None,
            "may_redrive": False,
            "results": results,
        }

    return await _serve(request, build)


@router.get("/monitors")
async def monitors(request: Request) -> Response:
    async def build(session: Session, api: ConsoleApi) -> Built:
        cursor = request.query_params.get("cursor") or None
        page = await api.get("/monitors", {"limit": PAGE_SIZE, "cursor": cursor})
        next_url = (
            None
            if page["next_cursor"] is None
            else "/ui/monitors?" + urlencode({"cursor": page["next_cursor"]})
        )
        return "monitors.html", {"monitors": page["items"], "next_url": next_url}

    return await _serve(request, build)


@router.get("/monitors/{monitor_id}")
async def monitor_page(monitor_id: UUID, request: Request) -> Response:
    async def build(session: Session, api: ConsoleApi) -> Built:
        return "monitor.html", {
            "monitor": await api.get(f"/monitors/{monitor_id}"),
            "changes": (await api.get(f"/monitors/{monitor_id}/changes"))["items"][:RECENT_CHANGES],
            "checks": (await api.get(f"/monitors/{monitor_id}/checks"))["items"][:RECENT_CHECKS],
        }

    return await _serve(request, build)


@router.get("/routes")
async def routes(request: Request) -> Response:
    async def build(session: Session, api: ConsoleApi) -> Built:
        items = (await api.get("/routes"))["items"]
        for route in items:
            periods = route["periods"]
            route["chart"] = {
                "labels": ["spent"],
                "x": [int(datetime.fromisoformat(period["starts_at"]).timestamp()) for period in periods],
                "y": [[float(period["spent"]) for period in periods]],
                "unit": "spend per period",
            }
        return "routes.html", {"routes": items}

    return await _serve(request, build)


async def _serve(request: Request, build: Build) -> Response:
    session = session_of(request)
    if session is None:
        return _to_login(request)
    async with ConsoleApi(request, session) as api:
        try:
            built = await build(session, api)
        except ConsoleError as error:
            if error.status == 401:
                return _to_login(request)
            said = {"code": error.status, "problem": error.message}
            return _render(request, session, "error.html", error.status, **said)
    if isinstance(built, Response):
        return protect(request, built, session)
    name, values = built
    return _render(request, session, name, 200, **values)


def _render(request: Request, session: Session | None, name: str, status: int, **values: Any) -> Response:
    page = templates.get_template(name).render(session=session, path=request.url.path, **values)
    return protect(request, HTMLResponse(page, status), session)


def _to_login(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    response: Response = RedirectResponse("/ui/login?" + urlencode({"next": target}), 303)
    if request.headers.get("HX-Request"):  # a live fragment: have htmx load the sign-in page whole
        response = Response(status_code=204, headers={"HX-Redirect": "/ui/login"})
    return protect(request, response, None)


def _local(target: str) -> str:
    """Only a console path is a place to go after signing in (never another site)."""
    safe = target.startswith("/ui") and not target.startswith("//") and "\\" not in target
    return target if safe else "/ui"


async def _form(request: Request, multiple: tuple[str, ...] = ()) -> dict[str, Any]:
    body = await request.body()  # bounded by the edge (streams/web/edge.py) before it was read
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {name: values if name in multiple else values[-1] for name, values in fields.items()}


async def _checked_form(request: Request, multiple: tuple[str, ...] = ()) -> dict[str, Any]:
    form = await _form(request, multiple)
    refusal = csrf_refusal(request, str(form.get("csrf", "")))
    if refusal is not None:
        raise ConsoleError(403, refusal)
    return form
