"""Refuses non-public addresses (`addresses.NON_PUBLIC_*`) after DNS resolution, inside aiohttp.

The resolver resolves the host itself, checks every address, and hands aiohttp only the
addresses it checked, so the connection goes exactly where the check looked; the connector
checks hosts that are IP literals (aiohttp does not resolve those).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from schemas.errors import ScrapestreamError
from streams.fetch.addresses import IPAddress, IPNetwork, refusal_reason


class AddressRefusedError(ScrapestreamError):
    """The target resolves to an address the deployment does not allow."""


class ResolutionError(ScrapestreamError):
    """The host name did not resolve."""


class AddressPolicy:
    """Which addresses this deployment may contact."""

    def __init__(self, allow_private: bool, allowed_networks: tuple[IPNetwork, ...] = ()) -> None:
        self.allow_private = allow_private
        self.allowed_networks = allowed_networks

    def check(self, host: str, addresses: list[IPAddress]) -> None:
        if self.allow_private:
            return
        refused = [reason for address in addresses if (reason := self._refused(address))]
        if refused:
            raise AddressRefusedError(f"{host}: {'; '.join(refused)}")

    def _refused(self, address: IPAddress) -> str | None:
        for network in self.allowed_networks:
            if address.version == network.version and address in network:
                return None
        return refusal_reason(address)


async def resolve_checked(
    host: str, port: int, allow_private: bool, allowed_networks: tuple[IPNetwork, ...] = ()
) -> str:
    """The first resolved address of `host`, if every resolved address may be contacted."""
    addresses = await _resolve(host, port, socket.AF_UNSPEC)
    AddressPolicy(allow_private, allowed_networks).check(host, [address for address, _ in addresses])
    return str(addresses[0][0])


async def _resolve(host: str, port: int, family: int) -> list[tuple[IPAddress, int]]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ResolutionError(f"{host} did not resolve: {exc}") from exc
    addresses: list[tuple[IPAddress, int]] = [
        (ipaddress.ip_address(str(info[4][0]).split("%")[0]), int(info[0])) for info in infos
    ]
    if not addresses:
        raise ResolutionError(f"{host} resolved to no address")
    return addresses


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver: every address of the host is checked, and only checked ones are used."""

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = await _resolve(host, port, family)
        self._policy.check(host, [address for address, _ in addresses])
        return [
            ResolveResult(
                hostname=host, host=str(address), port=port, family=kind, proto=0, flags=socket.AI_NUMERICHOST
            )
            for address, kind in addresses
        ]

    async def close(self) -> None:
        return


class GuardedConnector(aiohttp.TCPConnector):
    """A TCP connector that also checks hosts written as IP literals, which skip the resolver."""

    def __init__(self, policy: AddressPolicy, **options: Any) -> None:
        super().__init__(resolver=GuardedResolver(policy), **options)
        self._policy = policy

    async def _resolve_host(self, host: str, port: int, traces: Any = None) -> list[ResolveResult]:
        try:
            literal = ipaddress.ip_address(host.strip("[]").split("%")[0])
        except ValueError:
            literal = None
        if literal is not None:
            self._policy.check(host, [literal])
        return await super()._resolve_host(host, port, traces)


def guarded_session(policy: AddressPolicy, connections: int, per_host: int = 0) -> aiohttp.ClientSession:
    """An aiohttp session for untrusted targets: guarded addresses, no cookies kept, raw bodies.

    Callers must bound every request in time themselves.
    """
    connector = GuardedConnector(
        policy,
        limit=connections,
        limit_per_host=per_host,
        ssl=ssl.create_default_context(),
        keepalive_timeout=5.0,
        ttl_dns_cache=10,
    )
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        skip_auto_headers=("User-Agent",),
        # Callers bound each exchange as a whole (`asyncio.timeout`); per-request timers only cost.
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=None),
    )
