"""`scrapestream acls`: the Kafka ACLs a principal needs for a role on this deployment, printed, or
created with `--apply`; and the worker's own missing ACLs, for `topics check`."""

from __future__ import annotations

import argparse
import json
import re
import sys

from streams.broker.acls import Acl, acls_for
from streams.broker.permissions import create_acls
from streams.errors import UsageError
from streams.runtime.topics import deployment_of
from streams.settings import Settings

PRINCIPAL = re.compile(r"User:[^\s,;]{1,256}")


async def run_acls(settings: Settings, arguments: argparse.Namespace) -> int:
    if not PRINCIPAL.fullmatch(arguments.principal):
        raise UsageError(f"--principal {arguments.principal[:80]!r} is not User:NAME")
    if arguments.role == "remote-executor" and not arguments.job_types:
        raise UsageError("--role remote-executor needs the job types it runs (--type TYPE, repeatable)")
    deployment = deployment_of(settings, arguments.job_types, arguments.group_prefix)
    needed = acls_for(arguments.role, arguments.principal, deployment)
    if arguments.apply:
        await create_acls(settings.kafka_access, needed)
    if arguments.json:
        sys.stdout.write(json.dumps([_json(acl) for acl in needed], indent=2) + "\n")
    else:
        for acl in needed:
            sys.stdout.write(("created " if arguments.apply else "") + acl.line() + "\n")
    return 0


def _json(acl: Acl) -> dict[str, str]:
    return {
        "permission": "ALLOW",
        "principal": acl.principal,
        "operation": acl.operation,
        "resource_type": acl.resource_type,
        "pattern_type": acl.pattern,
        "resource_name": acl.name,
        "host": acl.host,
    }
