"""Numba compilation flags, in one place.

Kernels compile lazily on first call (never at import) and are cached on disk
(``cache=True``); ``nogil=True`` lets :func:`medmnistc_fast.corrupt_batch` run them in
parallel threads.
"""
NJIT = dict(nogil=True, cache=True, fastmath=False, boundscheck=False)
