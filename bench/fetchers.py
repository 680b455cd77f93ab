"""CPU per request of the fetch clients the executor could use, on the same guarded connection.

    .venv/bin/python -m bench.fetchers --requests 5000

Fetches a 2 KiB loopback page (the origin runs in its own process) `--requests` times at
`--concurrency`, through: scrapestream's fetcher (aiohttp over the guarded session); httpx with
the `httpx-aiohttp` transport over that same guarded session; and httpx's default transport.
Prints one JSON line per client: requests/s and this process's CPU microseconds per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable

import httpx
from httpx_aiohttp import AiohttpTransport

from bench.processes import own_cpu_seconds, start_origin
from schemas.records import Request
from streams.broker.embedded import free_loopback_port
from streams.cli.kafka import run
from streams.fetch.guard import AddressPolicy, guarded_session
from streams.fetch.http import FetchLimits, HttpFetcher

Fetch = Callable[[str], Awaitable[int]]
LIMITS = FetchLimits(max_body_bytes=10_000_000, max_decoded_bytes=50_000_000, max_redirects=5)


async def measure(name: str, fetch: Fetch, url: str, requests: int, concurrency: int) -> dict[str, object]:
    await asyncio.gather(*(fetch(url) for _ in range(concurrency)))  # connections opened
    remaining = iter(range(requests))

    async def client() -> None:
        for _ in remaining:
            if await fetch(url) != 200:
                raise RuntimeError(f"{name}: the origin did not answer 200")

    cpu, started = own_cpu_seconds(), time.monotonic()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed, used = time.monotonic() - started, own_cpu_seconds() - cpu
    return {
        "client": name,
        "requests_per_s": round(requests / elapsed),
        "cpu_us_per_request": round(used * 1_000_000 / requests),
    }


async def main(requests: int, concurrency: int) -> list[dict[str, object]]:
    port = free_loopback_port()
    origin = await start_origin(port)
    url = f"http://127.0.0.1:{port}/page"
    results = []
    try:
        fetcher = HttpFetcher(LIMITS, allow_private=True)

        async def with_fetcher(target: str) -> int:
            result = await fetcher.fetch(Request(url=target), 30.0)
            return result.http_status or 0

        results.append(
            await measure("scrapestream aiohttp fetcher", with_fetcher, url, requests, concurrency)
        )
        await fetcher.close()

        session = guarded_session(AddressPolicy(allow_private=True), connections=100)
        async with httpx.AsyncClient(transport=AiohttpTransport(client=session)) as over_aiohttp:
            results.append(
                await measure("httpx + httpx-aiohttp", _httpx(over_aiohttp), url, requests, concurrency)
            )
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=100)) as default:
            results.append(
                await measure("httpx default transport", _httpx(default), url, requests, concurrency)
            )
    finally:
        await origin.stop()
    return results


def _httpx(client: httpx.AsyncClient) -> Fetch:
    async def fetch(target: str) -> int:
        response = await client.get(target)
        return response.status_code

    return fetch


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    arguments = parser.parse_args()
    for line in run(main(arguments.requests, arguments.concurrency)):  # on uvloop, as the worker
        sys.stdout.write(json.dumps(line) + "\n")
