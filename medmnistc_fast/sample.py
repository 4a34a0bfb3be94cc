"""A small MedMNIST-format sample set built from real medical images shipped in installed packages.

Sources (no downloads; all files are inside the scikit-image and pydicom (>= 3.0.1) wheels):

- RGB: scikit-image ``data/ihc.png`` (immunohistochemistry, 512 x 512), ``data/retina.jpg``
  (fundus photograph, 1411 x 1411), pydicom ``test_files/examples_rgb_color.dcm``
  (ultrasound, 240 x 320).
- Gray: pydicom ``test_files/CT_small.dcm`` (CT, 128 x 128, int16) and ``MR_small.dcm``
  (MR, 64 x 64, int16), scikit-image ``data/cell.png`` (microscopy, 660 x 550) and
  ``data/microaneurysms.png`` (retina, 102 x 102).

Each source gives deterministic square crops (the centre crop, then the four quadrant-centred
crops of 3/4 of the short side, cycling), resized with Pillow's LANCZOS filter to the requested
side. DICOM slices are windowed to uint8 by their own min and max. Labels are synthetic
(``index % n_classes``) and only there to give files the MedMNIST shape.
"""
from __future__ import annotations

import os
from functools import lru_cache

import numpy as np
from PIL import Image

from . import registry
from ._validation import check_int

__all__ = ["source_images", "sample_images", "sample_split", "check_sample_shape", "N_LABELS",
           "MAX_SIZE", "MAX_BYTES", "MIN_PYDICOM", "SPLIT_IMAGES"]

#: Images per split of the sample unless asked otherwise (:func:`sample_split`, ``generate
#: --sample``, ``preview --sample``): the 15 distinct colour crops twice, or the 20 distinct
#: gray crops and 10 of them again (see :data:`MAX_BYTES`); a demo run of every corruption
#: takes seconds.
SPLIT_IMAGES = 30

#: Oldest pydicom whose wheel holds every DICOM file of the sample (``examples_rgb_color.dcm``
#: is missing from 2.4.4 and 3.0.0; checked on their wheels from PyPI). It needs Python >= 3.10.
MIN_PYDICOM = "3.0.1"

#: Label columns per dataset (MedMNIST: (N, 1) except chestmnist's 14 findings).
N_LABELS = {d: (14 if d == "chestmnist" else 1) for d in registry.DATASETS}



def _skimage_file(name: str) -> np.ndarray:
    import skimage.data

    path = os.path.join(os.path.dirname(skimage.data.__file__), name)
    with Image.open(path) as im:
        return np.array(im)


def _dicom_file(name: str) -> np.ndarray:
    import pydicom
    import pydicom.data

    path = os.path.join(os.path.dirname(pydicom.data.__file__), "test_files", name)
    if not os.path.isfile(path):
        # pydicom 2.x and 3.0.0 wheels leave examples_rgb_color.dcm out (it came from a
        # download); a bare FileNotFoundError from dcmread did not say what to install.
        raise FileNotFoundError(
            f"the embedded sample needs pydicom's test file {name}, shipped in pydicom >= "
            f"{MIN_PYDICOM} (installed: {pydicom.__version__}, file not found at {path}); "
            f"upgrade it with pip install 'pydicom>={MIN_PYDICOM}'")
    arr = pydicom.dcmread(path).pixel_array
    if arr.dtype != np.uint8:
        lo, hi = float(arr.min()), float(arr.max())
        arr = np.round((arr.astype(np.float64) - lo) / max(hi - lo, 1.0) * 255).astype(np.uint8)
    return arr


@lru_cache(maxsize=2)
def source_images(rgb: bool) -> tuple:
    """The real source images, unresized (see the module docstring for sizes and files).

    Parameters
    ----------
    rgb : bool
        The three colour sources, or the four gray ones.

    Returns
    -------
    tuple of (str, ndarray)
        (name, pixels): uint8, shape (H, W, 3) if ``rgb`` else (H, W). Cached: the same
        arrays on every call (do not modify them).

    Raises
    ------
    FileNotFoundError
        A pydicom older than :data:`MIN_PYDICOM` (its wheel lacks a DICOM file of the sample).
    """
    if rgb:
        return (("ihc", _skimage_file("ihc.png")[..., :3]),
                ("retina", _skimage_file("retina.jpg")[..., :3]),
                ("ultrasound", _dicom_file("examples_rgb_color.dcm")))
    return (("ct", _dicom_file("CT_small.dcm")), ("mr", _dicom_file("MR_small.dcm")),
            ("cell", _skimage_file("cell.png")),
            ("microaneurysms", _skimage_file("microaneurysms.png")))


def _crop(img: np.ndarray, k: int) -> np.ndarray:
    h, w = img.shape[:2]
    if k == 0:
        side = min(h, w)
        cy, cx = h // 2, w // 2
    else:
        side = (3 * min(h, w)) // 4
        cy = h // 4 + (k in (3, 4)) * (h // 2)
        cx = w // 4 + (k in (2, 4)) * (w // 2)
    y0 = int(np.clip(cy - side // 2, 0, h - side))
    x0 = int(np.clip(cx - side // 2, 0, w - side))
    return img[y0:y0 + side, x0:x0 + side]


#: Largest side :func:`sample_images` makes: the sources are upsampled beyond about 1,000 px,
#: and a typo such as 100000 would otherwise ask for tens of GB and minutes of resampling.
MAX_SIZE = 4096


#: Largest sample array :func:`sample_images` makes, bytes (4 GiB: 28,000 RGB images at 224 px).
#: The sample holds 15 distinct colour and 20 distinct gray crops, repeated beyond that; a typo
#: such as n=10**9 used to fail with NumPy's "Maximum allowed dimension exceeded" or a
#: MemoryError, or start filling terabytes of memory.
MAX_BYTES = 2 ** 32


def check_sample_shape(n, size, rgb: bool, n_name: str = "n") -> tuple:
    """``(n, size)`` as ints checked for :func:`sample_images`: ``n >= 0``, ``size`` in
    8..4096, and ``n * size * size * channels <= MAX_BYTES``. ``n_name`` names ``n`` in the
    messages (``generate`` calls it ``sample_n``).

    Parameters
    ----------
    n : int >= 0
        Number of images.
    size : int in 8..4096 (:data:`MAX_SIZE`)
        Side in pixels.
    rgb : bool
        3 channels if true, else 1 (only the byte count uses it).
    n_name : str, default "n"

    Returns
    -------
    (int, int)
        ``(n, size)`` as Python ints.

    Raises
    ------
    TypeError
        ``n`` or ``size`` not an int.
    ValueError
        Out of range, or the array would exceed :data:`MAX_BYTES`.
    """
    n, size = check_int(n, n_name, 0), check_int(size, "size", 8, MAX_SIZE)
    per_image = size * size * (3 if rgb else 1)
    if n * per_image > MAX_BYTES:
        # starts with the name, which the command line shows as its flag (--sample-n)
        raise ValueError(f"{n_name} must be at most {MAX_BYTES // per_image} for {size} x {size} "
                         f"px {'RGB' if rgb else 'gray'} images ({n_name} x size x size x "
                         f"channels at most {MAX_BYTES} bytes, 4 GiB; the sample repeats its 15 "
                         f"colour and 20 gray crops); got {n}: {n * per_image / 2 ** 30:.3g} GiB")
    return n, size


def sample_images(n: int, size: int = 224, rgb: bool = True) -> np.ndarray:
    """``n`` real images at ``size`` x ``size``.

    Parameters
    ----------
    n : int >= 0
        ``n * size * size * channels`` at most :data:`MAX_BYTES` (4 GiB).
    size : int in 8..4096 (:data:`MAX_SIZE`)
        Side in pixels (MedMNIST+ sizes are 28, 64, 128, 224; any side in the range works).
    rgb : bool
        Colour sources (N, size, size, 3) or gray sources (N, size, size).

    Returns
    -------
    ndarray, uint8, shape (n, size, size, 3) or (n, size, size)

    Raises
    ------
    TypeError
        ``n`` or ``size`` not an int (Python or NumPy integer; bools are refused); ``rgb`` not
        a bool.
    ValueError
        ``n`` negative, ``size`` outside 8..4096, the array larger than 4 GiB
        (:data:`MAX_BYTES`).
    FileNotFoundError
        As in :func:`source_images` (a pydicom older than :data:`MIN_PYDICOM`).
    """
    if not isinstance(rgb, (bool, np.bool_)):
        raise TypeError(f"rgb must be a bool (True: colour sources, False: gray); got {rgb!r} "
                        f"({type(rgb).__name__})")
    n, size = check_sample_shape(n, size, rgb)
    sources = source_images(bool(rgb))
    out = np.empty((n, size, size) + ((3,) if rgb else ()), np.uint8)
    for i in range(n):
        _, img = sources[i % len(sources)]
        crop = _crop(img, (i // len(sources)) % 5)
        out[i] = np.asarray(Image.fromarray(crop).resize((size, size), Image.LANCZOS))
    return out


def sample_split(dataset: str, size: int = 224, n: int = SPLIT_IMAGES) -> dict:
    """A MedMNIST-format dict for ``dataset`` (``train/val/test_images`` and ``_labels``).

    All three splits hold the same ``n`` images (the sample is for demos and tests, not
    training).

    Parameters
    ----------
    dataset : str
        One of the 12 MedMNIST-C datasets (:data:`medmnistc_fast.DATASETS`); selects colour or
        gray sources (``registry.RGB``) and the label layout.
    size : int in 8..4096 (:data:`MAX_SIZE`)
        Side in pixels.
    n : int >= 0
        Images per split; ``n * size * size * channels`` at most :data:`MAX_BYTES` (4 GiB).

    Returns
    -------
    dict of str to ndarray
        ``{split}_images``: uint8, shape (n, size, size, 3) for RGB datasets, (n, size, size)
        for gray ones; ``{split}_labels``: uint8, shape (n, 1) (class ``i % n_classes``) or
        (n, 14) binary for chestmnist; for split in train, val, test (the same arrays).

    Raises
    ------
    TypeError
        ``dataset`` not a str; ``n`` or ``size`` not an int.
    ValueError
        Unknown dataset (the pathology suite keys included: the sample has no labels for them),
        ``n`` negative, ``size`` outside 8..4096, the images larger than 4 GiB
        (:data:`MAX_BYTES`).
    FileNotFoundError
        As in :func:`source_images` (a pydicom older than :data:`MIN_PYDICOM`).
    """
    if not isinstance(dataset, str):
        raise TypeError(f"dataset must be a str, one of: {', '.join(registry.DATASETS)}; "
                        f"got {type(dataset).__name__}")
    if dataset not in registry.DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; valid: {', '.join(registry.DATASETS)}")
    images = sample_images(n, size, registry.RGB[dataset])
    # chestmnist's 14 columns are binary findings; the others hold one class index.
    n_values = 2 if N_LABELS[dataset] > 1 else registry.N_CLASSES[dataset]
    labels = (np.arange(n)[:, None] + np.arange(N_LABELS[dataset])[None, :]) % n_values
    labels = labels.astype(np.uint8)
    return {f"{split}_{kind}": (images if kind == "images" else labels)
            for split in ("train", "val", "test") for kind in ("images", "labels")}
