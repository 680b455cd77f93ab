"""Refuses private, loopback, link-local, CGNAT and metadata addresses after DNS resolution.

The guard resolves the host itself, checks every address, and hands back the address it
checked, so the connection goes exactly where the check looked (no re-resolution).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import httpcore

from schemas.errors import ScrapestreamError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressRefusedError(ScrapestreamError):
    """The target resolves to an address the deployment does not allow."""


class ResolutionError(ScrapestreamError):
    """The host name did not resolve."""


def is_public(address: IPAddress) -> bool:
    """True only for globally routable unicast addresses (IPv4-mapped, 6to4, Teredo unwrapped)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None:
            return is_public(embedded)
    return address.is_global and not address.is_multicast


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
    refused = [
        str(address)
        for address in addresses
        if not is_public(address) and not any(address in network for network in allowed_networks)
    ]
    if refused and not allow_private:
        raise AddressRefusedError(f"{host} resolves to {', '.join(refused)}")
    return str(addresses[0])


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
