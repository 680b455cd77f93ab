"""`scrapestream export`: the artifacts of the jobs a listing finds, downloaded into a directory.

Each artifact goes to `DIR/<job id>/<artifact id>.<ext>` through a `.part` file that is renamed
only once its SHA-256 matches the one the job recorded; a file already there with the right
checksum is kept, so an interrupted export run again downloads only what is missing.
`DIR/manifest.jsonl` lists every artifact exported (job, URL, content type, checksum, path).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from schemas.errors import ScrapestreamError
from streams.cli.api_client import ApiClient
from streams.cli.exits import EXIT_FAILED
from streams.cli.terminal import printable
from streams.clock import utc_now
from streams.errors import UsageError
from streams.moments import moment_of

PAGE = 200
EXTENSIONS = {
    "text/html": "html",
    "image/png": "png",
    "image/jpeg": "jpg",
    "application/json": "json",
    "text/plain": "txt",
}


def run_export(api: ApiClient, arguments: argparse.Namespace) -> int:
    target = _directory(Path(arguments.to))
    wanted = _artifacts(api, arguments)
    console = Console(stderr=True, quiet=arguments.json)
    failures: list[str] = []
    counts = {"downloaded": 0, "already there": 0, "failed": 0}
    manifest: list[dict[str, Any]] = []
    with Progress(
        TextColumn("exporting"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console
    ) as progress:
        task = progress.add_task("artifacts", total=len(wanted))
        for job, artifact in wanted:
            path = _path_of(target, job, artifact)
            outcome = "refused: not a job and artifact id" if path is None else _export(api, artifact, path)
            counts[outcome if outcome in counts else "failed"] += 1
            if outcome not in counts or path is None:
                said = f"{artifact.get('artifact_id')} of job {job.get('job_id')}: {outcome}"
                failures.append(said)
                progress.console.print(printable(said), highlight=False, markup=False)
            else:
                manifest.append(_entry(job, artifact, path.relative_to(target)))
            progress.advance(task)
    with (target / "manifest.jsonl").open("w") as written:
        written.writelines(json.dumps(entry) + "\n" for entry in manifest)
    if arguments.json:
        summary = {"artifacts": len(wanted), "directory": str(target), "failures": failures}
        sys.stdout.write(json.dumps(summary | {key.replace(" ", "_"): n for key, n in counts.items()}) + "\n")
    else:
        said = ", ".join(f"{count:,} {name}" for name, count in counts.items())
        Console().print(
            f"{len(wanted):,} artifacts of the matching jobs: {said}; into {target}", highlight=False
        )
    return EXIT_FAILED if counts["failed"] else 0


def _directory(target: Path) -> Path:
    """`target`, created if missing and proven writable, before anything is downloaded."""
    if target.exists() and not target.is_dir():
        raise UsageError(f"--to {target}: is a file; give a directory (created if missing)")
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe = target / ".scrapestream-export-probe"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--to {target}: cannot write there ({exc.strerror or exc})") from None
    return target


def _artifacts(api: ApiClient, arguments: argparse.Namespace) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    since = None if arguments.since is None else moment_of(arguments.since, utc_now()).isoformat()
    params = {"state": arguments.state, "since": since, "caller": arguments.caller}
    params["type"] = arguments.job_type
    found: list[tuple[dict[str, Any], dict[str, Any]]] = []
    cursor = None
    while True:
        page = api.get("/jobs", params | {"limit": PAGE, "cursor": cursor})
        found += [(job, artifact) for job in page["items"] for artifact in job["artifacts"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return found


def _path_of(target: Path, job: dict[str, Any], artifact: dict[str, Any]) -> Path | None:
    """`DIR/<job id>/<artifact id>.<ext>`, or None when the API's ids are not ids (a hostile or
    broken API could name `../` or an absolute path)."""
    ids = (str(job.get("job_id")), str(artifact.get("artifact_id")))
    try:
        if any(str(UUID(text)) != text.lower() for text in ids):
            return None
    except ValueError:
        return None
    return target / ids[0] / f"{ids[1]}.{extension_of(str(artifact.get('content_type', '')))}"


def _export(api: ApiClient, artifact: dict[str, Any], path: Path) -> str:
    """`downloaded`, `already there`, or what went wrong."""
    if path.exists() and _sha256(path) == artifact["sha256"]:
        return "already there"
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    try:
        digest = api.download(artifact["download_path"], part).sha256
    except ScrapestreamError as exc:
        part.unlink(missing_ok=True)
        return str(exc)
    if digest != artifact["sha256"]:
        part.unlink()
        return f"checksum mismatch (got {digest[:16]}…, the job recorded {artifact['sha256'][:16]}…)"
    part.replace(path)
    return "downloaded"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as read:
        for chunk in iter(lambda: read.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def extension_of(content_type: str) -> str:
    return EXTENSIONS.get(content_type.split(";")[0].strip().lower(), "bin")


def _entry(job: dict[str, Any], artifact: dict[str, Any], path: Path) -> dict[str, Any]:
    return {
        "job_id": job["job_id"],
        "url": job["request"]["url"],
        "artifact_id": artifact["artifact_id"],
        "content_type": artifact["content_type"],
        "size_bytes": artifact["size_bytes"],
        "sha256": artifact["sha256"],
        "path": str(path),
    }
