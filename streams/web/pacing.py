"""Replays to one receiver, paced across every call a worker serves and every name of its addresses."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time

RESOLVE_TIMEOUT_S = 5.0


class ReceiverPacer:
    """When each receiving host may next be sent a replay, shared by every replay call of a worker."""

    def __init__(self) -> None:
        self._next_at: dict[str, float] = {}

    async def turn(self, host: str, interval_s: float) -> None:
        """Waits for `host`'s next turn, taking it (turns are handed out before anyone sleeps). A
        receiver is each address the host resolves to: `localhost` and `127.0.0.1` share turns."""
        keys = await receivers_of(host)
        now = time.monotonic()
        self._next_at = {key: at for key, at in self._next_at.items() if at > now}
        at = max([now, *(self._next_at.get(key, now) for key in keys)])
        for key in keys:
            self._next_at[key] = at + interval_s
        if at > now:
            await asyncio.sleep(at - now)


async def receivers_of(host: str) -> set[str]:
    """The addresses `host` resolves to (canonical), with its own spelling when it resolves to none."""
    name = receiver_of(host)
    try:
        async with asyncio.timeout(RESOLVE_TIMEOUT_S):
            found = await asyncio.get_running_loop().getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, TimeoutError, UnicodeError):
        return {name}
    return {name} | {receiver_of(str(info[4][0])) for info in found}


def receiver_of(host: str) -> str:
    """One spelling of a receiving host: lower case, no trailing dot, A-labels, and an address in
    its canonical form (`127.1`, `0x7f.0.0.1` and `127.0.0.1` are one receiver)."""
    name = host.strip().strip("[]").rstrip(".").lower()
    with contextlib.suppress(UnicodeError):
        name = name.encode("idna").decode("ascii")
    with contextlib.suppress(ValueError):
        address = ipaddress.ip_address(name)
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        return (mapped or address).compressed
    if name and all(part.isalnum() for part in name.split(".")) and name[-1:].isdigit():
        with contextlib.suppress(OSError):
            return socket.inet_ntoa(socket.inet_aton(name))  # the legacy forms resolvers still accept
    return name
