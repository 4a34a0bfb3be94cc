"""Corruption kinds (sampler + kernel) and the map from registry names to kinds."""
from __future__ import annotations

from ..registry import PATHOLOGY_SUITES
from ._spec import Kind
from .artifacts import BLACK_CORNER, BUBBLE, CHARACTERS, STAIN_DEPOSIT
from .blur import DEFOCUS_BLUR, GAUSSIAN_BLUR, MOTION_BLUR, ZOOM_BLUR
from .color import BRIGHTNESS, CONTRAST, GAMMA, SATURATE
from .digital import JPEG_COMPRESSION, PIXELATE
from .noise import GAUSSIAN_NOISE, IMPULSE_NOISE, SHOT_NOISE, SPECKLE_NOISE

__all__ = ["Kind", "KINDS", "kind_of"]

#: Registry corruption name -> kind. ``*_up`` / ``*_down`` share a kind (only tables differ).
KINDS: dict = {
    "pixelate": PIXELATE,
    "jpeg_compression": JPEG_COMPRESSION,
    "gaussian_noise": GAUSSIAN_NOISE,
    "speckle_noise": SPECKLE_NOISE,
    "impulse_noise": IMPULSE_NOISE,
    "shot_noise": SHOT_NOISE,
    "defocus_blur": DEFOCUS_BLUR,
    "motion_blur": MOTION_BLUR,
    "zoom_blur": ZOOM_BLUR,
    "gaussian_blur": GAUSSIAN_BLUR,
    "brightness_up": BRIGHTNESS,
    "brightness_down": BRIGHTNESS,
    "contrast_up": CONTRAST,
    "contrast_down": CONTRAST,
    "gamma_corr_up": GAMMA,
    "gamma_corr_down": GAMMA,
    "saturate": SATURATE,
    "stain_deposit": STAIN_DEPOSIT,
    "bubble": BUBBLE,
    "black_corner": BLACK_CORNER,
    "characters": CHARACTERS,
}


def kind_of(dataset: str, corruption: str) -> Kind:
    """The kind implementing ``corruption`` for ``dataset`` (names already validated).

    The pathology suite's ``brightness``, ``hue``, ``marking`` and ``bubble`` are their own
    kinds (an HSV value shift, not Pillow's brightness; a blended photograph-like bubble, not
    MedMNIST-C's bubbles); every other name is the MedMNIST-C kind of that name.

    Parameters
    ----------
    dataset : str
        A key of :data:`medmnistc_fast.registry.TABLES`. Not checked: any other value picks
        the MedMNIST-C kinds.
    corruption : str
        A corruption name (a key of :data:`KINDS`, or for a pathology suite one of
        ``brightness``, ``hue``, ``marking``, ``bubble``).

    Returns
    -------
    Kind

    Raises
    ------
    KeyError
        ``corruption`` names no kind (the names are not validated here; the public API checks
        them first with a ValueError listing the valid ones).
    """
    if dataset in PATHOLOGY_SUITES:
        from .pathology import PATHOLOGY_KINDS

        if corruption in PATHOLOGY_KINDS:
            return PATHOLOGY_KINDS[corruption]
    return KINDS[corruption]
