"""The files of one liquid frame from its arrays (``kernels.flip.bake.frame_arrays``):
suffix → write(path), what Bake Liquid hands its cache (``sim_bake.run``).

No ``bpy`` here: the VDB writer (``writeback.write_vdb`` uses ``bpy``) is passed in by the
operator (``operators/flip.py``), so a script or a bench on a machine without Blender
drives the real frame loop with the particle files alone.

A GPU bake's particles stay on the device (``FlipBake(particles_on_device=True)``) and
are encoded there before the next step moves them. With ``VOXFX_DEFER_COMPRESSION=1``
(the default) only the array work and the raw block's copy to the host happen then
(``compact_points.prepare_here``); the compression (Zstandard or zlib) and the CRC-32
run in the frame's writer, on the writer thread while the next frame is simulated
(``cache_writer.FrameWriter``): the same file bytes, a kill or an I/O error still leaves
complete frames only (the compression is part of the writer, before the atomic write).
``VOXFX_DEFER_COMPRESSION=0``: compressed on the bake's thread, as before (for the A/B,
``bench/bake_frames.py``).

Measured (H100 80GB HBM3, one call; the 8M dam break's real bake loop, Zstandard level 1,
5.82 bytes a particle; medians of frames 3–5): the encode on the bake's thread 245 →
90 ms (device work and the 108 MB raw block's pageable copy), the writer thread's frame
38 → 233 ms (compression, write, fsync), still under the bake's frame, so the bake never
waits for it (0.7 ms); with the direct cell velocity (``sparse_output``) the frame's wall
time went 1302 → 836 ms, of which the checkpoint (``sim.checkpoint()``, 161 ms) and its
durable write before the next step (470 ms, the crash-safety promise) are now most.
Issue 24 (same card, driver 580.159.04, one call, ``bench/bake_frames.py --row 8m``,
a 247 MB checkpoint): the gather 124 → 10 ms (page-locked, one copy an array), the
checkpoint's file 348 → 223 ms (one pass, the CRC on 8 threads; the fsync is 119 of it),
and the frame went 655 → 485 ms with the checkpoint still durable before the next step
(the default, ``VOXFX_CHECKPOINT=before_step``, issue 21 §1's promise), 379 ms with it on the
writer thread beside this frame's files (``overlap``, opt-in: a kill may cost one frame
more); the bake then waits ~160 ms a frame for the writer thread, whose compression and two
fsyncs share 16 cores and one disk.
"""

from __future__ import annotations

import os
from typing import Callable, Optional

import numpy as np

from ..kernels import backend
from . import compact_points
from .ply import write_points

DEFER_ENV = "VOXFX_DEFER_COMPRESSION"


def defer_compression() -> bool:
    """Whether a device-encoded frame is compressed by its writer (module text); read
    at each frame, so one process can A/B both ways."""
    return os.environ.get(DEFER_ENV, "1").strip() != "0"


def particle_writers(arrays, spec, compact=False) -> dict:
    """The particle file of one liquid frame (suffix → write(path)), see ``writers_of``."""
    points = {"velocity": arrays["velocity"], "size": arrays["size"]}
    if compact and backend.array_module(arrays["position"]) is not np:
        if defer_compression():
            frame = compact_points.prepare_here(arrays["position"], points, cell=spec.voxel_size)
            return {compact_points.SUFFIX: lambda p: compact_points.write_encoded(p, frame.pack())}
        encoded = compact_points.encode_here(arrays["position"], points, cell=spec.voxel_size)
        return {compact_points.SUFFIX: lambda p: compact_points.write_encoded(p, encoded)}
    if compact:
        return {compact_points.SUFFIX: lambda p: compact_points.write_points(p, arrays["position"], points,
                                                                            cell=spec.voxel_size)}
    return {".ply": lambda p: write_points(p, arrays["position"], points)}


def writers_of(arrays, spec, compact=False, write_vdb: Optional[Callable] = None) -> dict:
    """The files of one liquid frame (suffix → write(path)) from its arrays; *compact*:
    the particles as a compact frame (``compact_points``) on the liquid's cells and the
    grids as half floats (the level set within 1/1000 of a cell), else PLY and float
    grids. Particles still on the GPU are encoded here, on the device, before the next
    step moves them (module text); NumPy copies when their file is written.
    *write_vdb(path, grids, spec, grid_class=, background=, half=)*: the VDB writer
    (``writeback.write_vdb``); None: no ``.vdb`` file."""
    files = particle_writers(arrays, spec, compact)
    if write_vdb is not None:
        files[".vdb"] = lambda p: write_vdb(p, {"surface": arrays["surface"], "velocity": arrays["cell_velocity"]},
                                            arrays["surface_spec"],
                                            grid_class={"surface": "LEVEL_SET", "velocity": "FOG_VOLUME"},
                                            background={"surface": 3.0 * spec.voxel_size, "velocity": 0.0},
                                            half=compact)
    return files
