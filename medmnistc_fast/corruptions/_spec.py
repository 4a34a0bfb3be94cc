"""What a corruption kind is: a sampler and a kernel.

A *kind* (for example ``"brightness"``) implements one or more registry names (``brightness_up``,
``brightness_down``). It is split in two pure functions:

``sample(param, ctx) -> dict``
    Turns one severity-table entry ``param`` (as stored in :mod:`medmnistc_fast.registry`) and a
    :class:`Context` (image shape, 64-bit image key from :mod:`medmnistc_fast.rng`, severity,
    the table's reference size) into fully explicit keyword values for the kernel: physical
    parameters scaled to the image size, angles, positions, or a counter-stream key for noise.
    Randomness comes only from ``ctx.key`` (``rng.generator(ctx.key)`` for scalar draws).

``kernel(image, **values) -> ndarray``
    ``image`` is C-contiguous uint8 ``(H, W, C)`` with C = 1 or 3; returns a NEW C-contiguous
    uint8 array of the same shape and never writes to ``image``. A 1-channel image is a gray
    MedMNIST image and the kernel must give what the reference's dataset generation gives for it:
    L -> RGB -> corrupt -> L (Pillow's L = (19595 R + 38470 G + 7471 B + 32768) >> 16). For
    channel-wise deterministic kernels that is the channel itself.

Kernels do no validation and own no randomness: the public functions validate once.

A kind with ``into=True`` has a kernel that also takes ``out=``: a writeable, C-contiguous uint8
array of the image's shape sharing no memory with it, which the kernel fills and returns instead
of allocating a new array (same bytes). :func:`medmnistc_fast.corrupt_batch` passes its output
slots, which saves a copy per image and, where the copy released the GIL, one GIL hand-over.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np

from .. import registry

__all__ = ["Kind", "Context", "to_rgb", "to_gray"]


class Context(NamedTuple):
    """What a sampler knows about the image besides the table entry.

    shape : (H, W, C); key : int in [0, 2**64); severity : int 1..5; reference_size : int,
    the image side (pixels) the table's absolute pixel parameters were tuned for (224 for
    MedMNIST-C).
    """

    shape: tuple
    key: int
    severity: int
    reference_size: int = registry.REFERENCE_SIZE

    @property
    def scale(self) -> float:
        """Factor applied to the table's absolute pixel parameters: ``min(H, W) / reference_size``.

        At the reference size (224 px for MedMNIST-C) it is exactly 1, so the reference's
        parameters are used unchanged; at 28 px it is 0.125. One rule for every spatial
        parameter (radii, sigmas, kernel sizes, ink and font sizes, margins).
        """
        return min(self.shape[0], self.shape[1]) / self.reference_size

    @property
    def supersample(self) -> float:
        """``reference_size / min(H, W)`` below the reference size, else 1.

        The factor by which drawn artefacts (characters, bubbles) are drawn on a finer grid at
        their reference size and averaged over the image's pixels (8.0 at 28 px for
        MedMNIST-C): a 2 px rim or 4 px high text scaled below a pixel cannot be drawn.
        """
        side = min(self.shape[0], self.shape[1])
        return self.reference_size / side if side < self.reference_size else 1.0


@dataclass(frozen=True)
class Kind:
    """One corruption kind: ``sample`` and ``kernel`` as described in the module docstring.

    ``random`` is False when ``sample`` ignores ``ctx.key`` (deterministic corruptions).
    ``into`` is True when ``kernel`` takes ``out=`` (see the module docstring).

    Attributes
    ----------
    name : str
        The kind's name (a registry corruption name, or the shared name of ``*_up`` /
        ``*_down``, such as ``"brightness"``).
    sample : callable ``(param, Context) -> dict``
        Severity-table entry and context to the kernel's keyword values.
    kernel : callable ``(image, **values) -> ndarray``
        ``image`` C-contiguous uint8 ``(H, W, C)``, C in 1, 3; returns a new uint8 array of
        that shape (or fills ``out=`` when ``into``). Does no validation.
    random : bool
        Whether ``sample`` uses ``ctx.key``.
    into : bool, default False
        Whether ``kernel`` accepts ``out=``.
    max_side : int or None, default None
        The longest image side the kernel takes (JPEG: libjpeg's limit), checked by the callers
        of ``kernel`` so that the error names their argument; None for no limit.
    """

    name: str
    sample: Callable[[Any, Context], dict]
    kernel: Callable[..., np.ndarray]
    random: bool
    into: bool = False
    max_side: int | None = None

    def check_side(self, shape, name: str) -> None:
        """Check an image's sides against :attr:`max_side`.

        Parameters
        ----------
        shape : tuple of int
            ``(H, W, C)`` or ``(N, H, W, C)``.
        name : str
            The argument named in the error (``"image"``, ``"images"``).

        Raises
        ------
        ValueError
            ``max(H, W) > max_side`` (never when :attr:`max_side` is None).
        """
        check_max_side(self.max_side, shape, name, self.name)


def check_max_side(limit, shape, name: str, what: str) -> None:
    """ValueError ``"{name}: {what} takes sides of at most {limit} px, got H x W"`` if an image
    of ``shape`` ((H, W, C) or (N, H, W, C)) has a side longer than ``limit`` (None: no
    limit)."""
    if limit is not None:
        h, w = shape[-3], shape[-2]
        if max(h, w) > limit:
            raise ValueError(f"{name}: {what} takes sides of at most {limit:,} px, "
                             f"got {h} x {w}")


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
