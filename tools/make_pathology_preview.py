#!/usr/bin/env python
"""Write ``docs/pathology_preview.png``: the nine pathology corruptions x five severities.

One 96 x 96 px patch of scikit-image's bundled immunohistochemistry image
(``skimage.data.immunohistochemistry()``, 512 x 512 RGB; cut at row 200, column 150 by default:
epithelium and stroma) is corrupted through the public API (``medmnistc_fast.corrupt(...,
dataset="pathology96", seed=0)``) at every severity. Rows: corruptions in registry order; columns:
the clean patch, then severities 1..5. Cells are upscaled x2 with NEAREST (every pixel visible);
labels use Pillow's default font.

Usage::

    python tools/make_pathology_preview.py [--out docs/pathology_preview.png] [--seed 0]
                                           [--row 200] [--col 150] [--dataset pathology96]

Deterministic: the same arguments and library version give the same PNG.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from skimage import data

import medmnistc_fast as mf

ZOOM = 2
LABEL_W = 130
HEADER_H = 22
GAP = 4


def patch(row: int, col: int, size: int) -> np.ndarray:
    """A ``size`` px patch of the immunohistochemistry image, top-left at (row, col)."""
    img = data.immunohistochemistry()
    return np.ascontiguousarray(img[row:row + size, col:col + size])


def grid(image: np.ndarray, dataset: str, seed: int) -> Image.Image:
    """The preview grid of ``image`` for every corruption and severity of ``dataset``."""
    names = mf.corruptions(dataset)
    h, w = image.shape[:2]
    cw, ch = w * ZOOM, h * ZOOM
    cols = 6
    canvas = Image.new("RGB", (LABEL_W + cols * (cw + GAP), HEADER_H + len(names) * (ch + GAP)),
                       "white")
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default()
    for j, title in enumerate(["clean"] + [f"severity {s}" for s in range(1, 6)]):
        draw.text((LABEL_W + j * (cw + GAP) + 4, 5), title, fill="black", font=font)
    for i, name in enumerate(names):
        y = HEADER_H + i * (ch + GAP)
        draw.text((4, y + ch // 2 - 6), name, fill="black", font=font)
        cells = [image] + [mf.corrupt(image, name, s, dataset=dataset, seed=seed)
                           for s in range(1, 6)]
        for j, cell in enumerate(cells):
            pil = Image.fromarray(cell).resize((cw, ch), Image.NEAREST)
            canvas.paste(pil, (LABEL_W + j * (cw + GAP), y))
    return canvas


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parents[1]
    parser.add_argument("--out", type=Path, default=root / "docs" / "pathology_preview.png",
                        help="output PNG (default docs/pathology_preview.png of this checkout)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of every corrupt call (default 0)")
    parser.add_argument("--row", type=int, default=200,
                        help="top row of the patch in the 512 x 512 image (default 200)")
    parser.add_argument("--col", type=int, default=150,
                        help="left column of the patch in the 512 x 512 image (default 150)")
    parser.add_argument("--dataset", default="pathology96", choices=("pathology96", "pathology224"),
                        help="severity tables, and the patch side: 96 or 224 px "
                             "(default pathology96)")
    args = parser.parse_args(argv)
    size = 96 if args.dataset == "pathology96" else 224
    for name in ("row", "col"):
        if not 0 <= getattr(args, name) <= 512 - size:
            parser.error(f"--{name} must be between 0 and {512 - size} for a {size} px patch "
                         f"of the 512 x 512 image, got {getattr(args, name)}")
    img = grid(patch(args.row, args.col, size), args.dataset, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    img.save(args.out, optimize=True)
    print(f"wrote {args.out} ({img.size[0]} x {img.size[1]})")


if __name__ == "__main__":
    main()
