"""How many processes `auto` means: the cores this process may run on, capped by its cgroup's CPU quota."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Literal

CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1 = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))


def process_count(setting: int | Literal["auto"]) -> int:
    if setting != "auto":
        return setting
    cores = len(os.sched_getaffinity(0))
    quota = cgroup_cores()
    return max(1, cores if quota is None else min(cores, quota))


def cgroup_cores() -> int | None:
    """The CPU quota as whole cores (rounded up), or None without one."""
    try:
        if CGROUP_V2.exists():
            return quota_cores(*CGROUP_V2.read_text().split()[:2])
        quota, period = (path.read_text().strip() for path in CGROUP_V1)
    except (OSError, ValueError, TypeError):
        return None
    return quota_cores(quota, period)


def quota_cores(quota: str, period: str) -> int | None:
    """`max` or a negative quota is none; otherwise quota/period cores, at least one."""
    if quota == "max" or not quota.lstrip("-").isdigit() or not period.isdigit() or int(quota) <= 0:
        return None
    return max(1, math.ceil(int(quota) / max(1, int(period))))
