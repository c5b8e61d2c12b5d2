"""Durable file writes, one way for every file VoxFX writes.

* Every temporary file is named ``.voxfx-tmp.<random>.<final name>`` in the folder of its
  final file (``is_temporary`` recognises them), so resume, re-bake and Free can clean up
  after a crash whatever wrote it. The random part makes the name unguessable: nothing
  can be planted there beforehand (a symbolic link to another file, say).
* ``write_atomic``: write the temporary, flush it to the disk (fsync), give it the mode a
  plain ``open()`` would (the umask's, so render-farm accounts can read it), rename it
  over the final name, then fsync the folder so the rename itself survives a power loss.
* ``fault_point``: a test-only hook called after each durable step. With the environment
  variable ``VOXFX_FAULT_AT=k`` (or ``k:exit``) the k-th step from process start raises an
  ``OSError`` (ENOSPC, like a full disk), or ends the process at once like ``kill -9``.
  Tests use it to prove that a failure at *any* step loses nothing.

No ``bpy`` here.
"""

from __future__ import annotations

import errno
import os
import shutil
import secrets
import zlib
from pathlib import Path
from typing import Callable

TEMP_PREFIX = ".voxfx-tmp."
FAULT_ENV = "VOXFX_FAULT_AT"
_CHUNK = 1 << 20

_fault_counter = 0
_fault_labels: list[str] = []


def temporary_for(final: Path) -> Path:
    """A fresh, unguessable temporary name beside *final*."""
    final = Path(final)
    return final.with_name(f"{TEMP_PREFIX}{secrets.token_hex(6)}.{final.name}")


def is_temporary(name: str) -> bool:
    return name.startswith(TEMP_PREFIX)


def umask_mode() -> int:
    """The mode ``open()`` gives a new file under the current umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def fsync_file(path: Path) -> None:
    handle = os.open(path, os.O_RDWR)  # Windows only flushes handles opened for writing
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def fsync_folder(folder: Path) -> None:
    """Make renames and unlinks in *folder* durable (no-op where folders cannot be opened)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:  # Windows: folders cannot be opened; NTFS journals renames itself
        return
    try:
        os.fsync(handle)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EBADF):  # file systems without folder fsync
            raise
    finally:
        os.close(handle)


def finish_temporary(temporary: Path, final: Path, *, sync_folder: bool = True) -> None:
    """fsync *temporary*, set the umask's mode, rename it over *final*, fsync the folder."""
    fsync_file(temporary)
    os.chmod(temporary, umask_mode())
    os.replace(temporary, final)
    if sync_folder:
        fsync_folder(final.parent)


def write_atomic(path, write: Callable[[Path], None]) -> Path:
    """Run ``write(temporary)``, then make the file durable under *path*.

    The file appears whole or not at all; on any failure (even Ctrl+C) the temporary is
    removed and the error re-raised.
    """
    path = Path(path)
    temporary = temporary_for(path)
    try:
        write(temporary)
        if not temporary.is_file():
            raise OSError(errno.EIO, f"writing {path.name} produced no file")
        finish_temporary(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def move_atomic(source, target) -> Path:
    """Move a finished file to *target* durably: a rename where both lie on one file
    system (then fsync of the target's folder), else an atomic copy (``write_atomic``)
    and the source removed. *target* appears whole or not at all."""
    source, target = Path(source), Path(target)
    try:
        os.replace(source, target)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        write_atomic(target, lambda temporary: shutil.copyfile(source, temporary))
        source.unlink()
        return target
    fsync_folder(target.parent)
    return target


def write_bytes_atomic(path, data: bytes) -> Path:
    def write(temporary: Path) -> None:
        with open(temporary, "xb") as f:
            f.write(data)
    return write_atomic(path, write)


def checksum(path: Path) -> tuple[int, str]:
    """(size in bytes, CRC-32 as 8 hex digits) of a file, read in 1 MiB chunks."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, f"{crc & 0xFFFFFFFF:08x}"


def fault_point(label: str) -> None:
    """Count one durable write step; fail here if ``VOXFX_FAULT_AT`` names this step."""
    global _fault_counter
    _fault_counter += 1
    _fault_labels.append(label)
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    at, _, action = spec.partition(":")
    if _fault_counter != int(at):
        return
    if action == "exit":
        os._exit(137)  # like kill -9: no clean-up, no finally blocks
    raise OSError(errno.ENOSPC, f"injected failure after step {_fault_counter} ({label})")


def reset_faults() -> None:
    """Start counting steps from zero again (tests that inject in-process)."""
    global _fault_counter
    _fault_counter = 0
    _fault_labels.clear()
_fault_labels: list[str] = []


def fault_count() -> int:
    return _fault_counter


def fault_labels() -> list[str]:
    """What each step counted since the last reset was, in order (step k is [k - 1])."""
    return list(_fault_labels)
