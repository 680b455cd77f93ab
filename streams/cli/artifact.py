"""`scrapestream artifact ID`: one artifact's bytes, downloaded and checked against the SHA-256 the API
states for them, or not kept."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from uuid import UUID

from schemas.errors import ScrapestreamError
from streams.cli.api_client import ApiClient
from streams.cli.export import extension_of
from streams.errors import UsageError


def run_artifact(api: ApiClient, arguments: argparse.Namespace) -> int:
    try:
        artifact_id = UUID(arguments.artifact_id.strip().removeprefix("/artifacts/"))
    except ValueError:
        raise UsageError(
            f"{arguments.artifact_id!r} is no artifact id (`get --json` shows them whole)"
        ) from None
    given = None if arguments.output is None else Path(arguments.output)
    part = Path(f"{given or artifact_id}.part")
    try:
        got = api.download(f"/artifacts/{artifact_id}", part)
        if got.stated_sha256 is None or got.sha256 != got.stated_sha256:
            raise ScrapestreamError(
                f"artifact {artifact_id}: the bytes received (sha256 {got.sha256}) are not those stored "
                f"(sha256 {got.stated_sha256 or 'not stated'}): nothing kept"
            )
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    target = given or Path(f"{artifact_id}.{extension_of(got.content_type)}")
    part.replace(target)
    sys.stdout.write(f"{target}: {target.stat().st_size} bytes, sha256 {got.sha256} (checked)\n")
    return 0
