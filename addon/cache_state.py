"""A checkpoint's file (``<name>_state_<frame>.npz``): written in one pass, staged beside
the frame's files, then committed (``BakeCache.finish_frame`` and ``write_state``).

**One pass.** The file is ``np.savez``'s layout (a ZIP of ``.npy`` members, stored, not
compressed: ``np.load`` reads it and checks each member's CRC-32). Each large array goes
from its own memory to the file in one write (the page-locked block of
``kernels.checkpoint.gather`` on a GPU), not through ``np.lib.format``'s 16 MiB
``tobytes`` chunks; the file's size and CRC-32, which the manifest records, are counted
while it is written instead of by reading the file back (``fsio.checksum``). The ZIP is
written front to back (no seek back to patch a member's header: its CRC and sizes follow
it in a data descriptor, ZIP's streaming form), so every byte passes the counter once,
in order.

**Staged, then committed.** ``stage`` writes the temporary and flushes it to the disk
(fsync), with no rename: a kill or an I/O error there leaves a ``.voxfx-tmp.*`` file
that the next bake removes, never a checkpoint. ``commit`` renames it, flushes the
folder and records it in the manifest. ``Staging`` runs ``stage`` on a thread of its
own, so a frame's checkpoint and its files are written at the same time
(``BakeCache.finish_frame``); the only durable step on that thread is its own fault
point (``state N staged``), and the frame's files only reach theirs once it is done, so
the cache's write steps stay one sequence (``fsio.fault_point``: the tests fail each).

``legacy_write`` is the write as it was (``np.lib.format.write_array``, the folder's
``write_atomic``, the checksum read back): ``VOXFX_CHECKPOINT=legacy``, for the A/B.

No ``bpy`` here.
"""

from __future__ import annotations

import io
import os
import struct
import threading
import zipfile
import zlib
from pathlib import Path
from typing import Mapping

import numpy as np

from . import fsio

DIRECT = 1 << 20  # arrays of at least 1 MiB go to the file in one write from their own memory
CHUNK = 8 << 20  # their CRC-32 in chunks of 8 MiB, on several threads
_pool = None


def _crc_pool():
    global _pool
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _pool = ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)), thread_name_prefix="voxfx-crc")
    return _pool


# CRC-32 of a concatenation from the parts' CRCs (zlib's crc32_combine: appending n zero
# bytes is a linear map over GF(2), a 32×32 bit matrix; _ZEROS[k] appends 2^k of them)
def _times(matrix, vector: int) -> int:
    out, i = 0, 0
    while vector:
        if vector & 1:
            out ^= matrix[i]
        vector >>= 1
        i += 1
    return out


def _zeros_operators(count: int = 48) -> list:
    m = [0xEDB88320] + [1 << n for n in range(31)]  # the reflected polynomial: one zero bit
    for _ in range(3):  # 8 bits: one byte
        m = [_times(m, m[n]) for n in range(32)]
    ops = []
    for _ in range(count):
        ops.append(m)
        m = [_times(m, m[n]) for n in range(32)]
    return ops


_ZEROS = _zeros_operators()


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """CRC-32 of A + B from crc(A), crc(B) and len(B)."""
    k = 0
    while length2:
        if length2 & 1:
            crc1 = _times(_ZEROS[k], crc1)
        length2 >>= 1
        k += 1
    return crc1 ^ crc2


def parallel_crc32(data: memoryview) -> int:
    """CRC-32 of *data* (bytes), its 8 MiB chunks on the pool's threads (``zlib.crc32``
    lets go of the GIL), combined in order."""
    n = data.nbytes
    if n <= CHUNK:
        return zlib.crc32(data)
    parts = [(a, min(n, a + CHUNK)) for a in range(0, n, CHUNK)]
    crcs = list(_crc_pool().map(lambda ab: zlib.crc32(data[ab[0]:ab[1]]), parts))
    out = 0
    for (a, b), c in zip(parts, crcs):
        out = crc32_combine(out, c, b - a)
    return out


def _npy(a: np.ndarray) -> tuple[bytes, memoryview]:
    """(the .npy header, or the whole .npy of a small array; the large array's bytes)."""
    head = io.BytesIO()
    if a.nbytes >= DIRECT and a.flags.c_contiguous and not a.dtype.hasobject:
        np.lib.format.write_array_header_1_0(head, np.lib.format.header_data_from_array_1_0(a))
        return head.getvalue(), a.reshape(-1).view(np.uint8).data
    np.lib.format.write_array(head, a, allow_pickle=False)
    return head.getvalue(), memoryview(b"")


_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_VERSION = 45  # ZIP64
_TIME, _DATE = 0, 1 << 5 | 1  # 1980-01-01 00:00, ZIP's earliest


def write_npz(temporary: Path, frame: int, state: Mapping) -> tuple[int, str]:
    """Write *state* (and *frame*) to the new file *temporary* as ``np.savez`` would lay
    it out (stored ZIP64 members), flushed to the disk; return its (size, CRC-32 as 8
    hex digits), as ``fsio.checksum`` would read them: each large array's CRC on several
    threads, then the array written from its own memory; the file's CRC combined from
    its parts'."""
    arrays = {"frame": np.int64(frame), **state}
    size, crc, central = 0, 0, []
    with open(temporary, "xb") as f:
        def put(data, data_crc=None):
            nonlocal size, crc
            f.write(data)
            n = memoryview(data).nbytes
            crc = zlib.crc32(data, crc) if data_crc is None else crc32_combine(crc, data_crc, n)
            size += n

        for key, value in arrays.items():
            head, body = _npy(np.asanyarray(value))
            body_crc = parallel_crc32(body) if body.nbytes else 0
            length = len(head) + body.nbytes
            member_crc = crc32_combine(zlib.crc32(head), body_crc, body.nbytes)
            name = f"{key}.npy".encode("utf-8")
            extra = struct.pack("<HHQQ", 1, 16, length, length)
            offset = size
            put(_LOCAL.pack(0x04034B50, _VERSION, 0, 0, _TIME, _DATE, member_crc, 0xFFFFFFFF, 0xFFFFFFFF,
                            len(name), len(extra)) + name + extra)
            put(head)
            if body.nbytes:
                put(body, body_crc)
            extra = struct.pack("<HHQQQ", 1, 24, length, length, offset)
            central.append(_CENTRAL.pack(0x02014B50, _VERSION, _VERSION, 0, 0, _TIME, _DATE, member_crc, 0xFFFFFFFF,
                                         0xFFFFFFFF, len(name), len(extra), 0, 0, 0, 0o600 << 16, 0xFFFFFFFF)
                           + name + extra)
        start = size
        put(b"".join(central))
        end64, count = size, len(central)
        put(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, _VERSION, _VERSION, 0, 0, count, count, end64 - start, start))
        put(struct.pack("<IIQI", 0x07064B50, 0, end64, 1))
        put(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(count, 0xFFFF), min(count, 0xFFFF),
                        min(end64 - start, 0xFFFFFFFF), 0xFFFFFFFF, 0))
        f.flush()
        os.fsync(f.fileno())
    return size, f"{crc & 0xFFFFFFFF:08x}"


def stage(final: Path, frame: int, state: Mapping) -> tuple[Path, tuple[int, str]]:
    """The checkpoint of *frame* as a flushed temporary beside *final* (module text):
    (temporary, (size, CRC-32)). On any failure the temporary is removed."""
    temporary = fsio.temporary_for(final)
    try:
        record = write_npz(temporary, frame, state)
        os.chmod(temporary, fsio.umask_mode())
        fsio.fault_point(f"state {frame} staged")
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary, record


def commit(final: Path, staged: tuple[Path, tuple[int, str]], frame: int) -> tuple[int, str]:
    """Rename a ``stage``d checkpoint to *final* and flush the folder; its record."""
    temporary, record = staged
    try:
        os.replace(temporary, final)
        fsio.fsync_folder(final.parent)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsio.fault_point(f"state {frame} written")
    return record


def legacy_write(final: Path, frame: int, state: Mapping) -> tuple[int, str]:
    """The checkpoint written as before this module (``VOXFX_CHECKPOINT=legacy``)."""

    def write(temporary):  # np.savez's layout; the with-blocks close the zip even on a full disk
        arrays = {"frame": np.int64(frame), **state}
        with open(temporary, "xb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
            for key, value in arrays.items():
                with z.open(f"{key}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)

    path = fsio.write_atomic(final, write)
    fsio.fault_point(f"state {frame} written")
    return fsio.checksum(path)


class Staging:
    """``stage`` on a thread of its own (named after the frame's writer thread, so a bake
    that ends leaves neither behind): ``result()`` waits and raises its error there;
    ``discard()`` waits and removes what it staged."""

    def __init__(self, final: Path, frame: int, state: Mapping):
        self._result, self._error = None, None
        self._thread = threading.Thread(target=self._run, args=(final, frame, state),
                                        name=f"voxfx-frame-{frame}-state")
        self._thread.start()

    def _run(self, final, frame, state) -> None:
        try:
            self._result = stage(final, frame, state)
        except BaseException as e:  # noqa: BLE001 - raised on the writer's thread by result()
            self._error = e

    def result(self) -> tuple[Path, tuple[int, str]]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result

    def discard(self) -> None:
        self._thread.join()
        if self._result is not None:
            self._result[0].unlink(missing_ok=True)
