"""A process's resident memory, as the kernel counts it."""

from __future__ import annotations

import os


def resident_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
