"""Streaming reading and writing of ``.npz`` files (zip archives of ``.npy`` members).

Writing
-------
:class:`NpzWriter` writes an ``.npz`` member by member, each member's bytes appended in order as
they are produced, so an array never has to be held in memory whole. Every byte goes through a
SHA-256 hasher on its way to disk, so the file's checksum is known when it is closed without
reading it back. The archive is a standard zip64 archive that :func:`numpy.load` and any zip tool
read:

- each member has a local header with the data-descriptor flag (bit 3) and a zip64 extra field,
  its data, then a zip64 data descriptor (CRC-32, compressed and uncompressed sizes);
- the central directory always carries zip64 sizes and offsets; a zip64 end record is written
  only when the archive needs it;
- every field that could vary between runs is fixed (timestamp 1980-01-01 00:00:00, Unix
  attributes ``-rw-r--r--``, no comment), so equal arrays give byte-identical files.

Members are either ``ZIP_STORED`` (the default of :mod:`medmnistc_fast.generate`) or
``ZIP_DEFLATED``. A deflated member is built from independently compressed raw-deflate
*segments*, each ending with a ``Z_SYNC_FLUSH`` (byte aligned, not final), closed by an empty
final block; segment boundaries are fixed by the data (the ``.npy`` header, then one segment per
image), never by how the work was split, so compressed bytes are independent of chunking and
worker count. Segments can be compressed in worker processes (:func:`deflate_segments`) and the
CRC-32 of the uncompressed bytes assembled with :func:`crc32_combine`.

Reading
-------
:func:`inspect_npz` lists the ``.npy`` members of an archive with their header (shape, dtype,
order), compression and, for stored members, the absolute file offset of the array data, so the
data can be read in slices with plain ``pread`` (no memory map, so resident memory stays
bounded) or streamed out of a deflated member with :func:`copy_member_data`.
"""
from __future__ import annotations

import hashlib
import io
import os
import struct
import zipfile
import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

try:
    # ISA-L (python-isal) through its zlib-compatible interface: the same CRC-32 values and
    # the same inflated bytes as zlib (tested against it); its CRC-32 is about ten times and
    # its inflate about twice as fast, which matters when every output byte of a run is
    # checksummed and a whole input split is unpacked before the workers can start.
    from isal import isal_zlib as _zlib_fast
except ImportError:  # pragma: no cover - platforms without an isal wheel
    _zlib_fast = zlib

crc32 = _zlib_fast.crc32

__all__ = ["NpzWriter", "MemberInfo", "inspect_npz", "read_member_array", "copy_member_data",
           "npy_header_bytes", "deflate_segments", "crc32_combine", "crc32", "DEFLATE_LEVEL"]

#: zlib level of compressed members (level 1: the fastest; see generate.py for measurements).
DEFLATE_LEVEL = 1

_DOS_TIME, _DOS_DATE = 0, (0 << 9) | (1 << 5) | 1          # 1980-01-01 00:00:00
_VERSION = 45                                             # zip64 needs "4.5"
_MADE_BY = (3 << 8) | _VERSION                            # Unix
_EXTERNAL_ATTR = (0o100644 << 16)                         # regular file, rw-r--r--
_FLAGS = 0x0008                                           # sizes and CRC in a data descriptor
_U32 = 0xFFFFFFFF
_READBACK = 8 << 20
_EMPTY_FINAL_BLOCK = zlib.compressobj(DEFLATE_LEVEL, zlib.DEFLATED, -15).flush()


# --------------------------------------------------------------------------------------- CRC-32
def _gf2_times(mat, vec: int) -> int:
    s, i = 0, 0
    while vec:
        if vec & 1:
            s ^= mat[i]
        vec >>= 1
        i += 1
    return s


def _gf2_mul(a, b):
    """The operator ``a`` after ``b`` (both 32 x 32 matrices over GF(2), as column lists)."""
    return tuple(_gf2_times(a, col) for col in b)


@lru_cache(maxsize=None)
def _zeros_operator_pow2(k: int):
    """Operator appending 2**k zero bytes to a CRC-32 register."""
    if k == 0:
        one_bit = (0xEDB88320,) + tuple(1 << n for n in range(31))   # one zero bit
        op = one_bit
        for _ in range(3):                                            # 8 bits
            op = _gf2_mul(op, op)
        return op
    half = _zeros_operator_pow2(k - 1)
    return _gf2_mul(half, half)


@lru_cache(maxsize=256)
def _zeros_operator(n: int):
    op = tuple(1 << i for i in range(32))                             # identity
    k = 0
    while n:
        if n & 1:
            op = _gf2_mul(_zeros_operator_pow2(k), op)
        n >>= 1
        k += 1
    return op


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of ``A + B`` from ``crc1 = crc32(A)``, ``crc2 = crc32(B)`` and ``len2 = len(B)``.

    The zlib algorithm (``crc32_combine``), which the :mod:`zlib` module does not expose;
    operators are cached per length, so combining equal-sized chunks costs microseconds.
    """
    if len2 <= 0:
        return crc1
    return _gf2_times(_zeros_operator(int(len2)), crc1) ^ crc2


# ---------------------------------------------------------------------------------- .npy headers
def npy_header_bytes(shape, dtype) -> bytes:
    """The ``.npy`` header (magic, version 1.0 or 2.0, padded dict) for a C-order array."""
    d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
         "shape": tuple(int(s) for s in shape)}
    buf = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(buf, d)
    except ValueError:  # header longer than 65535 bytes: only for absurd shapes
        buf = io.BytesIO()
        np.lib.format.write_array_header_2_0(buf, d)
    return buf.getvalue()


def deflate_segments(arr: np.ndarray, level: int = DEFLATE_LEVEL) -> bytes:
    """Raw-deflate each ``arr[i]`` independently (sync-flushed, not final); concatenated.

    Parameters
    ----------
    arr : ndarray, shape (N, ...), C-contiguous
    level : int, zlib level 0..9

    Returns
    -------
    bytes
        A deflate stream fragment: append more fragments, then the empty final block that
        :meth:`NpzWriter.end_member` writes.
    """
    out = []
    for row in arr:
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        out.append(c.compress(memoryview(np.ascontiguousarray(row)).cast("B")))
        out.append(c.flush(zlib.Z_SYNC_FLUSH))
    return b"".join(out)


def _deflate_one(data: bytes, level: int = DEFLATE_LEVEL) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)


# ---------------------------------------------------------------------------------------- writer
class NpzWriter:
    """Write an ``.npz`` archive member by member, streaming, with a running SHA-256.

    Parameters
    ----------
    fileobj : binary file opened for writing (positioned at 0)
        The writer appends; it seeks only in :meth:`adopt` (which also reads).

    Notes
    -----
    Usage: ``begin_member(name, shape, dtype, compress)``, then the array's C-order bytes via
    :meth:`write` (uncompressed bytes; compressed here when the member is deflated),
    :meth:`write_chunk` (stored bytes or segments made by :func:`deflate_segments`, with their
    CRC-32) or :meth:`adopt` (stored bytes another process wrote at their offset), then
    :meth:`end_member`; :meth:`add_array` does the three for a small array. :meth:`close`
    writes the central directory and returns ``(sha256 hex, size in bytes)``. The caller owns
    ``fileobj`` (flush, fsync and close it).
    """

    def __init__(self, fileobj):
        self._f = fileobj
        self._sha = hashlib.sha256()
        self._pos = 0
        self._entries = []
        self._cur = None
        self._closed = False
        self._buf = None

    # low level -------------------------------------------------------------------------------
    def _out(self, data) -> None:
        mv = memoryview(data)
        if mv.ndim != 1 or mv.format != "B":
            mv = mv.cast("B")
        self._sha.update(mv)
        self._f.write(mv)
        self._pos += mv.nbytes

    # members -------------------------------------------------------------------------------
    def begin_member(self, name: str, shape, dtype, compress: bool = False) -> None:
        """Start member ``{name}.npy`` for a C-order array of ``shape`` and ``dtype``."""
        if self._cur is not None:
            raise RuntimeError("previous member not ended")
        fname = (name + ".npy").encode("ascii")
        method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        header = npy_header_bytes(shape, dtype)
        expected = len(header) + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        extra = struct.pack("<HHQQ", 1, 16, 0, 0)
        self._cur = {"name": fname, "method": method, "offset": self._pos, "crc": 0,
                     "raw": 0, "comp": 0, "expected": expected}
        self._out(struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", _VERSION, 0, _FLAGS, method,
                              _DOS_TIME, _DOS_DATE, 0, _U32, _U32, len(fname), len(extra)))
        self._out(fname)
        self._out(extra)
        if compress:
            self.write_deflated(_deflate_one(header), crc32(header), len(header))
        else:
            self.write(header)

    def write(self, data) -> None:
        """Append uncompressed bytes (a bytes-like object or C-contiguous array)."""
        cur = self._cur
        mv = memoryview(data)
        if mv.ndim != 1 or mv.format != "B":
            mv = mv.cast("B")
        if cur["method"] == zipfile.ZIP_DEFLATED:
            self.write_deflated(_deflate_one(mv), crc32(mv), mv.nbytes)
            return
        cur["crc"] = crc32(mv, cur["crc"])
        cur["raw"] += mv.nbytes
        cur["comp"] += mv.nbytes
        self._out(mv)

    def write_deflated(self, payload, crc: int, raw_len: int) -> None:
        """Append deflate segments ``payload`` that encode ``raw_len`` bytes with CRC ``crc``."""
        cur = self._cur
        if cur["method"] != zipfile.ZIP_DEFLATED:
            raise RuntimeError("member is not deflated")
        cur["crc"] = crc32_combine(cur["crc"], crc, raw_len)
        cur["raw"] += raw_len
        mv = memoryview(payload)
        cur["comp"] += mv.nbytes
        self._out(mv)

    def write_chunk(self, payload, crc: int, raw_len: int) -> None:
        """Append a chunk given as stored bytes or deflate segments (per the member's method)."""
        if self._cur["method"] == zipfile.ZIP_DEFLATED:
            self.write_deflated(payload, crc, raw_len)
        else:
            cur = self._cur
            mv = memoryview(payload)
            if mv.ndim != 1 or mv.format != "B":
                mv = mv.cast("B")
            if mv.nbytes != raw_len:
                raise ValueError("stored chunk length differs from raw_len")
            cur["crc"] = crc32_combine(cur["crc"], crc, raw_len)
            cur["raw"] += raw_len
            cur["comp"] += raw_len
            self._out(mv)

    @property
    def position(self) -> int:
        """Bytes written so far (the file offset where the next byte goes)."""
        return self._pos

    def adopt(self, nbytes: int, crc: int) -> None:
        """Account for ``nbytes`` of a stored member that another process already wrote.

        Worker processes may ``pwrite`` chunks of a stored member straight into the file at
        ``position + offset``; the writer then reads them back in order (from the page cache)
        to keep its running SHA-256, combines their CRC-32 ``crc`` and moves on. Needs the file
        opened readable and seekable (``"w+b"``).
        """
        cur = self._cur
        if cur["method"] != zipfile.ZIP_STORED:
            raise RuntimeError("only stored members can be written by other processes")
        f = self._f
        f.flush()
        if self._buf is None or len(self._buf) < min(nbytes, _READBACK):
            self._buf = bytearray(min(nbytes, _READBACK))
        view = memoryview(self._buf)
        pos, left = self._pos, nbytes
        f.seek(pos)
        while left:
            k = f.readinto(view[:min(left, len(view))])
            if not k:
                raise OSError(f"{getattr(f, 'name', 'file')}: chunk at {pos} is missing")
            self._sha.update(view[:k])
            pos += k
            left -= k
        cur["crc"] = crc32_combine(cur["crc"], crc, nbytes)
        cur["raw"] += nbytes
        cur["comp"] += nbytes
        self._pos = pos
        self._f.seek(pos)

    def end_member(self) -> None:
        """Finish the current member (checks that exactly the declared bytes were written)."""
        cur = self._cur
        if cur["raw"] != cur["expected"]:
            raise RuntimeError(f"member {cur['name'].decode()} got {cur['raw']} bytes; "
                               f"expected {cur['expected']}")
        if cur["method"] == zipfile.ZIP_DEFLATED:
            self._out(_EMPTY_FINAL_BLOCK)
            cur["comp"] += len(_EMPTY_FINAL_BLOCK)
        self._out(struct.pack("<4sLQQ", b"PK\x07\x08", cur["crc"], cur["comp"], cur["raw"]))
        self._entries.append(cur)
        self._cur = None

    def add_array(self, name: str, arr: np.ndarray, compress: bool = False) -> None:
        """Write a whole (small) array as member ``name``."""
        arr = np.ascontiguousarray(arr)
        if arr.dtype.hasobject:
            raise TypeError("object arrays cannot be written (allow_pickle=False)")
        self.begin_member(name, arr.shape, arr.dtype, compress)
        if arr.size:
            self.write(arr)
        self.end_member()

    def close(self):
        """Write the central directory; return ``(sha256 hexdigest, total bytes)``."""
        if self._cur is not None:
            raise RuntimeError("member not ended")
        if self._closed:
            raise RuntimeError("already closed")
        cd_start = self._pos
        for e in self._entries:
            extra = struct.pack("<HHQQQ", 1, 24, e["raw"], e["comp"], e["offset"])
            self._out(struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", _MADE_BY & 0xFF, _MADE_BY >> 8,
                                  _VERSION, 0, _FLAGS, e["method"], _DOS_TIME, _DOS_DATE,
                                  e["crc"], _U32, _U32, len(e["name"]), len(extra), 0, 0, 0,
                                  _EXTERNAL_ATTR, _U32))
            self._out(e["name"])
            self._out(extra)
        cd_size = self._pos - cd_start
        n = len(self._entries)
        if n >= 0xFFFF or cd_start >= _U32 or cd_size >= _U32:
            eocd64 = self._pos
            self._out(struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, _MADE_BY, _VERSION, 0, 0,
                                  n, n, cd_size, cd_start))
            self._out(struct.pack("<4sLQL", b"PK\x06\x07", 0, eocd64, 1))
        self._out(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, min(n, 0xFFFF), min(n, 0xFFFF),
                              min(cd_size, _U32), min(cd_start, _U32), 0))
        self._closed = True
        return self._sha.hexdigest(), self._pos


# ---------------------------------------------------------------------------------------- reader
@dataclass(frozen=True)
class MemberInfo:
    """One ``.npy`` member of an ``.npz`` archive.

    Attributes
    ----------
    name : str
        Array name (member name without ``.npy``).
    shape : tuple of int
    dtype : numpy.dtype
    fortran_order : bool
    compressed : bool
        True for a deflated member; False for a stored one.
    header_len : int
        Bytes of the ``.npy`` header inside the member.
    data_offset : int or None
        Absolute file offset of the array's first byte for a stored member; None if deflated.
    file_size : int
        Uncompressed member size in bytes (header + data), from the central directory.
    """

    name: str
    shape: tuple
    dtype: np.dtype
    fortran_order: bool
    compressed: bool
    header_len: int
    data_offset: int | None
    file_size: int
    zinfo: zipfile.ZipInfo

    @property
    def nbytes(self) -> int:
        """Bytes of array data (``prod(shape) * itemsize``)."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _read_npy_header(fp):
    version = np.lib.format.read_magic(fp)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
    else:
        raise ValueError(f"unsupported .npy format version {version}")
    return tuple(int(s) for s in shape), bool(fortran), np.dtype(dtype)


def _member_start(raw, zi: zipfile.ZipInfo, path: str) -> int:
    """Absolute offset of member ``zi``'s (stored or deflated) bytes, from its local header."""
    raw.seek(zi.header_offset)
    local = raw.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise ValueError(f"{path}: bad local header for {zi.filename}")
    n_name, n_extra = struct.unpack("<2H", local[26:30])
    return zi.header_offset + 30 + n_name + n_extra


def inspect_npz(path) -> dict:
    """The ``.npy`` members of the archive at ``path``, keyed by array name.

    Reads only headers (the central directory, local headers and ``.npy`` headers).

    Returns
    -------
    dict of str to MemberInfo

    Raises
    ------
    ValueError
        Not a zip archive (or truncated: the central directory is missing), an unsupported
        compression method, an unreadable ``.npy`` header, or sizes that do not add up.
    OSError
        The file cannot be read.
    """
    path = os.fspath(path)
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path} is not a valid .npz file (truncated or not a zip archive: "
                         f"{exc})") from None
    members = {}
    file_len = os.path.getsize(path)
    with zf, open(path, "rb") as raw:
        for zi in zf.infolist():
            if not zi.filename.endswith(".npy") or zi.is_dir():
                continue
            name = zi.filename[:-4]
            if zi.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise ValueError(f"{path}: member {zi.filename} uses unsupported compression "
                                 f"method {zi.compress_type}")
            try:
                with zf.open(zi) as fp:
                    shape, fortran, dtype = _read_npy_header(fp)
                    header_len = fp.tell()
            except (ValueError, zipfile.BadZipFile, EOFError, OSError, zlib.error,
                    SyntaxError) as exc:
                raise ValueError(f"{path}: member {zi.filename} has no readable .npy header "
                                 f"({exc})") from None
            data_offset = None
            if zi.compress_type == zipfile.ZIP_STORED:
                data_offset = _member_start(raw, zi, path) + header_len
            info = MemberInfo(name, shape, dtype, fortran, zi.compress_type != 0, header_len,
                              data_offset, zi.file_size, zi)
            if not dtype.hasobject and zi.file_size != header_len + info.nbytes:
                raise ValueError(f"{path}: member {zi.filename} holds {zi.file_size} bytes but "
                                 f"its header declares shape {shape} {dtype} "
                                 f"({header_len + info.nbytes} bytes): the file is damaged")
            if data_offset is not None and data_offset + info.nbytes > file_len:
                raise ValueError(f"{path}: member {zi.filename} extends past the end of the "
                                 f"file: the file is truncated")
            members[name] = info
    return members


def read_member_array(path, info: MemberInfo) -> np.ndarray:
    """Read a whole (small) member into memory; CRC-checked, ``allow_pickle=False``."""
    with zipfile.ZipFile(os.fspath(path)) as zf:
        try:
            data = zf.read(info.zinfo)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise ValueError(f"{os.fspath(path)}: member {info.zinfo.filename} is damaged "
                             f"({exc})") from None
    return np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)


def copy_member_data(path, info: MemberInfo, dst, block: int = 4 << 20) -> None:
    """Stream the array bytes of member ``info`` (inflating a deflated one) into ``dst``.

    Reads ``block`` compressed bytes at a time and never holds more than ``block`` inflated
    bytes beyond them. The member's size and zip CRC-32 are verified at the end.

    Raises
    ------
    ValueError
        A damaged member: bad local header, corrupt deflate data, wrong size or CRC-32.
    """
    path = os.fspath(path)
    zi = info.zinfo
    damaged = f"{path}: member {zi.filename} is damaged"
    inflater = (_zlib_fast.decompressobj(-15) if zi.compress_type == zipfile.ZIP_DEFLATED
                else None)
    crc, n, skip = 0, 0, info.header_len  # the .npy header is checksummed but not copied

    def emit(b) -> None:
        nonlocal crc, n, skip
        crc = crc32(b, crc)
        n += len(b)
        if skip >= len(b):
            skip -= len(b)
            return
        dst.write(memoryview(b)[skip:])
        skip = 0

    with open(path, "rb") as f:
        f.seek(_member_start(f, zi, path))
        left = zi.compress_size
        try:
            while left > 0:
                b = f.read(min(block, left))
                if not b:
                    raise ValueError(f"{damaged} (the file ends inside it: truncated)")
                left -= len(b)
                if inflater is None:
                    emit(b)
                    continue
                while b:
                    emit(inflater.decompress(b, block))
                    b = inflater.unconsumed_tail
            if inflater is not None:
                emit(inflater.flush())
        except _zlib_fast.error as exc:
            raise ValueError(f"{damaged} ({exc})") from None
    if n != zi.file_size or crc != zi.CRC:
        raise ValueError(f"{damaged}: {n} bytes with CRC-32 {crc:08x}; the archive says "
                         f"{zi.file_size} bytes, {zi.CRC:08x}")
