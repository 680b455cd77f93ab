"""A schema registry that speaks Confluent's REST API, when `SCRAPESTREAM_SCHEMA_REGISTRY_URL` names one.

At start the worker registers each public topic's schemas under its subjects with the topic's
compatibility rule (`schemas/contract.py`); a change the rule refuses stops the start. Records on
the topics others consume are then written in the Confluent framing (the same Avro body behind
`00` and the registry's id), and a Confluent-framed record read anywhere is decoded once its
writer schema is fetched by id. A registry that does not answer holds the reader back: it is
never the record's fault.
"""

from __future__ import annotations

import json
import logging
import ssl
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from projections.lifecycle.identity import shown_url
from schemas.codec import as_confluent, known_registry_id, learn_registry_schema, registry_id
from schemas.contract import PUBLIC_TOPICS
from schemas.errors import UnknownSchemaError
from schemas.registry import current_schemas
from streams.errors import RegistryUnavailableError, UsageError
from streams.runtime.publisher import Outgoing
from streams.settings import Settings

log = logging.getLogger(__name__)
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
UNKNOWN_IDS_KEPT = 4096


class SchemaRegistryError(UsageError):
    """The registry refused the contract (an incompatible change) or is not a registry at all."""


def _trusting(ca_file: Path) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"SCRAPESTREAM_SCHEMA_REGISTRY_CA_FILE: cannot read {ca_file}: {exc}") from None


class SchemaRegistry:
    def __init__(
        self,
        url: str,
        basic_auth: str | None = None,
        timeout_s: float = 10.0,
        ca_file: Path | None = None,
        counters: Counter[str] | None = None,
    ) -> None:
        auth = None
        if basic_auth is not None:
            user, _, password = basic_auth.partition(":")
            auth = httpx.BasicAuth(user, password)
        self.url = url.rstrip("/")
        self.shown = shown_url(self.url)  # what messages and logs name: never a password in the URL
        self._http = httpx.AsyncClient(
            base_url=self.url,
            auth=auth,
            timeout=timeout_s,
            headers={"Accept": CONTENT_TYPE},
            verify=_trusting(ca_file) if ca_file is not None else True,
        )
        self._missing: OrderedDict[int, None] = OrderedDict()  # ids the registry said it does not have
        self.counters = Counter[str]() if counters is None else counters

    @classmethod
    def of(cls, settings: Settings, counters: Counter[str] | None = None) -> SchemaRegistry | None:
        if settings.schema_registry_url is None:
            return None
        secret = settings.schema_registry_basic_auth
        return cls(
            settings.schema_registry_url,
            None if secret is None else secret.get_secret_value(),
            settings.schema_registry_timeout_s,
            settings.schema_registry_ca_file,
            counters,
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, body: object | None = None) -> httpx.Response:
        try:
            return await self._http.request(
                method, path, json=body, headers={"Content-Type": CONTENT_TYPE} if body is not None else None
            )
        except httpx.HTTPError as exc:
            raise RegistryUnavailableError(f"schema registry at {self.shown}: {exc!r}") from exc

    async def set_compatibility(self, subject: str, level: str) -> None:
        answer = await self._call("PUT", f"/config/{subject}", {"compatibility": level})
        if answer.status_code >= 300:
            raise SchemaRegistryError(
                f"schema registry at {self.shown} refused compatibility {level} for {subject}: "
                f"{answer.status_code} {answer.text[:300]}"
            )

    async def register(self, subject: str, schema: str) -> int:
        """The id of `schema` under `subject`, registered if new (the subject's rule permitting)."""
        answer = await self._call("POST", f"/subjects/{subject}/versions", {"schema": schema})
        if answer.status_code == 409:
            raise SchemaRegistryError(
                f"{subject}: this version's schema breaks the subject's compatibility rule, so the worker "
                f"does not start (docs/CONTRACT.md, upgrades): {answer.text[:500]}"
            )
        if answer.status_code >= 300:
            raise SchemaRegistryError(
                f"schema registry at {self.shown} refused {subject}: {answer.status_code} {answer.text[:300]}"
            )
        return int(answer.json()["id"])

    async def learn(self, values: Iterable[bytes | None]) -> None:
        """Fetch the writer schema of each Confluent-framed value whose registry id is not known yet."""
        wanted = {schema_id for value in values if value and (schema_id := registry_id(value)) is not None}
        for schema_id in sorted(wanted):
            if known_registry_id(schema_id) or schema_id in self._missing:
                continue
            answer = await self._call("GET", f"/schemas/ids/{schema_id}")
            if answer.status_code == 404:
                self.counters["registry.missing"] += 1
                self._forget(schema_id)
                continue
            if answer.status_code >= 300:
                raise RegistryUnavailableError(
                    f"schema registry at {self.shown}: {answer.status_code} for id {schema_id}"
                )
            try:
                learn_registry_schema(schema_id, str(answer.json()["schema"]))
                self.counters["registry.found"] += 1
            except (UnknownSchemaError, ValueError, KeyError) as exc:
                self.counters["registry.refused"] += 1
                log.warning("registry schema %d is not one scrapestream reads: %s", schema_id, exc)
                self._forget(schema_id)

    def _forget(self, schema_id: int) -> None:
        self._missing[schema_id] = None
        if len(self._missing) > UNKNOWN_IDS_KEPT:
            self._missing.popitem(last=False)


@dataclass(frozen=True)
class Reframing:
    """Writes records on the topics others consume in the Confluent framing, by their registry ids."""

    topics: frozenset[str]
    ids: dict[bytes, int]  # single-object fingerprint -> registry id

    def applied(self, messages: Sequence[Outgoing]) -> Sequence[Outgoing]:
        if not any(message.topic in self.topics for message in messages):
            return messages
        return [self._framed(message) for message in messages]

    def _framed(self, message: Outgoing) -> Outgoing:
        if message.topic not in self.topics or message.tombstone:
            return message
        schema_id = self.ids.get(message.value[2:10])
        if schema_id is None:
            return message  # a record no subject holds: left single-object encoded
        return replace(message, value=as_confluent(message.value, schema_id))


async def register_contract(settings: Settings, registry: SchemaRegistry) -> Reframing:
    """Register every public topic's schemas under its subjects with its rule; returns the framing
    of the topics workers write."""
    try:
        return await _registered(settings, registry)
    except RegistryUnavailableError as exc:
        raise SchemaRegistryError(f"{exc}: the worker does not start without its registry") from exc


async def _registered(settings: Settings, registry: SchemaRegistry) -> Reframing:
    schemas = current_schemas()
    framed: set[str] = set()
    ids: dict[bytes, int] = {}
    for contract in PUBLIC_TOPICS:
        topic = settings.topic(contract.topic)
        for subject, record in contract.subjects(topic):
            await registry.set_compatibility(subject, contract.compatibility)
            text = json.dumps(schemas[record].standalone)
            schema_id = await registry.register(subject, text)
            learn_registry_schema(schema_id, text)
            if contract.written_by_workers:
                framed.add(topic)
                ids[schemas[record].fingerprint] = schema_id
    log.info(
        "schema registry %s: %d subjects registered",
        registry.shown,
        sum(len(c.records) + 1 for c in PUBLIC_TOPICS),
    )
    return Reframing(frozenset(framed), ids)
