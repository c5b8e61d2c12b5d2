"""The GPU level set's φ copied to the host while it is made (issue 24, s23c; ``VOXFX_LEVEL_SET_COPY=overlap``,
``surface_host_copy.COPY_WAYS``): ``sparse_output.level_set``'s copy of φ overlapped with the gather.

The lean gather (``surface_gpu._bricks_gpu``, its node tiles z-major) runs in chunks of z layers of tiles
(``copy_chunks``, ``VOXFX_LEVEL_SET_COPY_CHUNKS``), each a launch of ``particle_level_set_lean_split`` from its
first tile; once chunk c + 1 is gathered, chunk c is smoothed (``smooth_level_set_bricks_from``: its one step
reads one node beyond the chunk, which chunk c + 1 holds by then) and its nodes — contiguous, z slowest — are
copied into the host array on a stream of their own, after an event, while the device gathers the next
chunks. Every node is gathered and smoothed as in one launch each: φ the same bits. Only with one smoothing
step (the sparse liquid's outputs, ``closed_level_set``'s default); otherwise the level set runs whole and
``host_copy`` copies it after.

Why: at 65M particles the level set's φ (85.1M nodes, 340 MB at frame 11 of the Fast dam break) takes ~6.5 ms
to copy after the device's ~46 ms, the copy engine idle until then.

Measured (s23c's call 2; NVIDIA H100 80GB HBM3, driver 580.159.04; ``bench/flip_sparse.py --row 65m --frames 12
--timing fast --level-set --trim --level-set-modes``, each way's ``level_set()`` to the host timed in one
process, its bits the device φ's in every frame): no faster — frames 6–11 235.8 ms "pinned" → 244.5 "overlap"
(frame 11 52.9 → 53.9); with the gather split in 4 230.6 → 229.0. Opt-in, not the default. Likely why: the
chunks run from z = 0 up, and the dam break's liquid (the gather's work) lies low, so the light upper chunks
and most copies come last; gathering the chunks from the top down (smoothing chunk c once chunk c − 1 is
gathered) would leave only the last, heaviest chunk's copy exposed — not measured.
"""

from __future__ import annotations

import numpy as np

from ..settings import env_choice

COPY_CHUNKS = ("8", "4", "16")  # VOXFX_LEVEL_SET_COPY_CHUNKS (copy_chunks): z chunks of tile layers; first default
_STREAMS: dict = {}  # device → the copy stream (non-blocking)


class HostSink:
    """The host array (C-contiguous float32 of φ's shape, page-locked for an overlapped copy) that
    ``_bricks_gpu`` fills chunk by chunk; ``filled`` once it has."""

    def __init__(self, array):
        self.array = array
        self.filled = False


def copy_chunks(given=None) -> int:
    """z chunks of the overlapped copy: *given*, else ``VOXFX_LEVEL_SET_COPY_CHUNKS``, else 8."""
    return int(env_choice("VOXFX_LEVEL_SET_COPY_CHUNKS", COPY_CHUNKS, given and str(given)))


def chunk_layers(layers: int, chunks: int) -> list:
    """The z layers of tiles where each chunk starts, and *layers* last: *chunks* near-equal
    chunks (fewer where there are fewer layers)."""
    k = max(1, min(int(chunks), int(layers)))
    return sorted({(i * int(layers)) // k for i in range(k + 1)})


def _copy_stream(cp):
    device = cp.cuda.runtime.getDevice()
    if device not in _STREAMS:
        _STREAMS[device] = cp.cuda.Stream(non_blocking=True)
    return _STREAMS[device]


def gather_smooth_copy(sink, phi, gather, args, split, near, nb, smooth_args, smoothing, cp,
                       kernel="particle_level_set_lean_split"):
    """The lean gather (``gather``'s *kernel*, ``particle_level_set_lean_split`` or ``_balance``, *args* as
    ``particle_level_set_lean``'s and *split* blocks a tile), one smoothing step (``smoothing``'s
    ``smooth_level_set_bricks_from``, its arguments *smooth_args* between (φ, *near*) and its output) and the copy
    of the result into ``sink.array``, chunk by chunk (module text); returns the smoothed φ on the device."""
    from .surface_gpu import TILE

    nbx, nby, nbz = (int(b) for b in nb)
    nz, ny, nx = phi.shape
    host = sink.array
    if host.shape != phi.shape or host.dtype != np.float32 or not host.flags.c_contiguous:
        raise ValueError(f"the host array must be C-contiguous float32 of shape {phi.shape}")
    layer = nbx * nby  # tiles in a z layer of tiles
    threads = int(np.prod(TILE))
    other = cp.empty_like(phi)
    main = cp.cuda.get_current_stream()
    copier = _copy_stream(cp)
    row = nx * ny * 4  # bytes of a node layer
    marks = chunk_layers(nbz, copy_chunks())

    def smooth_and_copy(z0, z1):
        first, count = z0 * layer, (z1 - z0) * layer
        smoothing.launch_grid("smooth_level_set_bricks_from", (count,), (threads,), (
            phi, near, *smooth_args, other, np.int64(first)))
        k0, k1 = z0 * TILE[2], min(z1 * TILE[2], nz)
        if k1 > k0:
            done = cp.cuda.Event(disable_timing=True)
            done.record(main)
            copier.wait_event(done)
            cp.cuda.runtime.memcpyAsync(host.ctypes.data + k0 * row, other.data.ptr + k0 * row, (k1 - k0) * row,
                                        cp.cuda.runtime.memcpyDeviceToHost, copier.ptr)

    for c, (z0, z1) in enumerate(zip(marks[:-1], marks[1:])):
        gather.launch_grid(kernel, ((z1 - z0) * layer * split,), (threads // split,),
                           (*args, np.int32(split), np.int64(z0 * layer)))
        if c:
            smooth_and_copy(marks[c - 1], z0)
    smooth_and_copy(marks[-2], marks[-1])
    copier.synchronize()  # φ and the smoothed copy stay alive (referenced) until the copies end
    sink.filled = True
    return other
