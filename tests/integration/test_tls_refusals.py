"""TLS servers on loopback whose certificates scrapestream must not trust, and one it must: a Kafka
client reaching a host its broker's certificate does not name ends naming the hostname setting, and
an `https://` schema registry is trusted through `SCRAPESTREAM_SCHEMA_REGISTRY_CA_FILE` alone."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from bench.certificates import LOOPBACK, CertificateAuthority
from streams.broker.access import KafkaAccess, KafkaAccessError
from streams.broker.refusals import admitted
from streams.errors import RegistryUnavailableError
from streams.runtime.schema_registry import SchemaRegistry

pytestmark = pytest.mark.asyncio(loop_scope="function")


def serving(authority: CertificateAuthority, *names: str) -> ssl.SSLContext:
    issued = authority.issue("server", names=names)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(issued.certificate, issued.key)
    return context


@contextlib.asynccontextmanager
async def tls_listener(context: ssl.SSLContext) -> AsyncIterator[int]:
    """A TLS server that answers nothing (a client's handshake is all that is tried)."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await reader.read(1)
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_a_broker_certificate_for_another_host_is_refused_naming_the_hostname_setting(tmp_path: Path):
    authority = CertificateAuthority(tmp_path)
    async with tls_listener(serving(authority, "kafka.elsewhere.example")) as port:
        access = KafkaAccess(f"127.0.0.1:{port}", "SSL", ssl_ca_file=authority.ca_file)
        with pytest.raises(KafkaAccessError, match="SCRAPESTREAM_KAFKA_SSL_CHECK_HOSTNAME"):
            await admitted(access)


async def test_an_https_registry_is_trusted_through_its_ca_file_alone(tmp_path: Path):
    authority = CertificateAuthority(tmp_path)

    async def compatibility(request: web.Request) -> web.Response:
        return web.json_response({"compatibility": "BACKWARD"})

    app = web.Application()
    app.router.add_put("/config/{subject}", compatibility)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving(authority, *LOOPBACK))
    await site.start()
    port = runner.addresses[0][1]
    try:
        trusting = SchemaRegistry(f"https://127.0.0.1:{port}", ca_file=authority.ca_file)
        await trusting.set_compatibility("subject", "BACKWARD")
        await trusting.close()
        untrusting = SchemaRegistry(f"https://127.0.0.1:{port}")
        with pytest.raises(RegistryUnavailableError, match="CERTIFICATE_VERIFY_FAILED"):
            await untrusting.set_compatibility("subject", "BACKWARD")
        await untrusting.close()
    finally:
        await runner.cleanup()
