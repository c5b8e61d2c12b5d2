"""The divergence-free air band's particle stages on the GPU (issue 24, accuracy; the CuPy side
of ``sparse_air_band.py``, which calls these where the grid is CuPy's): one thread per particle,
``cuda/flip_sparse_air_band.cu``, compiled with ``--fmad=false`` so each float operation rounds
as the NumPy reference's (``sparse_transfer.update_velocity``, ``sparse_air_band.advect``): the
same bits (``tests/gpu/test_flip_sparse_air_band_gpu.py``).

    update_velocity  the FLIP/PIC blend (or APIC's C) from the liquid's faces, positions kept
    advect           the RK2 sub-steps through the band-projected faces (u_n blended in time
                     where time-centred), then the push-out — all sub-steps in one launch: a
                     particle's path stays in its thread, the host only counts the sub-steps

The rest of the band (reach, extrapolation, band cells, the band's solve through
``sparse_pressure``'s GPU solver) is ``sparse_air_band.py``'s array code and the kernels those
calls already launch on CuPy.
"""

from __future__ import annotations

import numpy as np

from ..grid import mac
from ..grid.launch import Kernels
from .particles import PUSH_EPSILON
from .sparse_gpu import _I32, _I64, _dims, _frame, _topo

_F = np.float32
THREADS = 256
_K = Kernels("flip_sparse_air_band.cu", ("--fmad=false",), THREADS,
             defines={**mac.CELL_TYPES, "PUSH_EPSILON": PUSH_EPSILON})


def update_velocity(grid, old, pos, vel, flip, pic, c=None) -> None:
    """``sparse_transfer.update_velocity`` at the particles *pos* (world, (N, 3) float32) in
    place (*vel*, and *c* with APIC), from the grid's faces and *old*."""
    n = int(pos.shape[0])
    keys, slots, nk = _topo(grid)
    apic = c is not None
    dummy = c if apic else grid.xp.zeros(1, grid.xp.float32)
    ox, oy, oz, _, inv_h = _frame(grid)
    _K.launch("band_update_velocity", n, (pos, vel, dummy, _I64(n), _I32(apic), *grid.faces(), *old, keys, slots, nk,
                                          grid.brick_nbr, _I32(grid.closed), *_dims(grid), ox, oy, oz, inv_h,
                                          _F(flip), _F(pic)))


def advect(grid, pos, steps: int, step, before=None) -> None:
    """``sparse_air_band.advect``'s sub-steps and push-out, *pos* in place: *steps* RK2
    sub-steps of *step* (float32) seconds through the grid's faces, u_n (*before*, flat
    faces) blended in time where given."""
    n = int(pos.shape[0])
    keys, slots, nk = _topo(grid)
    centred = before is not None
    b = tuple(before) if centred else (grid.xp.zeros(1, grid.xp.float32),) * 3
    step = _F(step)
    grid.bins = None  # the particles move: P2G's bins are stale (as sparse_g2p_gpu.g2p_advect)
    _K.launch("band_advect", n, (pos, _I64(n), *grid.faces(), _I32(centred), *b, grid["solid"], keys, slots, nk,
                                 grid.brick_nbr, _I32(grid.closed), *_dims(grid), *_frame(grid), _I32(steps), step,
                                 _F(0.5) * step))
