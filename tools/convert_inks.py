"""Convert the reference's ink masks to a plain, pickle-free array file.

The stain_deposit corruption of MedMNIST-C stamps binary "ink" masks taken from the reference
package's ``medmnistc/assets/inks.npz`` (``medmnistc`` 0.1.0, Apache-2.0, copyright Francesco
Di Salvo et al.). That file holds, under keys ``'1'``..``'5'``, ten square 0/1 masks each of
side 12, 16, 24, 32 and 42 pixels, stored as uint64. This tool rewrites them, unchanged in
content, as boolean arrays of shape ``(10, s, s)`` in ``medmnistc_fast/assets/inks.npz``
(loadable with ``allow_pickle=False``) and writes the licence notice next to it.

Usage (any Python with NumPy; the reference need not be importable if ``--src`` is given)::

    python tools/convert_inks.py --src /path/to/medmnistc/assets/inks.npz

Without ``--src`` the file is looked up in an importable ``medmnistc`` package.
"""
from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEST = ROOT / "medmnistc_fast" / "assets"

#: Side in pixels of the masks under each key of the reference's file.
EXPECTED_SIDES = {"1": 12, "2": 16, "3": 24, "4": 32, "5": 42}

NOTICE = """\
inks.npz: ink masks used by the stain_deposit corruption.

Origin: medmnistc 0.1.0 (https://pypi.org/project/medmnistc/), file medmnistc/assets/inks.npz,
Copyright (c) Francesco Di Salvo et al. (authors of medmnistc),
licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
Reference: F. Di Salvo, S. Doerrich, C. Ledig, "MedMNIST-C: Comprehensive benchmark and
improved classifier robustness by simulating realistic image corruptions", arXiv:2406.17536.

Modifications: converted by tools/convert_inks.py from uint64 arrays to boolean arrays of
shape (10, s, s) (s = 12, 16, 24, 32, 42 under keys '1'..'5'), saved with numpy.savez_compressed
without pickled objects. Mask contents are unchanged.
"""


def _find_source() -> pathlib.Path:
    spec = importlib.util.find_spec("medmnistc")
    if spec is None or spec.origin is None:
        sys.exit("medmnistc is not importable: pass --src PATH/TO/inks.npz")
    return pathlib.Path(spec.origin).parent / "assets" / "inks.npz"


def _load(path: pathlib.Path) -> dict:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except ValueError:
        # Object arrays need unpickling: acceptable here only, on the reference's own file.
        with np.load(path, allow_pickle=True) as z:
            return {k: np.stack([np.asarray(m) for m in z[k]]) for k in z.files}


def convert(src: pathlib.Path, dest: pathlib.Path = DEST) -> dict:
    """Read the reference masks at ``src`` and write ``dest/inks.npz`` and ``dest/NOTICE``."""
    raw = _load(src)
    if sorted(raw) != sorted(EXPECTED_SIDES):
        raise ValueError(f"unexpected keys {sorted(raw)} in {src}")
    out = {}
    for key, side in EXPECTED_SIDES.items():
        a = np.asarray(raw[key])
        if a.shape != (10, side, side):
            raise ValueError(f"key {key!r}: shape {a.shape}, expected {(10, side, side)}")
        if not np.isin(a, (0, 1)).all():
            raise ValueError(f"key {key!r}: values other than 0 and 1")
        out[key] = a.astype(bool)
    dest.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(dest / "inks.npz", **out)
    (dest / "NOTICE").write_text(NOTICE)
    with np.load(dest / "inks.npz", allow_pickle=False) as z:  # round trip
        for key in out:
            assert np.array_equal(z[key], raw[key].astype(bool))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=pathlib.Path, default=None,
                    help="the reference's inks.npz (default: from an importable medmnistc)")
    ap.add_argument("--dest", type=pathlib.Path, default=DEST,
                    help="output folder (default: medmnistc_fast/assets of this checkout)")
    args = ap.parse_args(argv)
    out = convert(args.src or _find_source(), args.dest)
    for key, a in out.items():
        print(key, a.shape, a.dtype, int(a.sum()), "ink pixels")


if __name__ == "__main__":
    main()
