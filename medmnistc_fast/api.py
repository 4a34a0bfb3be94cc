"""The public corruption API: ``corruptions``, ``corrupt``, ``corrupt_batch`` and thread control."""
from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from . import registry, rng
from ._cpus import available_cpus
from ._validation import (_is_int, as_hwc, as_nhwc, check_corruption, check_dataset,
                          check_nonneg_int, check_seed, check_severity, parse_decimal,
                          reject_masked)
from .corruptions import kind_of
from .corruptions._spec import Context

__all__ = ["corruptions", "severity_table", "corrupt", "corrupt_batch", "set_num_threads",
           "get_num_threads"]

_ENV_THREADS = "MEDMNISTC_FAST_NUM_THREADS"
#: Image indices (``index``, ``start + i``) must stay below this (keys are built in uint64).
MAX_INDEX = 2**63
#: Images with fewer pixels run on one thread unless ``num_threads`` is given (see
#: :func:`corrupt_batch`).
_MIN_THREADED_PIXELS = 96 * 96
_state = {"threads": None}
_pool_state = {"executor": None, "size": 0}
_pool_lock = threading.Lock()


def corruptions(dataset: str) -> tuple:
    """The corruptions defined for ``dataset``, in the reference's order.

    Parameters
    ----------
    dataset : str
        One of :data:`medmnistc_fast.DATASETS` or :data:`medmnistc_fast.PATHOLOGY_SUITES`
        (``"pathology96"``, ``"pathology224"``: the nine corruptions of Zhang et al., MICCAI
        2022, arXiv:2206.14973, in that paper's order).

    Returns
    -------
    tuple of str

    Raises
    ------
    ValueError, TypeError
        Unknown or non-string ``dataset``.
    """
    return tuple(registry.TABLES[check_dataset(dataset)])


def severity_table(dataset: str, corruption: str) -> tuple:
    """The five parameter values of ``corruption`` on ``dataset`` (level 1 first).

    Parameters
    ----------
    dataset : str
        One of :data:`medmnistc_fast.DATASETS` or :data:`medmnistc_fast.PATHOLOGY_SUITES`.
    corruption : str
        One of ``corruptions(dataset)``.

    Returns
    -------
    tuple
        Five entries, a number or a tuple each; units per corruption in
        :mod:`medmnistc_fast.registry` (pixel sizes are for 224 px, or 96 / 224 px for the
        pathology suite, and scale with the image). For the 12 MedMNIST-C datasets, the first
        five entries of the reference's ``CORRUPTIONS_DS`` table
        (``medmnistc/corruptions/registry.py``, medmnistc 0.1.0); for the pathology suites,
        the tables of Zhang et al., MICCAI 2022, arXiv:2206.14973 (sources per entry in
        :mod:`medmnistc_fast.registry`).

    Raises
    ------
    TypeError
        ``dataset`` or ``corruption`` not a str.
    ValueError
        Unknown dataset, or a corruption not defined for it (the message lists the valid ones).
    """
    dataset = check_dataset(dataset)
    return registry.TABLES[dataset][check_corruption(dataset, corruption)]


def set_num_threads(n: int | None) -> None:
    """Set the number of threads :func:`corrupt_batch` uses by default.

    Parameters
    ----------
    n : int in 1..1024 (``MAX_THREADS``), or None
        None restores the default: the environment variable ``MEDMNISTC_FAST_NUM_THREADS`` if
        set, else the CPUs this process may use (its affinity mask, capped by a container's
        cgroup CPU quota).

    Raises
    ------
    TypeError
        ``n`` not an int (bools included) or None.
    ValueError
        ``n`` below 1 or above 1024.
    """
    _state["threads"] = None if n is None else _check_threads(n, "n of set_num_threads")


def get_num_threads() -> int:
    """The number of threads :func:`corrupt_batch` uses when ``num_threads`` is not given.

    Returns
    -------
    int in 1..1024
        The value of :func:`set_num_threads`, else the environment variable
        ``MEDMNISTC_FAST_NUM_THREADS``, else the CPUs this process may use (its affinity
        mask, capped by a container's cgroup CPU quota; at most 1024). (``corrupt_batch`` still runs
        images of fewer than 96 x 96 = 9,216 pixels (H * W) on one thread unless
        ``num_threads`` is given.)

    Raises
    ------
    ValueError
        ``MEDMNISTC_FAST_NUM_THREADS`` is set to something other than an int in 1..1024.
    """
    if _state["threads"] is not None:
        return _state["threads"]
    env = os.environ.get(_ENV_THREADS)
    if env:
        try:
            value = parse_decimal(env)  # "1_0" and "\u0663" are not thread counts
            if value is None:
                raise ValueError
            return _check_threads(value)
        except ValueError:
            raise ValueError(f"environment variable {_ENV_THREADS} must be an int in "
                             f"1..{MAX_THREADS}; got {env!r}") from None
    return min(available_cpus(), MAX_THREADS)


#: Upper bound on a thread count: far above any CPU's core count, and low enough that a typo
#: (10**6) is refused instead of starting that many threads.
MAX_THREADS = 1024


def _check_threads(n, name: str = "num_threads") -> int:
    if not _is_int(n):
        raise TypeError(f"{name} must be an int in 1..{MAX_THREADS}; got {n!r} "
                        f"({type(n).__name__})")
    if not 1 <= int(n) <= MAX_THREADS:
        raise ValueError(f"{name} must be an int in 1..{MAX_THREADS}; got {n!r}")
    return int(n)


def _pool(n: int) -> ThreadPoolExecutor:
    """The process's worker pool, with at least ``n`` threads. A larger request replaces it;
    the old pool is not shut down (a concurrent call may still be submitting to it): its
    threads exit once its last user drops it (``ThreadPoolExecutor`` wakes them when it is
    garbage-collected), so the idle threads kept alive do not exceed the largest
    ``num_threads`` used."""
    with _pool_lock:
        if _pool_state["size"] < n:
            _pool_state["executor"] = ThreadPoolExecutor(max_workers=n,
                                                         thread_name_prefix="medmnistc_fast")
            _pool_state["size"] = n
        return _pool_state["executor"]


def _forget_pool_after_fork() -> None:
    """In a forked child: drop the parent's pool (and renew its lock, which another parent
    thread may have held at the fork). The child has none of the pool's threads, yet the
    executor counted them as idle and queued work that never ran: corrupt_batch and
    AugMedMNISTC.batch hung in a fork-started worker (a DataLoader's, a multiprocessing
    pool's) once the parent had used more than one thread."""
    global _pool_lock
    _pool_lock = threading.Lock()
    _pool_state["executor"] = None
    _pool_state["size"] = 0


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _run_chunks(run, n: int, threads: int) -> None:
    """``run(lo, hi)`` over ``[0, n)`` in ``min(n, 4 * threads)`` contiguous chunks, on at most
    ``threads`` threads (1: in the calling thread). Returns once every thread has stopped; then
    re-raises the exception of the first thread (in start order) that failed, if any."""
    threads = max(1, min(threads, n))
    if threads == 1:
        run(0, n)
        return
    bounds = np.linspace(0, n, min(n, threads * 4) + 1).astype(int)
    chunks = iter(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                chunk = next(chunks, None)
            if chunk is None:
                return
            run(*chunk)

    pool = _pool(threads)
    futures = [pool.submit(worker) for _ in range(threads)]
    wait(futures)  # no thread may still write into the output when an error propagates
    for f in futures:
        f.result()


# _plan's results for arguments of the exact types str, str, int and int or None (bools, numpy
# scalars and str subclasses take the checks every time), except seed=None with a random kind,
# which draws a fresh seed per call. The checks and the key derivation took about 0.7 us of a
# call's 3.7 us of Python; a hit takes about 0.1. Cleared when full (a seed per call).
_PLANS: dict = {}
_PLANS_MAX = 4096


def _plan(dataset, corruption, severity, seed):
    """Validate the names and return (kind, table entry, base key, sampler context).

    Deterministic kinds ignore the key, so they skip deriving it (and drawing OS entropy
    for ``seed=None``).
    """
    exact = (type(dataset) is str and type(corruption) is str and type(severity) is int
             and (seed is None or type(seed) is int))
    if exact:
        hit = _PLANS.get((dataset, corruption, severity, seed))
        if hit is not None:
            return hit
    plan = _plan_checked(dataset, corruption, severity, seed)
    if exact and not (seed is None and plan[0].random):
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[(dataset, corruption, severity, seed)] = plan
    return plan


def _plan_checked(dataset, corruption, severity, seed):
    dataset = check_dataset(dataset)
    corruption = check_corruption(dataset, corruption)
    severity = check_severity(severity)
    seed = check_seed(seed)
    kind = kind_of(dataset, corruption)
    param = registry.TABLES[dataset][corruption][severity - 1]
    ctx = (severity, registry.REFERENCE_SIZES[dataset])
    if not kind.random:
        return kind, param, 0, ctx
    if seed is None:
        seed = rng.fresh_seed()
    return kind, param, rng.base_key(seed, dataset, corruption, severity), ctx


def sample_values(kind, param, ctx, shape, key) -> dict:
    """The kernel's explicit keyword values for one image (``kind.sample``), a new dict.

    ``ctx`` is the ``(severity, reference_size)`` pair from ``_plan``. A deterministic kind's
    values depend on the shape alone (its key is unused) and are computed once per shape.
    """
    shape = tuple(shape)
    if not kind.random:
        try:
            return dict(_fixed_values(kind, param, ctx, shape))
        except TypeError:  # an unhashable table entry (or a sampler's own TypeError, raised below)
            pass
    return kind.sample(param, Context(shape, int(key), *ctx))


@functools.lru_cache(maxsize=1024)
def _fixed_values(kind, param, ctx, shape) -> dict:
    # Shared by the calls with these arguments: sample_values hands out copies, shallow ones,
    # as every deterministic sampler's values are numbers and tuples.
    return kind.sample(param, Context(shape, 0, *ctx))


def _apply(kind, param, ctx, image_hwc, key) -> np.ndarray:
    return kind.kernel(image_hwc, **sample_values(kind, param, ctx, image_hwc.shape, key))


def corrupt(image, corruption, severity, *, dataset, seed=None, index=0) -> np.ndarray:
    """Corrupt one image as the MedMNIST-C benchmark (or the digital-pathology suite) does.

    Parameters
    ----------
    image : ndarray, shape (H, W), (H, W, 1) or (H, W, 3), uint8
        H, W >= 8 (and <= 65,500 for ``jpeg_compression``). Gray images (1 channel) follow the reference's dataset generation,
        L -> RGB -> corrupt -> L. Read-only and non-contiguous arrays are accepted; the input
        is never modified.
    corruption : str
        One of ``corruptions(dataset)``.
    severity : int
        1..5 (level 1 = first table entry).
    dataset : str
        One of :data:`medmnistc_fast.DATASETS` or :data:`medmnistc_fast.PATHOLOGY_SUITES`
        (``"pathology96"``, ``"pathology224"``); selects the severity table.
    seed : int >= 0 or None
        With an int, the output is a pure function of (seed, dataset, corruption, severity,
        index, pixels). None draws fresh OS entropy.
    index : int in [0, 2**63)
        The image's index in its dataset (part of the random key).

    Returns
    -------
    ndarray, same shape as ``image``, uint8, C-contiguous, newly allocated

    Raises
    ------
    TypeError
        ``image`` not a uint8 ndarray (a masked array included); ``severity``, ``seed``,
        ``index`` not ints (bools and floats included); names not str.
    ValueError
        Bad shape, fewer than 8 pixels a side, 2 or 4+ channels, severity outside 1..5,
        negative seed, ``index`` outside [0, 2**63), unknown dataset or corruption (the
        message lists the valid ones); for ``jpeg_compression``, a side longer than 65,500 px
        (libjpeg's ``JPEG_MAX_DIMENSION``).

    References
    ----------
    F. Di Salvo, S. Doerrich, C. Ledig, "MedMNIST-C", arXiv:2406.17536 (2024); reference
    implementation ``medmnistc`` 0.1.0. Pathology suite: Y. Zhang et al., "Benchmarking the
    Robustness of Deep Neural Networks to Common Corruptions in Digital Pathology", MICCAI 2022,
    arXiv:2206.14973 (:mod:`medmnistc_fast.corruptions.pathology`).
    """
    hwc = as_hwc(image)
    index = check_nonneg_int(index, "index", upper=MAX_INDEX - 1)
    kind, param, base, ctx = _plan(dataset, corruption, severity, seed)
    kind.check_side(hwc.shape, "image")
    key = rng.image_key(base, index) if kind.random else 0
    out = _apply(kind, param, ctx, hwc, key)
    return out.reshape(image.shape)


def corrupt_batch(images, corruption, severity, *, dataset, seed=None, start=0,
                  num_threads=None, out=None) -> np.ndarray:
    """Corrupt a batch; ``out[i]`` equals ``corrupt(images[i], ..., index=start + i)`` bit for bit.

    Parameters
    ----------
    images : ndarray, shape (N, H, W), (N, H, W, 1) or (N, H, W, 3), uint8
        N >= 0; H, W >= 8.
    corruption, severity, dataset, seed
        As in :func:`corrupt`.
    start : int >= 0
        Dataset index of ``images[0]``; ``start + N - 1`` must stay below 2**63.
    num_threads : int in 1..1024 or None
        Threads to spread the images over (kernels release the GIL). None uses
        :func:`get_num_threads`, except for images of fewer than 96 x 96 = 9,216 pixels
        (H * W; a 64 x 200 image has more), which run on one thread: there the per-image
        Python work holds the GIL and a second thread slowed batches down (0.5-1.0x at 28 and
        64 px in benchmarks/RESULTS.md). The result does not depend on it.
    out : ndarray, optional
        Where to write the result: uint8, C-contiguous, writeable, the shape of ``images``, not
        sharing memory with it (reusing one buffer across batches saves mapping fresh pages).

    Returns
    -------
    ndarray, same shape as ``images``, uint8, C-contiguous: ``out`` if given, else newly
    allocated

    Raises
    ------
    TypeError
        As in :func:`corrupt` (for ``images``); ``start`` or ``num_threads`` not an int;
        ``out`` not a uint8 ndarray (a masked array included).
    ValueError
        As in :func:`corrupt` (for ``images``); a 3-D ``images`` whose shape looks like one
        ``(H, W, C)`` image (C in 1, 3, H, W >= 8: add a batch axis); ``start`` negative or
        ``start + N - 1 >= 2**63``; ``num_threads`` outside 1..1024 (or, when it is None and
        :func:`set_num_threads` has not set one, ``MEDMNISTC_FAST_NUM_THREADS`` anything
        else than an int in 1..1024, whatever the image size); ``out`` of another shape,
        not C-contiguous and writeable, or sharing memory with ``images``.
    """
    nhwc = as_nhwc(images)
    start = check_nonneg_int(start, "start", upper=MAX_INDEX - max(1, nhwc.shape[0]))
    if num_threads is None:
        # read (and check) the setting for small images too: a bad MEDMNISTC_FAST_NUM_THREADS
        # used to pass at 28 px and fail only once the images reached 96 x 96
        threads = get_num_threads()
        if nhwc.shape[1] * nhwc.shape[2] < _MIN_THREADED_PIXELS:
            threads = 1
    else:
        threads = _check_threads(num_threads)
    kind, param, base, ctx = _plan(dataset, corruption, severity, seed)
    kind.check_side(nhwc.shape, "images")
    n = nhwc.shape[0]
    result = out
    if out is None:
        out = np.empty_like(nhwc)
    else:
        out = _check_out(out, images, nhwc)
    kernel, shape = kind.kernel, tuple(nhwc.shape[1:])
    if kind.random:
        keys = rng.image_keys(base, np.arange(start, start + n, dtype=np.uint64)).tolist()

        def values(i: int) -> dict:
            return sample_values(kind, param, ctx, shape, keys[i])
    else:
        # A deterministic sampler ignores the key: its values are the same for every image of
        # the batch (one shape), so they are computed once instead of per image.
        fixed = sample_values(kind, param, ctx, shape, 0)

        def values(i: int) -> dict:
            return fixed

    if kind.into:  # the kernel writes into out[i] (no copy, no new array)
        def run(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                kernel(nhwc[i], out=out[i], **values(i))
    else:
        def run(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                out[i] = kernel(nhwc[i], **values(i))

    _run_chunks(run, n, threads)
    return out.reshape(images.shape) if result is None else result


def _check_out(out, images, nhwc: np.ndarray) -> np.ndarray:
    """``out`` of :func:`corrupt_batch` checked, as an (N, H, W, C) view."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray; got {type(out).__name__}")
    # A masked out kept its mask where the kernels write in place (the noises, colour, ...):
    # the result came back fully hidden; elsewhere item assignment cleared it.
    reject_masked(out, "out", why="the result would be written under its mask",
                  want="a plain numpy.ndarray of dtype uint8")
    if out.dtype != np.uint8:
        raise TypeError(f"out must have dtype uint8; got {out.dtype}")
    if out.shape != np.shape(images):
        raise ValueError(f"out must have the shape of images, {np.shape(images)}; got "
                         f"{out.shape}")
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise ValueError("out must be C-contiguous and writeable")
    if np.shares_memory(out, nhwc) or (isinstance(images, np.ndarray)
                                       and np.shares_memory(out, images)):
        raise ValueError("out must not share memory with images")
    return out.reshape(nhwc.shape)
