"""Read throughput of one worker's HTTP API, beside the same web stack serving a constant.

    .venv/bin/python -m bench.read --seconds 10

Starts the embedded broker, a loopback origin and one `scrapestream worker` with auth on,
completes `--jobs` jobs, then loads `GET /jobs/{id}` (a random job per request, with a bearer
token) and, in a separate process, the same stack (uvicorn+httptools on uvloop) answering a
constant body of the same size: from a bare ASGI callable (the stack's ceiling), and from a
FastAPI route. The load comes from `wrk` when it is installed (else a Python loader, which is
slower and says so), on the same machine. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import aiohttp

from bench.processes import Child, start_origin, start_server, start_worker, worker_environment
from schemas.commands import SubmitJob
from schemas.enums import ActorRole
from schemas.records import Request
from streams.auth.issue import issue
from streams.auth.signing import private_key_from_text
from streams.broker.access import plaintext
from streams.broker.compat import EMBEDDED_TANSU
from streams.broker.embedded import EmbeddedBroker, free_loopback_port
from streams.client import Client, Signer
from streams.clock import utc_now

CONSTANT = """
import asyncio, sys
import uvloop
from fastapi import FastAPI, Response
from streams.web.server import ApiServer
body = b"x" * int(sys.argv[2])
app = FastAPI()
@app.get("/routed")
async def routed() -> Response:
    return Response(body, media_type="application/json")
async def raw(scope, receive, send):
    if scope["type"] != "http" or scope["path"] != "/raw":
        return await app(scope, receive, send)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
async def main() -> None:
    server = ApiServer("127.0.0.1", int(sys.argv[1]))
    await server.serve(raw)
    await asyncio.Event().wait()
uvloop.run(main())  # as `scrapestream worker` runs
"""
CONNECTIONS = 32


async def main(seconds: float, jobs: int) -> dict[str, object]:
    admin, service = issue("bench-admin", ActorRole.ADMIN), issue("bench-svc", ActorRole.SERVICE)
    principals = json.dumps({"principals": [admin.entry, service.entry]})
    origin_port, web_port, constant_port = (free_loopback_port() for _ in range(3))
    scratch = Path(tempfile.mkdtemp(prefix="scrapestream-read-"))
    children: list[Child] = [await start_origin(origin_port)]
    try:
        async with EmbeddedBroker() as broker:
            environment = worker_environment(
                broker.bootstrap,
                scratch / "data",
                web_port=web_port,
                auth_enabled="true",
                principals=principals,
            )
            children.append(await start_worker(environment, scratch / "worker.log"))
            signer = Signer("bench-svc", private_key_from_text(service.signing_key))
            ids = await _complete(broker.bootstrap, signer, origin_port, jobs)
            base = f"http://127.0.0.1:{web_port}"
            size = await _view_size(base, ids[0], admin.token)
            children.append(
                await start_server("constant server", constant_port, CONSTANT, str(constant_port), str(size))
            )
            reads = await _load(base, [f"/jobs/{job}" for job in ids], admin.token, seconds)
            constant = f"http://127.0.0.1:{constant_port}"
            raw = await _load(constant, ["/raw"], None, seconds)
            routed = await _load(constant, ["/routed"], None, seconds)
    finally:
        for child in children:
            await child.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "bench": "read",
        "loader": "wrk" if shutil.which("wrk") else "python (slower than wrk: figures are a floor)",
        "connections": CONNECTIONS,
        "seconds": seconds,
        "jobs": jobs,
        "view_bytes": size,
        "job_reads_per_s": reads,
        "constant_raw_asgi_per_s": raw,
        "constant_fastapi_route_per_s": routed,
        "share_of_raw_constant": round(reads / raw, 3) if raw else None,
    }


async def _complete(bootstrap: str, signer: Signer, origin_port: int, jobs: int) -> list[str]:
    deadline = utc_now() + timedelta(hours=1)
    async with Client(plaintext(bootstrap), EMBEDDED_TANSU, signer=signer) as client:
        ids = [
            await client.submit(
                SubmitJob(
                    caller_identity="bench-svc",
                    request=Request(url=f"http://127.0.0.1:{origin_port}/read/{n}"),
                    deadline_at=deadline,
                )
            )
            for n in range(jobs)
        ]
        for job_id in ids:
            await asyncio.wait_for(client.wait_for(job_id), 120)
    return [str(job_id) for job_id in ids]


async def _view_size(base: str, job_id: str, token: str) -> int:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        for _ in range(100):
            async with http.get(f"{base}/jobs/{job_id}") as answer:
                if answer.status == 200:
                    return len(await answer.read())
            await asyncio.sleep(0.1)
    raise RuntimeError(f"GET /jobs/{job_id} did not answer 200")


async def _load(base: str, paths: list[str], token: str | None, seconds: float) -> float:
    if shutil.which("wrk"):
        return await _wrk(base, paths, token, seconds)
    return await _python_load(base, paths, token, seconds)


async def _wrk(base: str, paths: list[str], token: str | None, seconds: float) -> float:
    script = Path(tempfile.mkstemp(suffix=".lua")[1])
    listed = ",".join(json.dumps(path) for path in paths)
    script.write_text(  # noqa: ASYNC240
        f"paths = {{{listed}}}\n"
        "request = function() return wrk.format('GET', paths[math.random(#paths)]) end\n"
    )
    header = ["-H", f"Authorization: Bearer {token}"] if token else []
    try:
        process = await asyncio.create_subprocess_exec(
            "wrk",
            "-t1",
            f"-c{CONNECTIONS}",
            f"-d{int(seconds)}s",
            "-s",
            str(script),
            *header,
            base,
            stdout=asyncio.subprocess.PIPE,
        )
        output = (await process.communicate())[0].decode()
    finally:
        script.unlink()  # noqa: ASYNC240
    if re.search(r"Non-2xx or 3xx responses: (\d+)", output):
        raise RuntimeError(f"some reads failed:\n{output}")
    found = re.search(r"Requests/sec:\s+([\d.]+)", output)
    if found is None:
        raise RuntimeError(f"wrk printed no rate:\n{output}")
    return float(found.group(1))


async def _python_load(base: str, paths: list[str], token: str | None, seconds: float) -> float:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    done = 0
    stop_at = time.monotonic() + seconds

    async def loop(http: aiohttp.ClientSession) -> None:
        nonlocal done
        while time.monotonic() < stop_at:
            async with http.get(base + random.choice(paths)) as answer:
                await answer.read()
                if answer.status != 200:
                    raise RuntimeError(f"a read answered {answer.status}")
            done += 1

    async with aiohttp.ClientSession(headers=headers) as http:
        await asyncio.gather(*(loop(http) for _ in range(CONNECTIONS)))
    return round(done / seconds, 1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=200)
    arguments = parser.parse_args()
    print(json.dumps(asyncio.run(main(arguments.seconds, arguments.jobs))))
