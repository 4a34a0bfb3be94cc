"""Digital corruptions: pixelation (C++ reimplementation of Pillow's BOX resize) and JPEG
compression (Pillow); both bit-exact with the reference.

References: reference classes ``Pixelate`` and ``JPEGCompression`` in
``medmnistc/corruptions/compression.py`` (medmnistc 0.1.0).
"""
from __future__ import annotations

import io
import os
import re
import threading
import weakref

import numpy as np
import PIL
from PIL import Image

from .. import _native
from ._spec import Kind

__all__ = ["PIXELATE", "JPEG_COMPRESSION", "to_pil", "from_pil", "pil_from_buffer"]

#: Whether pixels are read through Pillow's Arrow export (``Image.__arrow_c_array__``). Only
#: from Pillow 13: 11.2 to 12.1 have the export but crash the process (segmentation fault)
#: inside it on an image whose core maps a buffer, such as "L" images of ``Image.fromarray``
#: and the images of :func:`pil_from_buffer` (checked with 11.2.1, 11.3.0, 12.0.0 and 12.1.0;
#: 13.0.0 exports them correctly). Without it the pixels come from ``tobytes``.
USE_ARROW = tuple(int(p) for p in re.findall(r"\d+", PIL.__version__)[:2]) >= (13, 0)


def to_pil(image: np.ndarray) -> Image.Image:
    """(H, W, 1) -> Pillow "L", (H, W, 3) -> "RGB" (values unchanged; "L" maps ``image``'s
    memory read-only, see :func:`pil_from_buffer`)."""
    c = image.shape[2]
    if c == 1 and image.flags.c_contiguous:
        return pil_from_buffer(image, "L")
    return Image.fromarray(image[:, :, 0] if c == 1 else image)


def from_pil(pil: Image.Image, channels: int) -> np.ndarray:
    """Pillow image (8-bit "L" or "RGB") -> new C-contiguous uint8 (H, W, channels).

    Read through the image's Arrow export (``Image.__arrow_c_array__``, Pillow >= 13, see
    :data:`USE_ARROW`: one copy in C++, ``_native.pil_pixels``) when it has the expected layout,
    else with ``np.array``; both give the bytes of ``pil.tobytes()`` (``np.array`` goes through
    ``tobytes`` and copies again: 6 us instead of 2.5 at 224 x 224 gray, 25 instead of 5.5 for
    RGB).
    """
    arr = _arrow_pixels(pil)
    if arr is None:
        arr = np.array(pil)  # a writable copy; the image is 8-bit L or RGB
    h, w = arr.shape[0], arr.shape[1]
    return arr if arr.ndim == 3 and arr.shape[2] == channels else arr.reshape(h, w, channels)


def _arrow_pixels(pil: Image.Image):
    """New uint8 (H, W, 1 or 3) pixels of an "L" or "RGB" image read through its Arrow export,
    or None when the export is missing, unsafe (:data:`USE_ARROW`), fails or has another
    layout."""
    w, h = pil.size
    export = getattr(pil, "__arrow_c_array__", None) if USE_ARROW else None
    if export is None or h <= 0 or w <= 0 or pil.mode not in ("L", "RGB"):
        return None
    try:
        capsules = export()
    except (ValueError, TypeError, NotImplementedError):  # e.g. rows not contiguous
        return None
    return _native.pil_pixels(capsules[0], capsules[1], h, w, 1 if pil.mode == "L" else 3)


def pil_from_buffer(arr: np.ndarray, mode: str) -> Image.Image:
    """A PIL image of mode "L" or "RGB" with the pixels of ``arr``.

    ``arr``: C-contiguous uint8, (H, W[, 1]) for "L" (a read-only image mapping ``arr``'s
    memory, no copy; writes to the image go to a private copy, never to ``arr``, except
    ``Image.frombytes``, which writes into the mapped memory as on ``frombuffer``'s) or
    (H, W, 3) for "RGB" (a writable image on a private copy: Pillow stores RGB in 4 bytes per
    pixel). The image is ``Image.frombuffer(mode, size, arr, "raw", mode, 0, 1)``'s, built
    faster by :func:`_map_gray` / :func:`_map_rgb` when that construction passed its check
    against ``frombuffer`` in this process (:func:`_fast_ok`): at 224 x 224 about 1.8 us
    instead of 3.1 (L) and 6 instead of 23 (RGB), and ``np.asarray`` of the image 3 us instead
    of 6 (L) and about 10 instead of 24 (RGB).
    """
    size = (arr.shape[1], arr.shape[0])
    if mode == "L" and _fast_ok("L"):
        return _map_gray(arr, size)
    if mode == "RGB" and _fast_ok("RGB"):
        return _map_rgb(arr, size)
    return Image.frombuffer(mode, size, arr, "raw", mode, 0, 1)


def _mapped_image(core, mode: str, size: tuple, readonly: int) -> Image.Image:
    # As Image._new sets a new image on a core (im, _mode, _size), plus the read-only flag.
    im = Image.Image()
    im.im = core
    im._mode = mode
    im._size = size
    im.readonly = readonly
    return im


def _map_gray(arr: np.ndarray, size: tuple) -> Image.Image:
    """``Image.frombuffer("L", size, arr, "raw", "L", 0, 1)`` without its detours.

    ``frombuffer`` maps the buffer with ``Image.core.map_buffer(arr, size, "raw", 0,
    ("L", 0, 1))`` and wraps it as ``Image.new("L", (0, 0))._new(core)`` marked read-only: two
    throw-away images and a copied ``info``. Here the mapped core goes into one new image, set
    as ``Image._new`` sets it (``im``, ``_mode``, ``_size``) plus ``readonly = 1``. Only used
    after :func:`_fast_ok` checked it against ``frombuffer`` (Pillow internals can change).

    The image also gets an instance ``tobytes`` (:class:`_FastBytes`): while the image still
    holds the mapped core, its raw "L" bytes are the bytes of ``arr`` (the core's memory *is*
    ``arr``'s), which ``arr.tobytes()`` copies in one memcpy instead of Pillow's raw encoder
    (1.1 us instead of 4.2 at 224 x 224). ``np.asarray(image)`` reads the pixels through
    ``Image.__array_interface__``, which calls ``self.tobytes()``.
    """
    core = Image.core.map_buffer(arr, size, "raw", 0, ("L", 0, 1))
    im = _mapped_image(core, "L", size, 1)
    im.tobytes = _FastBytes(im, core, arr)
    return im


def _map_rgb(arr: np.ndarray, size: tuple) -> Image.Image:
    """``Image.frombuffer("RGB", size, arr, "raw", "RGB", 0, 1)`` (an image on a private copy)
    without Pillow's Python-driven unpacking.

    The copy is made in Pillow's own layout, 4 bytes per pixel with a padding byte 255
    (``_native.rgbx_pixels``), and mapped as an "RGB" core (``Image.core.map_buffer`` with a
    4-byte stride); the buffer is writable and referenced by the image only, so the image owns
    it as an image from ``frombuffer`` owns its memory (writable, ``readonly`` 0). Its instance
    ``tobytes`` (:class:`_FastBytes`) packs the raw "RGB" bytes from the image's current pixels
    through the Arrow export (:func:`_arrow_pixels`, about 9 us instead of 22 at 224 x 224). Only
    used after :func:`_fast_ok` checked it against ``frombuffer``.
    """
    core = Image.core.map_buffer(_native.rgbx_pixels(arr), size, "raw", 0, ("RGB", 0, 1))
    im = _mapped_image(core, "RGB", size, 0)
    im.tobytes = _FastBytes(im, core, None)
    return im


class _FastBytes:
    """``Image.tobytes`` of an image made by :func:`_map_gray` or :func:`_map_rgb`.

    For the raw encoding in the image's own mode (``tobytes()``, ``tobytes("raw")``,
    ``tobytes("raw", mode)``): "L" while the image still holds the core mapped on ``arr``,
    ``arr.tobytes()``; "RGB", the pixels read through the Arrow export (:func:`_arrow_pixels`). In
    every other case (other encoder or raw mode; an "L" image that copied its pixels on a write,
    ``Image._ensure_mutable`` replacing the core; no usable Arrow export) Pillow's own
    ``Image.tobytes``.

    It must keep working after the image is gone, as Pillow's bound method does:
    ``f(x).tobytes()`` looks the attribute up and drops the last reference to the temporary image
    *before* the call (CPython's method-call opcodes), and ``fn = image.tobytes`` may outlive
    ``image``. So it holds the image's ``__dict__`` (its pixels, mode, size, info: the whole
    state) and the image by a weak reference; when the image dies, the reference's callback
    (run before the dict is cleared) removes this object from that dict, which breaks the
    dict -> this -> dict cycle (everything is freed by reference counting, no ``gc`` needed), and
    a later call reads a plain ``Image`` rebuilt from the kept state.
    """

    __slots__ = ("_image", "_state", "_core", "_arr")

    def __init__(self, image: Image.Image, core, arr):
        state = vars(image)
        self._state = state
        self._image = weakref.ref(image, lambda _ref, state=state: state.pop("tobytes", None))
        self._core = core
        self._arr = arr

    def __call__(self, encoder_name: str = "raw", *args) -> bytes:
        image = self._image()
        if image is None:  # the image died after its tobytes was looked up: its final state
            image = Image.Image.__new__(Image.Image)
            vars(image).update(self._state)
            vars(image).pop("tobytes", None)
        mode = image.mode
        if encoder_name == "raw" and (not args or args == (mode,) or args == ((mode,),)):
            if self._arr is not None:
                if image._im is self._core:
                    return self._arr.tobytes()
            elif mode == "RGB":
                pixels = _arrow_pixels(image)  # not from_pil: its fallback calls tobytes
                if pixels is not None:
                    return pixels.tobytes()
        return Image.Image.tobytes(image, encoder_name, *args)


_FAST: dict = {}


def _fast_ok(mode: str) -> bool:
    """Whether :func:`_map_gray` ("L") / :func:`_map_rgb` ("RGB") give the image
    ``Image.frombuffer`` gives, checked once per process on a small array: attributes, mode,
    size, read-only flag, info, bytes (raw, and "RGBX" for RGB), ``np.asarray``, and a write
    reaching the image but never the array. False on any difference or error."""
    ok = _FAST.get(mode)
    if ok is None:
        try:
            c = 1 if mode == "L" else 3
            arr = np.arange(5 * 7 * c, dtype=np.uint8).reshape(5, 7, c) * np.uint8(7)
            keep = arr.copy()
            want = Image.frombuffer(mode, (7, 5), arr, "raw", mode, 0, 1)
            got = (_map_gray if mode == "L" else _map_rgb)(arr, (7, 5))
            shown = arr[:, :, 0] if c == 1 else arr
            ok = (type(got) is type(want)
                  and set(vars(got)) == set(vars(want)) | {"tobytes"}
                  and (got.mode, got.size, got.readonly, got.info, got.palette)
                  == (want.mode, want.size, want.readonly, want.info, want.palette)
                  and got.tobytes() == want.tobytes() == Image.Image.tobytes(got)
                  and (c == 1 or got.tobytes("raw", "RGBX") == want.tobytes("raw", "RGBX"))
                  and np.array_equal(np.asarray(got), shown))
            if ok:
                value = 200 if c == 1 else (200, 1, 2)
                got.putpixel((0, 0), value)
                ok = (np.array_equal(arr, keep) and got.getpixel((0, 0)) == value
                      and got.tobytes() == Image.Image.tobytes(got)
                      and np.array_equal(np.asarray(got)[0, 0], value))
        except Exception:  # noqa: BLE001 - any failure means: use Image.frombuffer
            ok = False
        _FAST[mode] = ok = bool(ok)
    return ok


def _sample_pixelate(param, ctx) -> dict:
    return {"factor": float(param)}


def _pixelate_kernel(image, *, factor):
    """BOX-downsample to ``(max(1, int(W * factor)), max(1, int(H * factor)))`` and BOX-upsample
    back, as two Pillow ``Image.resize(..., Image.BOX)`` calls (the reference's ``Pixelate``).

    Computed by the C++ kernel ``_native.pixelate``, which reproduces Pillow's 8-bit BOX
    resampling bit for bit (tests/test_resample.py checks it against Pillow). The ``max(1, ...)``
    guard only acts where the reference would fail (a zero side)."""
    h, w, _ = image.shape
    return _native.pixelate(image, max(1, int(w * factor)), max(1, int(h * factor)))


def _sample_quality(param, ctx) -> dict:
    return {"quality": int(param)}


_JPEG_SINKS = threading.local()


def _jpeg_encode(pil: Image.Image, quality: int):
    """Pillow's JPEG encoding of ``pil`` at ``quality`` (a bytes-like object).

    Pillow's encoder holds the GIL while it writes into an in-memory buffer (``io.BytesIO``)
    but releases it while it writes to a file descriptor (its ``encode_to_file`` path). So
    threads other than the main one (``corrupt_batch`` with several threads, the caller's own
    thread pools) encode into a per-thread anonymous memory file (``os.memfd_create``, Linux)
    and read the bytes back (BytesIO where none can be created). 2 threads against 1 on
    512-image batches: 224 px RGB 1.1-1.3x through BytesIO (only the decoder ran in
    parallel), 1.6-1.7x this way; 96 px 1.0x and 1.3x. The main thread keeps BytesIO, about
    3 % cheaper alone. Same encoder, same bytes either way (tests/test_color_digital.py).
    """
    sink = None
    # A forked child never writes into its parent's file: the thread that forked is the
    # child's main thread (BytesIO), and threads the child starts have their own storage.
    if threading.current_thread() is not threading.main_thread() and _HAS_MEMFD:
        sink = getattr(_JPEG_SINKS, "file", None)
        if sink is None:
            try:
                sink = _MemoryFile(os.memfd_create("medmnistc_fast-jpeg", os.MFD_CLOEXEC), "w+b")
            except OSError:
                # EMFILE (the process at its open-file limit), ENOSYS (kernels before 3.17,
                # sandboxes): BytesIO, which needs no descriptor; tried again next call.
                sink = None
            else:
                _JPEG_SINKS.file = sink
    if sink is None:
        buf = io.BytesIO()
        pil.save(buf, format="JPEG", quality=quality)
        return buf.getbuffer()
    sink.seek(0)
    pil.save(sink, format="JPEG", quality=quality)
    size = sink.tell()
    data = os.pread(sink.fileno(), size, 0)
    if size > _MEMORY_FILE_KEEP:  # a huge image's JPEG is not kept for the thread's life
        sink.truncate(0)
    return data


_HAS_MEMFD = hasattr(os, "memfd_create")
#: Bytes a thread's memory file keeps between calls (a 224 px JPEG is 5-60 KB).
_MEMORY_FILE_KEEP = 1 << 20


class _MemoryFile(io.FileIO):
    """An unbuffered file on a memfd, closed when its thread's storage lets it go (at thread
    exit) instead of warning that it was left open."""

    def __del__(self):
        self.close()


#: Longest image side libjpeg encodes (``JPEG_MAX_DIMENSION`` in libjpeg-turbo's jmorecfg.h);
#: Pillow fails past it with an OSError ("broken data stream").
JPEG_MAX_SIDE = 65_500


def _jpeg_kernel(image, *, quality):
    """Pillow JPEG encode at ``quality`` (Pillow defaults: 4:2:0 chroma subsampling for RGB),
    then decode.

    An RGB image is handed to Pillow as an "RGBX" image mapped on a padded copy
    (``_native.rgbx_pixels``, Pillow's own 4-byte layout): libjpeg receives the same R, G, B
    samples as from ``Image.fromarray`` and writes the same bytes (tests/test_color_digital.py),
    without ``Image.fromarray``'s array-interface round trip and unpacking (about 25 us at
    224 x 224). The decode goes straight to Pillow's JPEG decoder
    (``Image.frombytes(..., "jpeg", ...)``) instead of ``Image.open``, which would first parse the
    markers in Python; the pixels are the same libjpeg output.

    Sides must be at most :data:`JPEG_MAX_SIDE` (65,500 px): the callers check it
    (``Kind.check_side``).
    """
    h, w, c = image.shape
    if c == 3:
        pil = Image.frombuffer("RGBX", (w, h), _native.rgbx_pixels(image), "raw", "RGBX", 0, 1)
        mode = "RGB"
    else:
        pil = to_pil(image)
        mode = pil.mode
    encoded = _jpeg_encode(pil, int(quality))
    decoded = Image.frombytes(mode, (w, h), encoded, "jpeg", mode, "")
    return from_pil(decoded, c)


#: ``pixelate`` (reference ``Pixelate``, ``corruptions/compression.py``): the table's resize
#: factor, unscaled (a fraction of the side).
PIXELATE = Kind("pixelate", _sample_pixelate, _pixelate_kernel, random=False)
#: ``jpeg_compression`` (reference ``JPEGCompression``): the table's Pillow JPEG quality;
#: sides up to :data:`JPEG_MAX_SIDE`.
JPEG_COMPRESSION = Kind("jpeg_compression", _sample_quality, _jpeg_kernel, random=False,
                        max_side=JPEG_MAX_SIDE)
