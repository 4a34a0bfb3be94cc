"""The number of CPUs this process may use: the default of threads and worker processes.

``os.cpu_count()`` counts the host's CPUs, and even the affinity mask ignores a CPU quota
(Kubernetes ``limits.cpu``, ``docker run --cpus``, systemd ``CPUQuota=``), which the kernel
enforces by throttling through the cgroup CPU bandwidth controller: 64 workers in a pod limited
to 2 CPUs share 2 CPUs' time and hold 64 workers' memory. Here the affinity mask is capped by the
smallest quota on the process's cgroup and its ancestors, ``ceil(quota / period)`` (at least 1):
cgroup v2 ``cpu.max`` ("QUOTA PERIOD" or "max PERIOD") or cgroup v1 ``cpu.cfs_quota_us`` /
``cpu.cfs_period_us`` (-1: none), the cgroup read from ``/proc/self/cgroup`` (the Linux kernel
documentation: "CFS Bandwidth Control" and "Control Group v2").
"""
from __future__ import annotations

import math
import os
from functools import lru_cache

#: Where the cgroup hierarchies are mounted (v2 there, v1's cpu controller in ``cpu/``).
CGROUP_ROOT = "/sys/fs/cgroup"
#: The process's cgroup in each hierarchy ("0::/path" for v2, "N:cpu,cpuacct:/path" for v1).
PROC_CGROUP = "/proc/self/cgroup"


def _fields(path: str):
    try:
        with open(path) as f:
            return f.read().split()
    except (OSError, UnicodeDecodeError):
        return None


def _membership(proc: str) -> tuple:
    """(v2 path, v1 cpu-controller path) of the process's cgroups; "/" where not listed."""
    v2 = v1 = "/"
    try:
        with open(proc) as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return v2, v1
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _up_from(base: str, path: str):
    """``base/path`` and each of its parents up to ``base``."""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    for k in range(len(parts), -1, -1):
        yield os.path.join(base, *parts[:k])


def _ratio(quota: str, period: str):
    try:
        q, p = int(quota), int(period)
    except ValueError:  # "max"
        return None
    return q / p if q > 0 and p > 0 else None


def cgroup_cpu_limit(root: str = CGROUP_ROOT, proc: str = PROC_CGROUP) -> float | None:
    """CPUs' worth of time the tightest CPU bandwidth limit on this process's cgroup or its
    ancestors allows (``quota / period``), or None without one (not Linux, no cgroup files,
    "max" or -1 everywhere)."""
    v2, v1 = _membership(proc)
    limits = []
    for d in _up_from(root, v2):
        f = _fields(os.path.join(d, "cpu.max"))
        if f is not None and len(f) == 2:
            limits.append(_ratio(*f))
    for d in _up_from(os.path.join(root, "cpu"), v1):
        q = _fields(os.path.join(d, "cpu.cfs_quota_us"))
        p = _fields(os.path.join(d, "cpu.cfs_period_us"))
        if q and p:
            limits.append(_ratio(q[0], p[0]))
    limits = [x for x in limits if x is not None]
    return min(limits) if limits else None


@lru_cache(maxsize=1)
def _process_limit() -> float | None:
    # Read once per process (tens of us): corrupt_batch asks on every call.
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
