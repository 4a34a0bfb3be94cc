"""Public docstrings parse as numpydoc, and the errors they document are the errors raised.

The standard (design.md section 4): public docstrings give shapes, dtypes, units, value ranges and
a Raises section. A section only counts if ``inspect.getdoc`` (what ``help()``, Sphinx and
numpydoc read) shows its header at the left margin: one unindented continuation line in an
assembled docstring used to leave every line indented, and five functional docstrings then had
no sections at all for those tools.
"""
from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

from medmnistc_fast import datasets, functional, generate, rng
from medmnistc_fast.corruptions import kind_of

PUBLIC_MODULES = ("api", "functional", "registry", "augment", "evaluate", "datasets", "generate",
                  "sample", "rng", "corruptions")


def _sections(obj) -> set:
    doc = inspect.getdoc(obj) or ""
    lines = doc.splitlines()
    return {a for a, b in zip(lines, lines[1:]) if b and set(b) == {"-"} and len(b) == len(a)}


def _public_functions():
    for name in PUBLIC_MODULES:
        mod = importlib.import_module(f"medmnistc_fast.{name}")
        for attr in mod.__all__:
            obj = getattr(mod, attr)
            if inspect.isfunction(inspect.unwrap(obj)):
                yield f"{name}.{attr}", obj


@pytest.mark.parametrize("name", functional.__all__)
def test_functional_docstrings_have_every_numpydoc_section(name):
    assert {"Parameters", "Returns", "Raises", "References"} <= _sections(getattr(functional, name))


@pytest.mark.parametrize("qualname, fn", list(_public_functions()), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_public_functions_document_parameters_and_returns(qualname, fn):
    sig = inspect.signature(fn)
    secs = _sections(fn)
    if sig.parameters:
        assert "Parameters" in secs, qualname
    if sig.return_annotation not in (None, "None"):
        assert "Returns" in secs, qualname


def test_documented_errors_of_rng_helpers():
    base = rng.base_key(3, "pathmnist", "pixelate", 1)
    # documented: a float index fails in the bit arithmetic (Python's own message)
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for &: 'float'"):
        rng.image_key(base, 1.5)
    with pytest.raises(ValueError, match=r"must be non-negative.*spawn_key=\(\d+, \d+, -1\)"):
        rng.base_key(0, "pathmnist", "pixelate", -1)  # documented: severity negative
    with pytest.raises(ValueError, match="negative"):
        rng.raw_words(base, -1)
    with pytest.raises(ValueError, match=r"must be non-negative.*entropy=-1"):
        rng.generator(-1)  # documented: key negative
    # documented: the generator's draws are those of Generator(PCG64(key))
    key = rng.image_key(base, 5)
    np.testing.assert_array_equal(rng.generator(key).random(4),
                                  np.random.Generator(np.random.PCG64(key)).random(4))
    assert 0 <= rng.fresh_seed() < 2 ** 128


def test_documented_errors_of_kind_of_and_folder_helpers():
    with pytest.raises(KeyError, match="no_such_corruption"):
        kind_of("pathmnist", "no_such_corruption")
    # folder_name has no "file's own" split: its messages do not offer None
    for split in (None, 3):
        with pytest.raises(TypeError, match=r"^split must be a str, one of 'test', 'val', "
                                            r"'train'; got (None|3) \((NoneType|int)\)$"):
            datasets.folder_name("pathmnist", split)
    with pytest.raises(ValueError, match=r"^split must be one of 'test', 'val', 'train'; got 'dev'$"):
        datasets.folder_name("pathmnist", "dev")
    with pytest.raises(ValueError, match="dataset"):
        datasets.folder_name("", "test")
    assert datasets.folder_name("pathmnist", "val") == "pathmnist_val"
    with pytest.raises(TypeError, match="root"):
        generate.input_path(b"/data", "pathmnist", 28)
    with pytest.raises(ValueError, match="root"):
        generate.input_path("", "pathmnist", 28)
    with pytest.raises(ValueError, match="out"):
        generate.output_dir("", "pathmnist")
    with pytest.raises(ValueError, match="split"):
        generate.output_dir("/tmp", "pathmnist", "dev")


def test_pathology_bubble_ellipse_covers_the_documented_share():
    # Documented: the synthetic bubble's ellipse, semi-axes 0.46 W and 0.45 H, covers 65.0 % of
    # the image (pi * 0.46 * 0.45 = 0.6503).
    from medmnistc_fast.corruptions.pathology import bubble_layer

    _, mask = bubble_layer(224, 224)
    assert abs(float(mask.mean()) - np.pi * 0.46 * 0.45) < 0.005


@pytest.mark.parametrize("module", ["medmnistc_fast.augment", "medmnistc_fast.evaluate"])
def test_docstring_examples_give_the_documented_output(module):
    # The Examples sections (AugMedMNISTC's output shape; balanced_accuracy's 0.555556 = mean of
    # the recalls 1, 0 and 2/3 written beside it) are run as doctests here.
    import doctest

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
