"""Default thread and worker counts: the affinity mask capped by a cgroup CPU quota."""
import os

import pytest

from medmnistc_fast import _cpus, api, generate


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("v2, v1, want", [
    ("200000 100000\n", None, 2.0),          # docker --cpus 2 (cgroup v2)
    ("150000 100000\n", None, 1.5),
    ("max 100000\n", None, None),            # no limit
    (None, ("250000", "100000"), 2.5),       # cgroup v1
    (None, ("-1", "100000"), None),          # v1, no limit
    (None, None, None),                      # no cgroup files (not Linux, or not mounted)
    ("garbage\n", None, None),
])
def test_cgroup_cpu_limit(tmp_path, v2, v1, want):
    v2_path = _write(tmp_path, "cpu.max", v2) if v2 is not None else str(tmp_path / "none")
    if v1 is not None:
        v1_paths = (_write(tmp_path, "q", v1[0]), _write(tmp_path, "p", v1[1]))
    else:
        v1_paths = (str(tmp_path / "nq"), str(tmp_path / "np"))
    assert _cpus.cgroup_cpu_limit(v2_path, v1_paths) == want


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
