"""Refuses non-public addresses (`addresses.NON_PUBLIC_*`) after DNS resolution.

The guard resolves the host itself, checks every address, and hands back the address it
checked, so the connection goes exactly where the check looked (no re-resolution).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import httpcore

from schemas.errors import ScrapestreamError
from streams.fetch.addresses import IPAddress, IPNetwork, refusal_reason


class AddressRefusedError(ScrapestreamError):
    """The target resolves to an address the deployment does not allow."""


class ResolutionError(ScrapestreamError):
    """The host name did not resolve."""


async def resolve_checked(
    host: str, port: int, allow_private: bool, allowed_networks: tuple[IPNetwork, ...] = ()
) -> str:
    """The first resolved address of `host`, if every resolved address may be contacted."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ResolutionError(f"{host} did not resolve: {exc}") from exc
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses:
        raise ResolutionError(f"{host} resolved to no address")
    if not allow_private:
        refused = [reason for address in addresses if (reason := _refused(address, allowed_networks))]
        if refused:
            raise AddressRefusedError(f"{host}: {'; '.join(refused)}")
    return str(addresses[0])


def _refused(address: IPAddress, allowed_networks: tuple[IPNetwork, ...]) -> str | None:
    if any(address.version == network.version and address in network for network in allowed_networks):
        return None
    return refusal_reason(address)


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that connects only to addresses `resolve_checked` allowed."""

    def __init__(self, allow_private: bool, allowed_networks: tuple[IPNetwork, ...] = ()) -> None:
        self._allow_private = allow_private
        self._allowed_networks = allowed_networks
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: object = None,
    ) -> httpcore.AsyncNetworkStream:
        address = await resolve_checked(host, port, self._allow_private, self._allowed_networks)
        return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)  # type: ignore[arg-type]

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: object = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefusedError("unix sockets are never fetched")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
