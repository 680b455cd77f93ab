"""One way for the secured-cluster tests to act as a principal: its settings, its environment for a
`scrapestream` process, its access for an in-process client, and an administrator's commands."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.kafka import KafkaCluster
from bench.secured import ADMIN, Secured
from streams.broker.access import KafkaAccess
from tests.commands import run


@dataclass(frozen=True)
class Deployment:
    """A topic prefix on the secured cluster, with its topics made by the administrator."""

    cluster: KafkaCluster
    prefix: str

    @property
    def secured(self) -> Secured:
        assert self.cluster.secured is not None
        return self.cluster.secured

    def settings(self, user: str, **more: Any) -> dict[str, Any]:
        """`load_settings` keywords of `user`'s login to this deployment."""
        return {
            "kafka_bootstrap": self.cluster.bootstrap,
            "broker_profile": "kafka",
            "topic_prefix": self.prefix,
            "group_id": self.prefix,
            "partitions": 2,
            **self.secured.settings(user),
            **more,
        }

    def as_user(self, user: str, **more: Any) -> dict[str, str]:
        """`user`'s settings as `tests.commands` takes them for a `scrapestream` process."""
        return {name: str(value) for name, value in self.settings(user, **more).items()}

    def access(self, user: str, password: str | None = None) -> KafkaAccess:
        return self.secured.access(self.cluster.bootstrap, user, password)

    async def grant(self, role: str, user: str, *more: str) -> None:
        """`scrapestream acls --apply` of `role` for `user`, run by the administrator."""
        arguments = ("acls", "--role", role, "--principal", f"User:{user}", "--apply", *more)
        code, said = await run(*arguments, cwd=Path.cwd(), **self.as_user(ADMIN))
        assert code == 0, said


async def made(cluster: KafkaCluster, prefix: str, *job_types: str) -> Deployment:
    """The deployment's topics (and `job_types`' due topics), created by the administrator with
    `scrapestream topics create`."""
    deployment = Deployment(cluster, prefix)
    types = [argument for job_type in job_types for argument in ("--type", job_type)]
    code, said = await run("topics", "create", *types, cwd=Path.cwd(), **deployment.as_user(ADMIN))
    assert code == 0, said
    return deployment
