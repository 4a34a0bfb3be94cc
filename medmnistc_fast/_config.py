"""Numba compilation flags, in one place.

Kernels compile lazily on first call (never at import) and are cached on disk
(``cache=True``) when Numba has somewhere to write: ``NUMBA_CACHE_DIR`` when it is set (Numba
tries it first), else the package's ``__pycache__`` folders or, failing that, the user's cache
folder. Where none is writable (a read-only install run by a user without a writable home),
Numba would refuse to decorate the kernels and the import would fail; the kernels then run
uncached, they compile in every new process, and a :class:`RuntimeWarning` says how to enable
the cache.
``nogil=True`` lets :func:`medmnistc_fast.corrupt_batch` run them in parallel threads.
"""
import warnings

import numba


def _probe():  # pragma: no cover - never called, only decorated
    return 0


def can_cache(func=_probe) -> bool:
    """Whether Numba finds a cache location for ``func``'s source file (decoration only, no
    compilation)."""
    try:
        numba.njit(cache=True)(func)
    except RuntimeError as e:
        if "no locator available" in str(e):
            return False
        raise
    return True


#: Whether the kernels are cached on disk (``cache=True``): :func:`can_cache` at import.
CACHE = can_cache()
if not CACHE:
    warnings.warn("medmnistc_fast: Numba has no writable cache location (the installed package "
                  "folder and the user cache are read-only), so its kernels compile again in "
                  "every process; set NUMBA_CACHE_DIR to a writable folder to cache them",
                  RuntimeWarning, stacklevel=2)

#: Keyword arguments of every ``numba.njit`` kernel: no GIL (threads of corrupt_batch), cached
#: when :data:`CACHE`, no fastmath (IEEE results, as the reference's NumPy arithmetic), no bounds
#: checks (the public functions validate their inputs once).
NJIT = dict(nogil=True, cache=CACHE, fastmath=False, boundscheck=False)
