"""The number of CPUs this process may use: the default of threads and worker processes.

``os.cpu_count()`` counts the host's CPUs, and even the affinity mask ignores a container's CPU
quota (Kubernetes ``limits.cpu``, ``docker run --cpus``), which the kernel enforces by throttling
through the cgroup's CPU bandwidth controller: 64 workers in a pod limited to 2 CPUs share 2
CPUs' time and hold 64 workers' memory. Here the affinity mask is capped by that quota,
``ceil(quota / period)`` (at least 1), read from cgroup v2 ``cpu.max`` or cgroup v1
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (the Linux kernel's "CFS Bandwidth Control" and
cgroup v2 documentation).
"""
from __future__ import annotations

import math
import os
from functools import lru_cache

#: cgroup v2: "max PERIOD" (no limit) or "QUOTA PERIOD", microseconds.
CGROUP_V2_CPU_MAX = "/sys/fs/cgroup/cpu.max"
#: cgroup v1: quota (-1: no limit) and period, microseconds.
CGROUP_V1_CPU = ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def _fields(path: str):
    try:
        with open(path) as f:
            return f.read().split()
    except (OSError, UnicodeDecodeError):
        return None


def cgroup_cpu_limit(v2: str = CGROUP_V2_CPU_MAX, v1=CGROUP_V1_CPU) -> float | None:
    """CPUs' worth of time the cgroup's bandwidth limit allows (``quota / period``), or None
    when there is no limit or it cannot be read (not Linux, no cgroup files, "max", -1)."""
    fields = _fields(v2)
    if fields is not None and len(fields) == 2:
        quota, period = fields
    else:
        q, p = _fields(v1[0]), _fields(v1[1])
        if not q or not p:
            return None
        quota, period = q[0], p[0]
    try:
        quota, period = int(quota), int(period)
    except ValueError:  # "max"
        return None
    if quota <= 0 or period <= 0:
        return None
    return quota / period


@lru_cache(maxsize=1)
def _process_limit() -> float | None:
    # Read once per process (about 30 us): corrupt_batch asks on every call.
    return cgroup_cpu_limit()


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, else ``os.cpu_count()``), capped by
    ``ceil`` of :func:`cgroup_cpu_limit` (read once per process); at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    limit = _process_limit()
    if limit is not None:
        n = min(n, math.ceil(limit))
    return max(1, n)
