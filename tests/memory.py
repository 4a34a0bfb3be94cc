"""Peak resident memory of a fresh Python process, for tests that bound how memory grows."""
from __future__ import annotations

import subprocess
import sys


def peak_growth_kb(setup: str, call: str, small, large) -> int:
    """Growth (kB) of a fresh process's peak resident set from ``call`` with ``small`` to
    ``call`` with ``large``.

    ``setup`` is Python source run first (imports, kernels loaded); ``call`` is an expression
    in ``n`` evaluated for ``n = small`` and then ``n = large``. The first call also loads what
    the second needs, so the difference is the memory the larger input costs.
    """
    code = (f"import resource\n{setup}\n"
            "def peak(n):\n"
            f"    {call}\n"
            "    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            f"print(peak({small!r}), peak({large!r}))")
    first, second = map(int, subprocess.run([sys.executable, "-c", code], check=True,
                                            capture_output=True, text=True).stdout.split())
    return second - first
