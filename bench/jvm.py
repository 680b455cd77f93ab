"""Java programs from Maven Central for the suite and the benchmarks: fetched by Maven into the user's
cache once, and a service among them run as one JVM on loopback, stopped even when a test fails."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from streams.broker.embedded import die_with_parent

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scrapestream"
READY_TIMEOUT_S = 180
STOP_TIMEOUT_S = 15
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")  # small and quick to start


def fetched(name: str, pom: Path, goal: str, marker: str) -> Path:
    """`CACHE/name`, holding `marker` once Maven ran `goal` (a `dependency:` goal) on `pom` into it."""
    target = CACHE / name
    if (target / marker).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be fetching it
        if not (target / marker).exists():
            _fetch(name, pom, goal, marker, target)
    return target


def _fetch(name: str, pom: Path, goal: str, marker: str, target: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"{name} is not in {CACHE} and Maven (`mvn`) is not installed to fetch it")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    overwrite = "-Dmdep.overWriteReleases=true"  # `unpack` skips what its markers say it unpacked before
    command = [mvn, "-q", "-B", "-f", str(pom), goal, overwrite, f"-DoutputDirectory={partial}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0 or not (partial / marker).exists():
        raise RuntimeError(f"fetching {name} with Maven failed:\n{done.stdout[-2000:]}")
    shutil.rmtree(target, ignore_errors=True)  # a copy fetched from an older descriptor
    partial.rename(target)


def killed_with_parent() -> None:
    """Set in a JVM's child process: a JVM of the suite ends with the process that started it, at once
    (SIGTERM would start a controlled shutdown, which a broker whose peers are gone never finishes)."""
    die_with_parent(signal.SIGKILL)


@contextlib.contextmanager
def running_service(
    what: str, home: Path, arguments: Sequence[str], ready_url: str, log_path: Path
) -> Iterator[None]:
    """`java <arguments>` in `home`, once `ready_url` answers 200, for as long as the context lasts."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(  # noqa: S603
            ["java", *JVM_OPTIONS, *arguments],  # noqa: S607
            cwd=home,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
            preexec_fn=killed_with_parent,
        )
    try:
        _wait_ready(what, process, ready_url, log_path)
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(what: str, process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    give_up = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < give_up:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited ({process.returncode}):\n{log_path.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"{what} did not answer in {READY_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}")
