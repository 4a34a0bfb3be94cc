"""Public docstrings parse as numpydoc, and the errors they document are the errors raised.

The standard (design.md section 4): public docstrings give shapes, dtypes, units, value ranges and
a Raises section. A section only counts if ``inspect.getdoc`` (what ``help()``, Sphinx and
numpydoc read) shows its header at the left margin: one unindented continuation line in an
assembled docstring used to leave every line indented, and five functional docstrings then had
no sections at all for those tools.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pathlib
import re
import textwrap

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


def _public_methods():
    """(qualname, function, docstring owner) of the public methods and properties of the
    classes in the public modules' ``__all__`` (``__init__``'s docstring is the class's)."""
    for name in PUBLIC_MODULES:
        mod = importlib.import_module(f"medmnistc_fast.{name}")
        for attr in mod.__all__:
            cls = getattr(mod, attr)
            if not (inspect.isclass(cls) and cls.__module__.startswith("medmnistc_fast")):
                continue
            for mname, member in vars(cls).items():
                if mname.startswith("_") and mname != "__init__":
                    continue
                if mname == "__init__" and dataclasses.is_dataclass(cls):
                    continue  # generated from the fields, which the Attributes section lists
                if isinstance(member, property):
                    fn, owner = member.fget, member
                else:
                    fn = getattr(member, "__func__", member)
                    owner = cls if mname == "__init__" else fn
                if inspect.isfunction(fn):
                    yield f"{name}.{attr}.{mname}", fn, owner


def _raises_section(obj) -> str:
    """The text of the Raises section of ``obj``'s docstring ('' without one)."""
    doc = inspect.getdoc(obj) or ""
    m = re.search(r"^Raises\n-+\n(.*?)(?=^[^\n]+\n-+\n|\Z)", doc, re.S | re.M)
    return m.group(1) if m else ""


def _raised_names(fn) -> set:
    """Exception classes named in the ``raise`` statements of ``fn``'s own source (helpers
    that it calls are not followed)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(fn))))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id.endswith(("Error", "Exception")):
                names.add(exc.id)
    return names


@pytest.mark.parametrize("qualname, fn, owner", list(_public_methods()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_public_methods_document_parameters_and_returns(qualname, fn, owner):
    if fn.__name__ == "__init__":  # the class docstring documents the constructor
        assert "Parameters" in _sections(owner), qualname
        return
    sig = inspect.signature(fn)
    secs = _sections(owner)
    if [p for p in sig.parameters if p not in ("self", "cls")]:
        assert "Parameters" in secs, qualname
    if sig.return_annotation not in (None, "None", inspect.Signature.empty):
        assert "Returns" in secs, qualname


def _documentable():
    yield from ((q, fn, fn) for q, fn in _public_functions())
    yield from _public_methods()
    # dunder methods raise what their class documents (AugmentedDataset[i], len(sampler))
    for name in PUBLIC_MODULES:
        mod = importlib.import_module(f"medmnistc_fast.{name}")
        for attr in mod.__all__:
            cls = getattr(mod, attr)
            if inspect.isclass(cls) and cls.__module__.startswith("medmnistc_fast"):
                for dunder in ("__call__", "__getitem__", "__iter__", "__len__"):
                    fn = vars(cls).get(dunder)
                    if inspect.isfunction(fn):
                        owner = fn if inspect.getdoc(fn) and _raises_section(fn) else cls
                        yield f"{name}.{attr}.{dunder}", fn, owner


@pytest.mark.parametrize("qualname, fn, owner", list(_documentable()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_public_callables_document_the_errors_they_raise(qualname, fn, owner):
    # Every exception class a public function or method raises itself must appear in its
    # Raises section (a constructor's and a dunder's: in the class docstring).
    missing = sorted(e for e in _raised_names(fn) if e not in _raises_section(owner))
    assert not missing, f"{qualname} raises {missing} without documenting them"


def _constant_assignments(path: pathlib.Path):
    """(name, documented) for each public UPPER_CASE name assigned at module level in
    ``path`` (first assignment only). Documented: a ``#:`` comment line between the previous
    statement and this one, or the same for the group of constant assignments written on the
    lines right above it (one comment for ``BUBBLE_MIN_COUNT``, ``BUBBLE_BORDER``, ...)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    seen, prev, prev_documented = set(), None, False
    for stmt in tree.body:
        targets = []
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                targets += t.elts if isinstance(t, ast.Tuple) else [t]
        names = [t.id for t in targets if isinstance(t, ast.Name)
                 and re.fullmatch(r"[A-Z][A-Z0-9_]*", t.id)]
        gap = lines[(prev.end_lineno if prev else 0):stmt.lineno - 1]
        documented = any(g.lstrip().startswith("#:") for g in gap) or (
            bool(names) and prev is not None and prev_documented
            and prev.end_lineno == stmt.lineno - 1)
        for n in names:
            if n not in seen:
                seen.add(n)
                yield n, documented
        prev, prev_documented = stmt, bool(names) and documented


def test_public_constants_have_a_doc_comment():
    # Sphinx's ``#:`` comment: what the constant is, its units and where its value comes from.
    root = pathlib.Path(importlib.import_module("medmnistc_fast").__file__).parent
    bare = [f"{p.relative_to(root)}:{n}" for p in sorted(root.rglob("*.py"))
            for n, documented in _constant_assignments(p) if not documented]
    assert not bare, bare


@pytest.mark.parametrize("name", functional.__all__)
def test_functional_docstrings_have_every_numpydoc_section(name):
    assert {"Parameters", "Returns", "Raises", "References"} <= _sections(getattr(functional, name))


@pytest.mark.parametrize("body", ["\n\n    Details, indented (Python <= 3.12).\n    ",
                                  "\n\nDetails, at the margin (3.13 strips the indentation).\n"])
def test_functional_sections_reach_the_margin_whatever_the_docstring_indentation(body):
    def fn(image, level):
        pass
    fn.__doc__ = "Summary." + body
    functional._documented("""
    level : int
        A level.""", functional._ref("``X``"))(fn)
    assert {"Parameters", "Returns", "Raises", "References"} <= _sections(fn)
    assert "Details, " in inspect.getdoc(fn)


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
