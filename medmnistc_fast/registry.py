"""The corruption registry as plain data: datasets, their corruptions, severity tables, folds.

Every MedMNIST-C table (the 12 datasets of :data:`DATASETS`) is the first five entries of the
reference's ``CORRUPTIONS_DS`` dictionary in ``medmnistc/corruptions/registry.py`` of
``medmnistc`` 0.1.0 (Di Salvo, Doerrich, Ledig, "MedMNIST-C", arXiv:2406.17536, 2024;
Apache-2.0), in the reference's dictionary order. The two pathology tables
(:data:`PATHOLOGY_SUITES`) come from Zhang et al., MICCAI 2022 (see the comment above them).
Level ``s`` (1..5) of the public API is entry ``s - 1``. No logic lives here. The mappings
are read-only (``types.MappingProxyType``; ``TABLES``' per-dataset tables too).

Parameters per MedMNIST-C corruption (units):

- pixelate: resize factor (fraction of the side, 0..1)
- jpeg_compression: JPEG quality (1..95)
- gaussian_noise, speckle_noise: standard deviation of the additive / multiplicative normal
  noise, on the [0, 1] intensity scale
- impulse_noise: fraction of array elements replaced by salt (1.0) or pepper (0.0)
- shot_noise: photons per unit intensity (Poisson rate multiplier)
- defocus_blur: (disk radius in pixels at 224 px, Gaussian anti-alias sigma in pixels)
- motion_blur: (radius in pixels at 224 px, sigma in pixels at 224 px)
- zoom_blur: tuple of zoom factors (>= 1)
- gaussian_blur: kernel size in pixels at 224 px (odd)
- brightness_up/_down, contrast_up/_down: Pillow ``ImageEnhance`` factor
- gamma_corr_up/_down: gamma exponent (gain 1)
- saturate: additive shift of HSV saturation (0..1)
- stain_deposit: maximum number of ink marks
- bubble: (maximum radius in pixels at 224 px, maximum number of bubbles)
- black_corner: multiplier of the inscribed-circle radius
- characters: (maximum words, maximum letters per word, maximum font scale: OpenCV
  ``putText``'s ``fontScale``, a factor of the Hershey font's base size)

Parameters of the pathology suite's own corruptions: brightness, saturate, hue: additive
shift of HSV V, S, H on [0, 1] (H wraps); marking: (width, height) of the ink blot in pixels
at the suite's reference size; bubble: blend strength r in [0, 1].
"""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

__all__ = ["DATASETS", "PATHOLOGY_SUITES", "TABLES", "FOLDS", "PATHOLOGY_FOLDS", "fold_of", "RGB",
           "TASKS", "N_SEVERITIES", "REFERENCE_SIZE", "REFERENCE_SIZES", "N_CLASSES"]

#: Number of severity levels (the reference's benchmark uses levels 1..5).
N_SEVERITIES = 5

#: Image side (pixels) at which the reference's absolute pixel parameters were tuned.
REFERENCE_SIZE = 224

# Zoom factor lists of dermamnist's zoom_blur: the exact float64 values numpy.arange gives for
# the reference's arguments (12, 16, 11, 13 and 11 factors).
_ZOOM_DERMAMNIST = tuple(
    tuple(float(z) for z in np.arange(1, stop, step))
    for stop, step in ((1.11, 0.01), (1.16, 0.01), (1.21, 0.02), (1.26, 0.02), (1.31, 0.03))
)

#: ``{dataset: {corruption: (level 1 entry, ..., level 5 entry)}}`` for the 12 MedMNIST-C
#: datasets and the two pathology suite keys; corruptions in the reference's order. Sources: the
#: reference's ``CORRUPTIONS_DS`` (``medmnistc/corruptions/registry.py``, medmnistc 0.1.0) for
#: the 12 datasets, Zhang et al., MICCAI 2022 for the pathology suites (see the module docstring
#: and the comment above them); units in the module docstring.
TABLES: Mapping = {
    'pathmnist': {
        'pixelate': (0.8, 0.6, 0.4, 0.3, 0.25),
        'jpeg_compression': (50, 30, 15, 10, 7),
        'defocus_blur': ((3, 0.1), (4, 0.1), (5, 0.2), (6, 0.2), (7, 0.3)),
        'motion_blur': ((5, 5), (10, 5), (15, 5), (15, 8), (15, 12)),
        'brightness_up': (1.1, 1.15, 1.2, 1.22, 1.25),
        'brightness_down': (0.85, 0.8, 0.75, 0.72, 0.7),
        'contrast_up': (1.1, 1.2, 1.3, 1.4, 1.6),
        'contrast_down': (0.8, 0.7, 0.6, 0.55, 0.5),
        'saturate': (0.05, 0.1, 0.15, 0.2, 0.25),
        'stain_deposit': (1, 2, 3, 4, 5),
        'bubble': ((7, 15), (10, 15), (12, 15), (15, 20), (17, 25)),
    },
    'bloodmnist': {
        'pixelate': (0.6, 0.5, 0.4, 0.3, 0.25),
        'jpeg_compression': (50, 30, 15, 10, 7),
        'defocus_blur': ((2, 0.01), (3, 0.1), (4, 0.1), (5, 0.1), (6, 0.1)),
        'motion_blur': ((3, 3), (5, 5), (10, 5), (10, 7), (10, 9)),
        'brightness_up': (1.1, 1.2, 1.3, 1.35, 1.4),
        'brightness_down': (0.9, 0.8, 0.7, 0.6, 0.5),
        'contrast_up': (1.1, 1.15, 1.2, 1.25, 1.3),
        'contrast_down': (0.9, 0.8, 0.7, 0.6, 0.5),
        'saturate': (0.05, 0.1, 0.15, 0.17, 0.2),
        'stain_deposit': (1, 2, 3, 3, 3),
        'bubble': ((5, 10), (7, 10), (10, 10), (12, 12), (15, 12)),
    },
    'dermamnist': {
        'pixelate': (0.7, 0.5, 0.4, 0.3, 0.25),
        'jpeg_compression': (30, 20, 15, 10, 7),
        'gaussian_noise': (0.04, 0.08, 0.12, 0.18, 0.26),
        'speckle_noise': (0.05, 0.15, 0.2, 0.35, 0.45),
        'impulse_noise': (0.01, 0.03, 0.06, 0.09, 0.17),
        'shot_noise': (60, 25, 18, 10, 5),
        'defocus_blur': ((4, 0.1), (5, 0.2), (6, 0.3), (7, 0.4), (8, 0.5)),
        'motion_blur': ((10, 5), (15, 5), (15, 8), (15, 12), (20, 15)),
        'zoom_blur': _ZOOM_DERMAMNIST,
        'brightness_up': (1.1, 1.2, 1.3, 1.4, 1.5),
        'brightness_down': (0.9, 0.8, 0.7, 0.6, 0.5),
        'contrast_up': (1.1, 1.2, 1.3, 1.4, 1.6),
        'contrast_down': (0.8, 0.7, 0.6, 0.5, 0.4),
        'black_corner': (1.1, 1.05, 1.0, 0.9, 0.95),
        'characters': ((1, 6, 0.14), (2, 7, 0.15), (3, 8, 0.16), (4, 9, 0.17), (6, 10, 0.18)),
    },
    'retinamnist': {
        'pixelate': (0.8, 0.6, 0.5, 0.4, 0.35),
        'jpeg_compression': (30, 25, 20, 10, 5),
        'gaussian_noise': (0.04, 0.08, 0.12, 0.16, 0.2),
        'speckle_noise': (0.1, 0.15, 0.2, 0.25, 0.3),
        'defocus_blur': ((4, 0.1), (5, 0.2), (6, 0.3), (7, 0.4), (8, 0.5)),  # reference lists a 6th entry (9, 0.6), never used as a level
        'motion_blur': ((8, 5), (15, 5), (15, 8), (15, 12), (20, 15)),
        'brightness_down': (0.9, 0.8, 0.7, 0.6, 0.5),
        'contrast_down': (0.9, 0.8, 0.7, 0.6, 0.4),
    },
    'tissuemnist': {
        'pixelate': (0.4, 0.3, 0.2, 0.15, 0.1),
        'jpeg_compression': (25, 20, 15, 10, 7),
        'impulse_noise': (0.01, 0.015, 0.02, 0.025, 0.03),
        'gaussian_blur': (13, 15, 17, 21, 25),
        'brightness_up': (1.3, 1.4, 1.5, 1.6, 1.7),
        'brightness_down': (0.8, 0.7, 0.6, 0.5, 0.4),
        'contrast_up': (1.1, 1.2, 1.3, 1.4, 1.6),
        'contrast_down': (0.9, 0.8, 0.7, 0.6, 0.4),
    },
    'octmnist': {
        'pixelate': (0.3, 0.25, 0.2, 0.15, 0.1),
        'jpeg_compression': (30, 15, 10, 7, 5),
        'speckle_noise': (0.15, 0.3, 0.4, 0.5, 0.6),
        'defocus_blur': ((0.5, 0.6), (1, 0.5), (1.5, 0.1), (2.0, 0.5), (2.5, 0.1)),
        'motion_blur': ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15)),
        'contrast_down': (0.6, 0.4, 0.3, 0.2, 0.15),
    },
    'breastmnist': {
        'pixelate': (0.3, 0.25, 0.2, 0.15, 0.1),
        'jpeg_compression': (50, 30, 15, 10, 7),
        'speckle_noise': (0.1, 0.15, 0.2, 0.25, 0.3),
        'motion_blur': ((5, 5), (9, 7), (9, 10), (13, 10), (17, 12)),
        'brightness_up': (1.4, 1.5, 1.6, 1.8, 2.0),
        'brightness_down': (0.55, 0.5, 0.45, 0.4, 0.3),
        'contrast_down': (0.9, 0.8, 0.7, 0.6, 0.4),
    },
    'chestmnist': {
        'pixelate': (0.3, 0.25, 0.2, 0.15, 0.1),
        'jpeg_compression': (50, 30, 15, 10, 7),
        'gaussian_noise': (0.04, 0.08, 0.12, 0.18, 0.26),
        'speckle_noise': (0.05, 0.15, 0.2, 0.35, 0.45),
        'impulse_noise': (0.01, 0.03, 0.06, 0.09, 0.17),
        'shot_noise': (60, 25, 18, 10, 5),
        'gaussian_blur': (3, 5, 7, 9, 11),  # reference lists a 6th entry 13, never used as a level
        'brightness_up': (1.1, 1.2, 1.3, 1.4, 1.5),
        'brightness_down': (0.9, 0.8, 0.7, 0.6, 0.5),
        'contrast_up': (1.1, 1.2, 1.3, 1.4, 1.6),
        'contrast_down': (0.9, 0.8, 0.7, 0.6, 0.4),
        'gamma_corr_up': (1.1, 1.2, 1.3, 1.4, 1.6),
        'gamma_corr_down': (0.9, 0.8, 0.7, 0.6, 0.4),
    },
    'pneumoniamnist': {
        'pixelate': (0.8, 0.7, 0.6, 0.5, 0.4),
        'jpeg_compression': (50, 30, 15, 10, 7),
        'gaussian_noise': (0.04, 0.05, 0.06, 0.07, 0.08),
        'speckle_noise': (0.05, 0.07, 0.1, 0.15, 0.2),
        'impulse_noise': (0.005, 0.01, 0.013, 0.017, 0.02),
        'shot_noise': (300, 200, 150, 100, 80),
        'gaussian_blur': (3, 5, 7, 9, 11),  # reference lists a 6th entry 13, never used as a level
        'brightness_up': (1.1, 1.2, 1.3, 1.4, 1.5),
        'brightness_down': (0.9, 0.8, 0.7, 0.6, 0.5),
        'contrast_up': (1.1, 1.2, 1.3, 1.4, 1.6),
        'contrast_down': (0.9, 0.8, 0.7, 0.6, 0.4),
        'gamma_corr_up': (1.1, 1.2, 1.3, 1.4, 1.6),
        'gamma_corr_down': (0.9, 0.8, 0.7, 0.6, 0.4),
    },
    'organamnist': {
        'pixelate': (0.7, 0.6, 0.5, 0.4, 0.35),
        'jpeg_compression': (50, 30, 15, 10, 7),
        'gaussian_noise': (0.04, 0.08, 0.12, 0.16, 0.2),
        'speckle_noise': (0.05, 0.1, 0.2, 0.3, 0.4),
        'impulse_noise': (0.01, 0.02, 0.03, 0.05, 0.08),
        'shot_noise': (200, 100, 50, 25, 15),
        'gaussian_blur': (11, 13, 15, 17, 21),
        'brightness_up': (1.2, 1.3, 1.4, 1.5, 1.6),
        'brightness_down': (0.8, 0.75, 0.7, 0.65, 0.6),
        'contrast_up': (1.3, 1.4, 1.6, 1.7, 1.8),
        'contrast_down': (0.8, 0.7, 0.6, 0.55, 0.5),
        'gamma_corr_up': (1.3, 1.4, 1.6, 1.8, 2.0),
        'gamma_corr_down': (0.9, 0.8, 0.7, 0.6, 0.4),
    },
    'organcmnist': {
        'pixelate': (0.7, 0.6, 0.5, 0.4, 0.35),
        'jpeg_compression': (50, 30, 15, 10, 7),
        'gaussian_noise': (0.04, 0.08, 0.12, 0.16, 0.2),
        'speckle_noise': (0.05, 0.1, 0.2, 0.3, 0.4),
        'impulse_noise': (0.01, 0.02, 0.03, 0.05, 0.08),
        'shot_noise': (200, 100, 50, 25, 15),
        'gaussian_blur': (11, 13, 15, 17, 21),
        'brightness_up': (1.2, 1.3, 1.4, 1.5, 1.6),
        'brightness_down': (0.8, 0.75, 0.7, 0.65, 0.6),
        'contrast_up': (1.3, 1.4, 1.6, 1.7, 1.8),
        'contrast_down': (0.8, 0.7, 0.6, 0.55, 0.5),
        'gamma_corr_up': (1.3, 1.4, 1.6, 1.8, 2.0),
        'gamma_corr_down': (0.9, 0.8, 0.7, 0.6, 0.4),
    },
    'organsmnist': {
        'pixelate': (0.7, 0.6, 0.5, 0.4, 0.35),
        'jpeg_compression': (50, 30, 15, 10, 7),
        'gaussian_noise': (0.04, 0.08, 0.12, 0.16, 0.2),
        'speckle_noise': (0.05, 0.1, 0.2, 0.3, 0.4),
        'impulse_noise': (0.01, 0.02, 0.03, 0.05, 0.08),
        'shot_noise': (200, 100, 50, 25, 15),
        'gaussian_blur': (11, 13, 15, 17, 21),
        'brightness_up': (1.2, 1.3, 1.4, 1.5, 1.6),
        'brightness_down': (0.8, 0.75, 0.7, 0.65, 0.6),
        'contrast_up': (1.3, 1.4, 1.6, 1.7, 1.8),
        'contrast_down': (0.8, 0.7, 0.6, 0.55, 0.5),
        'gamma_corr_up': (1.3, 1.4, 1.6, 1.8, 2.0),
        'gamma_corr_down': (0.9, 0.8, 0.7, 0.6, 0.4),
    },
}

#: The 12 MedMNIST+ 2D dataset flags covered by MedMNIST-C (the reference's order).
DATASETS: tuple = tuple(TABLES)

# The digital-pathology suite (Zhang et al., "Benchmarking the Robustness of Deep Neural Networks
# to Common Corruptions in Digital Pathology", MICCAI 2022, arXiv:2206.14973), its 96 px
# (Patchcamelyon-C) and 224 px (LocalTCT-C) configurations, from that paper's corruption
# definitions and severity tables and its released code (github.com/superjamessyx/
# robustness_benchmark). The 224 px saturate and hue shifts are read from a figure of the paper
# (not from the released code); the marking sizes are the bounding boxes of the original's
# blot at each severity (our blot is synthesised at those sizes, see
# medmnistc_fast.corruptions.pathology).
# Units: pixelate, jpeg_compression, defocus_blur, motion_blur as in MedMNIST-C (pixels at the
# suite's reference size); brightness / saturate / hue: additive shift of HSV V / S / H (H wraps);
# marking: (width, height) of the ink blot in pixels at the reference size; bubble: blend
# strength r of out = x + mask * r * (bubble - x).
_PATHOLOGY_COMMON = {
    "pixelate": (0.6, 0.5, 0.4, 0.3, 0.25),
    "jpeg_compression": (25, 18, 15, 10, 7),
}
TABLES["pathology96"] = {
    **_PATHOLOGY_COMMON,
    "defocus_blur": ((3, 0.05), (4, 0.3), (5, 0.3), (6, 0.3), (7, 0.3)),
    "motion_blur": ((5, 1), (5, 2), (5, 3), (5, 4), (6, 5)),
    "brightness": (0.05, 0.10, 0.15, 0.20, 0.25),
    "saturate": (0.05, 0.10, 0.15, 0.20, 0.25),
    "hue": (0.02, 0.04, 0.06, 0.08, 0.10),
    "marking": ((10, 10), (21, 22), (31, 34), (42, 45), (54, 57)),
    "bubble": (0.1, 0.3, 0.5, 0.7, 0.9),
}
TABLES["pathology224"] = {
    **_PATHOLOGY_COMMON,
    "defocus_blur": ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)),
    "motion_blur": ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15)),
    "brightness": (0.05, 0.10, 0.15, 0.20, 0.25),
    "saturate": (0.02, 0.04, 0.06, 0.08, 0.10),
    "hue": (0.03, 0.06, 0.09, 0.12, 0.15),
    "marking": ((24, 26), (49, 53), (75, 80), (101, 107), (126, 135)),
    "bubble": (0.1, 0.3, 0.5, 0.7, 0.9),
}

#: Dataset keys of the digital-pathology suite (usable wherever a dataset name is).
PATHOLOGY_SUITES: tuple = ("pathology96", "pathology224")

#: Image side (pixels) each table's absolute pixel parameters were tuned for.
REFERENCE_SIZES: Mapping = {**{d: REFERENCE_SIZE for d in DATASETS},
                         "pathology96": 96, "pathology224": 224}

#: Corruption categories ("folds"), from the reference's ``CORRUPTIONS_DS_FOLDS``.
FOLDS: Mapping = {
    "digital": ("pixelate", "jpeg_compression"),
    "noise": ("gaussian_noise", "speckle_noise", "impulse_noise", "shot_noise"),
    "blur": ("defocus_blur", "motion_blur", "zoom_blur", "gaussian_blur"),
    "color": ("brightness_up", "brightness_down", "contrast_up", "contrast_down", "saturate"),
    "task-specific": (
        "stain_deposit", "bubble", "black_corner", "characters", "gamma_corr_up", "gamma_corr_down",
    ),
}

#: Whether the dataset's images are RGB (``DATASET_RGB`` of the reference registry).
RGB: Mapping = {
    "pathmnist": True, "bloodmnist": True, "dermamnist": True, "retinamnist": True,
    "tissuemnist": False, "octmnist": False, "breastmnist": False, "chestmnist": False,
    "pneumoniamnist": False, "organamnist": False, "organcmnist": False, "organsmnist": False,
    "pathology96": True, "pathology224": True,
}

#: MedMNIST task type of each dataset (``medmnist.INFO[flag]["task"]``, medmnist 3.0).
TASKS: Mapping = {
    "pathmnist": "multi-class", "bloodmnist": "multi-class", "dermamnist": "multi-class",
    "retinamnist": "ordinal-regression", "tissuemnist": "multi-class", "octmnist": "multi-class",
    "breastmnist": "binary-class", "chestmnist": "multi-label, binary-class",
    "pneumoniamnist": "binary-class", "organamnist": "multi-class", "organcmnist": "multi-class",
    "organsmnist": "multi-class",
}

#: Number of classes (for chestmnist: of binary labels) of each dataset:
#: ``len(medmnist.INFO[flag]["label"])``, medmnist 3.0.
N_CLASSES: Mapping = {
    "pathmnist": 9, "bloodmnist": 8, "dermamnist": 7, "retinamnist": 5, "tissuemnist": 8,
    "octmnist": 4, "breastmnist": 2, "chestmnist": 14, "pneumoniamnist": 2, "organamnist": 11,
    "organcmnist": 11, "organsmnist": 11,
}

# The tables are shared by every call in the process: read-only views, so that an edit such as
# ``TABLES["dermamnist"]["pixelate"] = ...`` raises instead of silently changing every later
# output (copy with ``dict(...)`` to build a variant).
TABLES = MappingProxyType({d: MappingProxyType(t) for d, t in TABLES.items()})
REFERENCE_SIZES = MappingProxyType(REFERENCE_SIZES)
FOLDS = MappingProxyType(FOLDS)
#: Folds of the pathology suites' own corruption names (our classification: the pathology
#: benchmark defines no folds; its other names fall in :data:`FOLDS` by name).
PATHOLOGY_FOLDS = MappingProxyType({"color": ("brightness", "hue"),
                                    "task-specific": ("marking",)})
RGB = MappingProxyType(RGB)
TASKS = MappingProxyType(TASKS)
N_CLASSES = MappingProxyType(N_CLASSES)


def fold_of(dataset: str, corruption: str):
    """The fold ``corruption`` of ``dataset`` belongs to.

    Parameters
    ----------
    dataset : str
        A key of :data:`TABLES` (the 12 MedMNIST-C datasets or a pathology suite).
    corruption : str
        A corruption name.

    Returns
    -------
    str or None
        A key of :data:`FOLDS` ('digital', 'noise', 'blur', 'color', 'task-specific'): by
        :data:`FOLDS` (the reference's ``CORRUPTIONS_DS_FOLDS``) for MedMNIST-C names, by
        :data:`PATHOLOGY_FOLDS` for the pathology suites' own names (brightness, hue, marking).
        None for a name in neither (names are not validated; nothing is raised).
    """
    for fold, names in FOLDS.items():
        if corruption in names:
            return fold
    if dataset in PATHOLOGY_SUITES:
        for fold, names in PATHOLOGY_FOLDS.items():
            if corruption in names:
                return fold
    return None
