"""Hypothesis strategies shared by the property tests: real-image content at any shape.

Images are crops of the real sample sources (scikit-image, pydicom) resized to a drawn shape,
optionally with a random-noise variant, so the properties are checked on realistic content
and on worst-case content.
"""
from functools import lru_cache

import numpy as np
from hypothesis import strategies as st
from PIL import Image

from medmnistc_fast import registry
from medmnistc_fast.sample import source_images

sides = st.integers(min_value=8, max_value=256)
channels = st.sampled_from([1, 3])
datasets = st.sampled_from(registry.DATASETS)
severities = st.integers(min_value=1, max_value=5)
seeds = st.integers(min_value=0, max_value=2**32 - 1)


@lru_cache(maxsize=64)
def _real(h: int, w: int, c: int, which: int) -> np.ndarray:
    srcs = source_images(c == 3)
    _, img = srcs[which % len(srcs)]
    out = np.asarray(Image.fromarray(img).resize((w, h), Image.LANCZOS))
    out = out.reshape(h, w, c) if c == 1 else out
    out.setflags(write=False)
    return out


@st.composite
def images(draw, min_side=8, max_side=256, chans=channels, noise=True):
    """uint8 (H, W, C) images, C in {1, 3}; H and W independent (non-square)."""
    h = draw(st.integers(min_side, max_side))
    w = draw(st.integers(min_side, max_side))
    c = draw(chans)
    if noise and draw(st.booleans()) and draw(st.booleans()):
        seed = draw(seeds)
        return np.random.default_rng(seed).integers(0, 256, (h, w, c), dtype=np.uint8)
    return np.array(_real(h, w, c, draw(st.integers(0, 3))))


@st.composite
def dataset_corruption(draw):
    d = draw(datasets)
    return d, draw(st.sampled_from(tuple(registry.TABLES[d])))


@st.composite
def pathology_corruption(draw):
    """(suite, corruption) of the digital-pathology suite (``pathology96`` / ``pathology224``)."""
    d = draw(st.sampled_from(registry.PATHOLOGY_SUITES))
    return d, draw(st.sampled_from(tuple(registry.TABLES[d])))
