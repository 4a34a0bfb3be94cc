"""What a corruption kind is: a sampler and a kernel.

A *kind* (for example ``"brightness"``) implements one or more registry names (``brightness_up``,
``brightness_down``). It is split in two pure functions:

``sample(param, shape, key) -> dict``
    Turns one severity-table entry ``param`` (as stored in :mod:`medmnistc_fast.registry`), the
    image shape ``(H, W, C)`` and the 64-bit image key (:mod:`medmnistc_fast.rng`) into fully
    explicit keyword values for the kernel: physical parameters scaled to the image size, angles,
    positions, or a counter-stream key for noise. Randomness comes only from ``key``
    (``rng.generator(key)`` for scalar draws).

``kernel(image, **values) -> ndarray``
    ``image`` is C-contiguous uint8 ``(H, W, C)`` with C = 1 or 3; returns a NEW C-contiguous
    uint8 array of the same shape and never writes to ``image``. A 1-channel image is a gray
    MedMNIST image and the kernel must give what the reference's dataset generation gives for it:
    L -> RGB -> corrupt -> L (Pillow's L = (19595 R + 38470 G + 7471 B + 32768) >> 16). For
    channel-wise deterministic kernels that is the channel itself.

Kernels do no validation and own no randomness: the public functions validate once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import registry

__all__ = ["Kind", "size_scale", "to_rgb", "to_gray"]


@dataclass(frozen=True)
class Kind:
    """One corruption kind: ``sample`` and ``kernel`` as described in the module docstring.

    ``random`` is False when ``sample`` ignores its key (deterministic corruptions).
    """

    name: str
    sample: Callable[[Any, tuple, int], dict]
    kernel: Callable[..., np.ndarray]
    random: bool


def size_scale(shape) -> float:
    """Factor applied to the reference's absolute pixel parameters: ``min(H, W) / 224``.

    At 224 px (the size the reference's tables were tuned for) it is exactly 1, so the
    reference's parameters are used unchanged.
    """
    return min(shape[0], shape[1]) / registry.REFERENCE_SIZE


def to_rgb(image: np.ndarray) -> np.ndarray:
    """(H, W, 1) -> (H, W, 3) by replication (Pillow's L -> RGB); 3-channel input is returned as is."""
    return np.repeat(image, 3, axis=2) if image.shape[2] == 1 else image


def to_gray(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 -> (H, W, 1) uint8 with Pillow's RGB -> L integer formula (ITU-R 601-2)."""
    r = rgb[..., 0].astype(np.uint32)
    g = rgb[..., 1].astype(np.uint32)
    b = rgb[..., 2].astype(np.uint32)
    lum = (19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16
    return lum.astype(np.uint8)[..., None]
