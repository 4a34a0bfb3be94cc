"""Instruction-set variants of a native kernel family, for tests that run on every one.

The extension exposes a setter per family (``_native._set_resample_isa``,
``_native._set_disk_isa``) that switches to a named variant and returns whether this CPU runs
it. :func:`runnable` lists the ones that run (the first is the default, best path, left
selected); :func:`fixture` makes a pytest fixture that runs a test once per variant and restores
the default afterwards.
"""
from __future__ import annotations

import pytest


def runnable(setter, names):
    """Names (in the given order of preference) that ``setter`` accepts on this CPU; the first
    one is selected on return."""
    found = [name for name in names if setter(name)]
    assert found, f"none of {names} runs on this CPU"
    setter(found[0])
    return found


def fixture(setter, names):
    """A fixture parametrised over ``names`` (from :func:`runnable`) that selects each variant
    with ``setter`` for one test and restores ``names[0]`` after it."""

    @pytest.fixture(params=names)
    def isa(request):
        assert setter(request.param)
        yield request.param
        assert setter(names[0])

    return isa
