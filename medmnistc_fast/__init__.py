"""medmnistc_fast: fast, faithful, reproducible MedMNIST-C image corruptions.

Public contract::

    import medmnistc_fast as mf
    mf.DATASETS                                  # the 12 MedMNIST-C dataset names
    mf.corruptions(dataset)                      # its corruptions, in the reference's order
    mf.corrupt(image, corruption, severity, *, dataset, seed=None, index=0)
    mf.corrupt_batch(images, corruption, severity, *, dataset, seed=None, start=0)
    mf.functional.motion_blur(image, radius=15, sigma=5, angle=30)   # explicit parameters
    mf.AugMedMNISTC("pathmnist")                 # training-time augmentation
    mf.CorruptedSet(root, "pathmnist", "bubble") # a generated set, per severity
    medmnistc_fast.evaluate                      # balanced error, BE, rBE, CE, mCE, CEC

Numba kernels compile on first use (cached on disk afterwards); nothing compiles at import.
"""
from . import functional, registry
from ._version import __version__
from .api import (corrupt, corrupt_batch, corruptions, get_num_threads, set_num_threads,
                  severity_table)
from .augment import AugMedMNISTC, AugmentedDataset, EpochSampler
from .datasets import CorruptedSet, TorchCorruptedSet, available_corruptions
from .registry import DATASETS, FOLDS, PATHOLOGY_SUITES

__all__ = ["__version__", "DATASETS", "FOLDS", "PATHOLOGY_SUITES", "corruptions",
           "severity_table", "corrupt", "corrupt_batch", "set_num_threads", "get_num_threads",
           "functional", "registry", "AugMedMNISTC", "AugmentedDataset", "EpochSampler",
           "CorruptedSet", "TorchCorruptedSet", "available_corruptions"]
