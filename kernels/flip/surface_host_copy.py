"""The GPU level set's φ brought to host memory (``host_copy``, split from ``surface_gpu``,
issue 24: no behaviour change): ``sparse_output.level_set``'s copy of a region's level set,
whose size changes frame to frame, through a page-locked block — CuPy's pinned pool by size
class (``pinned_class_bytes``) or this module's blocks sized once for the domain (``_lend``) —
or the pageable ``.get()`` it took before. Measured on an NVIDIA H100 80GB HBM3 (``host_copy``'s
text): the 65M row's φ at frames 10 and 11, 38.7 and 41.8 ms pageable, 2.6 and 3.0 pinned."""

from __future__ import annotations

import numpy as np

from ..settings import env_choice

# host_copy's ways (VOXFX_LEVEL_SET_COPY), the first the default: "pinned" since its A/B on an H100
# (below); "pageable", the fresh-memory .get() that sparse_output.level_set took before.
# "overlap" (s23c): φ copied into the pinned block chunk by chunk while the device makes it (surface_overlap;
# the lean gather with one smoothing step, else as "pinned")
COPY_WAYS = ("pinned", "pageable", "overlap")


def pinned_class_bytes(nbytes: int) -> int:
    """*nbytes* rounded up to a pinned block's size class, 2^k or 1.5·2^k bytes (≥ 1 MiB), so
    that a level set whose region grows a little each frame asks CuPy's pinned pool for the
    same size frame after frame and takes back the block it freed (a new block, page-locked
    afresh, only when the region outgrows its class; at most 50% of it unused)."""
    n = max(int(nbytes), 1 << 20)
    high = 1 << (n - 1).bit_length()  # the power of two ≥ n
    return high * 3 // 4 if n <= high * 3 // 4 else high


# VOXFX_LEVEL_SET_PINNED, host_copy's pinned blocks: "domain" (default since session 16) blocks of this
# module sized once for the domain's largest φ (_lend) up to DOMAIN_BLOCK_MAX; "class" CuPy's pinned pool
# by size class. H100 80GB HBM3 (session 15 call 3, the 65M Fast frames): "class" 135–210 ms over frames
# 1–9, 285 at frame 10 (its φ the first to need a 256 MiB block, page-locked then), 230 at 11; "domain"
# every frame 1–11 ≤ 232 ms (the block page-locked once in frame 0, ~0.5 s there); the surface GPU files
# pass with it (session 16 call 1).
PINNED_WAYS = ("domain", "class")
# The largest block "domain" sizes for a box's largest φ ahead of need (1 GiB: a 640³ surface grid); a
# larger box's blocks are sized by class as its φ needs them, so a huge box never page-locks gigabytes of
# host memory the liquid may never fill.
DOMAIN_BLOCK_MAX = 1 << 30
_FREE: list = []  # "domain": page-locked blocks (cupy PinnedMemory) that no host array holds (_Lease)


def pinned_way(given=None) -> str:
    """``host_copy``'s pinned blocks: *given*, else ``VOXFX_LEVEL_SET_PINNED``, else "domain"."""
    return env_choice("VOXFX_LEVEL_SET_PINNED", PINNED_WAYS, given)


def release_free() -> int:
    """Let go of the "domain" blocks no host array holds (``memory.release_gpu_pool``, with CuPy's
    pinned pool); the bytes they held."""
    held = sum(size for size, _ in _FREE)
    _FREE.clear()
    return held


class _Lease:
    """A "domain" block lent to one host array (the owner of its buffer's memory): back to
    ``_FREE`` when that array is dropped, as CuPy's pinned pool takes its blocks back."""

    def __init__(self, mem, size: int):
        self.mem, self.ptr, self.size = mem, mem.ptr, size

    def __del__(self):
        if _FREE is not None:  # None only while the interpreter shuts down
            _FREE.append((self.size, self.mem))  # atomic under the GIL


def _lend(cp, nbytes: int, most: int):
    """A page-locked block of at least *nbytes* as a ``PinnedMemoryPointer`` whose memory goes
    back to ``_FREE`` with the last array that views it: the smallest free block that holds
    *nbytes*, else a block of ``pinned_class_bytes(max(nbytes, most))`` page-locked here — for
    a closed box *most* is its largest φ, so one block serves every frame (two while a bake's
    writer holds the frame before); a *most* over ``DOMAIN_BLOCK_MAX`` counts as unknown (0)."""
    from cupy.cuda import pinned_memory

    most = int(most) if int(most) <= DOMAIN_BLOCK_MAX else 0

    fits = [i for i, (size, _) in enumerate(_FREE) if size >= nbytes]
    if fits:
        size, mem = _FREE.pop(min(fits, key=lambda i: _FREE[i][0]))
    else:
        size = pinned_class_bytes(max(nbytes, most))
        mem = pinned_memory.PinnedMemory(size, cp.cuda.runtime.hostAllocPortable)
    return pinned_memory.PinnedMemoryPointer(_Lease(mem, size), 0)


def host_copy(phi, way=None, most: int = 0, pinned=None):
    """*phi* (a device array) as a NumPy float32 array (``sparse_output.level_set``: a
    region's level set, whose size changes frame to frame), the way *way* (``COPY_WAYS``),
    else ``VOXFX_LEVEL_SET_COPY``, else "pinned": into a page-locked block (the array a view
    of its first bytes, keeping the block until it is dropped) — by ``pinned_way`` (*pinned*,
    else ``VOXFX_LEVEL_SET_PINNED``) "domain", one of this module's sized once for *most* bytes
    (``_lend``: the domain's largest φ up to ``DOMAIN_BLOCK_MAX``, 0 unknown: by class), or "class",
    a block of CuPy's pinned pool of ``pinned_class_bytes``; "pageable": ``.get()``
    into fresh pageable memory. The same bytes every way. Measured on an NVIDIA H100 80GB
    HBM3 (driver 580.159.04, CuPy 14.2;
    ``bench/flip_sparse.py --row 65m --frames 12 --timing fast --level-set --trim
    --level-set-modes lean``, the three copies of each frame's φ in turn): pageable 2.9–5.0 ms
    in frames 0–3 (44–77 MB), 23.7–34.4 in frames 4–9, **38.7 and 41.8 ms** at frames 10 and
    11 (135 and 162 MB: 3.5–3.9 GB/s); pinned by class **0.9–3.0 ms** in every frame (2.6 and
    3.0 at frames 10 and 11: 52–54 GB/s); pinned at the exact size (``backend.to_host``) 0.9–3.1
    ms but 96.6 ms at frame 10, the first region larger than every earlier one (a block
    page-locked afresh). At 8M the box's level set (``sim.phi_out``) was pinned already.
    Page-locking a class's block ahead in a thread (issue 24, i24f, same card, 65M frames
    ``--trim``) was measured and removed: cudaHostAlloc there and the next frame's pool trim
    (cudaFree) take turns in the driver, so the trim waited the whole lock (37, 58, 66, 111,
    141 ms for 64–256 MiB) — the lock moved, not hidden."""
    if copy_way(way) == "pageable":
        return np.asarray(phi.get(), dtype=np.float32)
    import cupy as cp

    phi = cp.ascontiguousarray(phi, dtype=cp.float32)
    out = host_block(phi.shape, most, pinned)
    phi.get(out=out)
    return out


def copy_way(given=None) -> str:
    """``host_copy``'s way (``COPY_WAYS``): *given*, else ``VOXFX_LEVEL_SET_COPY``, else "pinned"."""
    return env_choice("VOXFX_LEVEL_SET_COPY", COPY_WAYS, given)


def host_block(shape, most: int = 0, pinned=None):
    """A page-locked float32 NumPy array of *shape*, from ``host_copy``'s blocks (``pinned_way``:
    "domain" for *most* bytes, or CuPy's pinned pool by class)."""
    import cupy as cp

    count = int(np.prod(shape))
    if pinned_way(pinned) == "domain":
        block = _lend(cp, 4 * count, int(most))
    else:
        block = cp.cuda.alloc_pinned_memory(pinned_class_bytes(4 * count))
    return np.frombuffer(block, np.float32, count).reshape(tuple(shape))
