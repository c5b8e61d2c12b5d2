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

import os
import threading
import zipfile
import zlib
from pathlib import Path
from typing import Mapping

import numpy as np

from . import fsio

DIRECT = 1 << 20  # arrays of at least 1 MiB go to the file in one write from their own memory


class _Counted:
    """A file written front to back, its size and CRC-32 counted as it goes. It has no
    ``seek``, so ``zipfile`` streams each member (data descriptors) and never goes back."""

    def __init__(self, f):
        self.f, self.size, self.crc = f, 0, 0

    def write(self, data) -> int:
        self.crc = zlib.crc32(data, self.crc)
        n = self.f.write(data)
        self.size += memoryview(data).nbytes
        return n

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.f.flush()


def write_npz(temporary: Path, frame: int, state: Mapping) -> tuple[int, str]:
    """Write *state* (and *frame*) to the new file *temporary*, flushed to the disk;
    return its (size, CRC-32 as 8 hex digits), as ``fsio.checksum`` would read them."""
    arrays = {"frame": np.int64(frame), **state}
    with open(temporary, "xb") as f:  # the with-blocks close the zip even on a full disk
        out = _Counted(f)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
            for key, value in arrays.items():
                a = np.asanyarray(value)
                with z.open(f"{key}.npy", "w", force_zip64=True) as member:
                    if a.nbytes >= DIRECT and a.flags.c_contiguous and not a.dtype.hasobject:
                        np.lib.format.write_array_header_1_0(member, np.lib.format.header_data_from_array_1_0(a))
                        member.write(a.reshape(-1).view(np.uint8).data)
                    else:
                        np.lib.format.write_array(member, a, allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())
    return out.size, f"{out.crc & 0xFFFFFFFF:08x}"


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
