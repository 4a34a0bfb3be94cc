"""medmnistc_fast: fast, faithful, reproducible MedMNIST-C image corruptions.

Public contract::

    import medmnistc_fast as mf
    mf.DATASETS                                  # the 12 MedMNIST-C dataset names
    mf.corruptions(dataset)                      # its corruptions, in the reference's order
    mf.corrupt(image, corruption, severity, *, dataset, seed=None, index=0)
    mf.corrupt_batch(images, corruption, severity, *, dataset, seed=None, start=0)
    mf.functional.motion_blur(image, radius=15, sigma=5, angle=30)   # explicit parameters

Numba kernels compile on first use (cached on disk afterwards); nothing compiles at import.
"""
from . import functional, registry
from ._version import __version__
from .api import (corrupt, corrupt_batch, corruptions, get_num_threads, set_num_threads,
                  severity_table)
from .registry import DATASETS, FOLDS

__all__ = ["__version__", "DATASETS", "FOLDS", "corruptions", "severity_table", "corrupt",
           "corrupt_batch", "set_num_threads", "get_num_threads", "functional", "registry"]
