"""Default thread and worker counts: the affinity mask capped by a cgroup CPU quota."""
import os

import pytest

from medmnistc_fast import _cpus, api, generate


def _tree(tmp_path, files: dict, membership: str | None):
    """A fake /sys/fs/cgroup (files: relative path -> text) and /proc/self/cgroup."""
    root = tmp_path / "cgroup"
    root.mkdir()
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    proc = tmp_path / "proc_cgroup"
    if membership is not None:
        proc.write_text(membership)
    return str(root), str(proc)


@pytest.mark.parametrize("files, membership, want", [
    ({"cpu.max": "200000 100000\n"}, "0::/\n", 2.0),                  # docker --cpus 2 (v2)
    ({"cpu.max": "max 100000\n"}, "0::/\n", None),                    # no limit
    ({"cpu.max": "max 100000\n", "a/cpu.max": "300000 100000\n",      # systemd CPUQuota=300%
      "a/b/cpu.max": "max 100000\n"}, "0::/a/b\n", 3.0),              # on a parent cgroup
    ({"cpu.max": "150000 100000\n", "a/cpu.max": "400000 100000\n"},  # the tightest wins
     "0::/a\n", 1.5),
    ({"cpu/cpu.cfs_quota_us": "250000", "cpu/cpu.cfs_period_us": "100000"},  # v1 at the root
     "4:memory:/x\n1:cpu,cpuacct:/\n0::/\n", 2.5),
    ({"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000",       # v1, nested
      "cpu/job/cpu.cfs_quota_us": "50000", "cpu/job/cpu.cfs_period_us": "100000"},
     "1:cpu:/job\n", 0.5),
    ({"cpu.max": "200000 100000\n"}, None, 2.0),                      # no /proc: the root only
    ({}, "0::/\n", None),                                             # no cgroup files
    ({"cpu.max": "garbage\n"}, "garbage\n", None),
])
def test_cgroup_cpu_limit(tmp_path, files, membership, want):
    assert _cpus.cgroup_cpu_limit(*_tree(tmp_path, files, membership)) == want


@pytest.mark.parametrize("limit, want", [(None, None), (1.5, 2), (0.2, 1), (1e6, None)])
def test_available_cpus_capped_by_the_quota(monkeypatch, limit, want):
    affinity = len(os.sched_getaffinity(0))
    monkeypatch.setattr(_cpus, "_process_limit", lambda: limit)
    expected = affinity if want is None else min(affinity, want)
    assert _cpus.available_cpus() == expected
    # The defaults of corrupt_batch's threads and generate's workers follow it.
    monkeypatch.delenv("MEDMNISTC_FAST_NUM_THREADS", raising=False)
    api.set_num_threads(None)
    assert api.get_num_threads() == expected
    assert generate._default_workers() == expected
