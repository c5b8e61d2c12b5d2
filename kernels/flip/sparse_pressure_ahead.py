"""The sparse pressure set-up launched ahead of its host read (issue 24: the set-up's host
syncs; ``sparse_pressure_workspace.AHEAD``, ``VOXFX_SPARSE_SETUP_AHEAD``, "1" the default).
The workspace's set-up read the unknowns' sizes and their set's box (which give the coarse
levels' capacities and key base), then launched the coarse levels and read their sizes: two
host syncs, the device idle while the host queued the second half. Launched ahead, the
coarse levels go right after the unknowns, on the workspace's capacities and a key base
guessed from the last set-up's box (``guessed_base``), and one read brings back every size;
the kernels clamp a set to its rows (``mgb_ranked``, ``mgs_parents``), so a guess that
does not stand writes nothing out of bounds. After the read ``tables_stand`` checks the
guess against the box and set size read: where it fails (the first set-up, a hierarchy that
grows, a liquid ~2^20 cells from the last), the levels are built again the two-read way.
The same tables entry for entry and the same pressure bit for bit
(tests/gpu/test_flip_sparse_pressure_ahead_gpu.py; the tables on a guessed base on the host,
tests/unit/test_cuda_sparse_pressure_bricks_host.py). The same 48 launches a solve.

8M dam break on an H100 (``bench/flip_sparse_setup_ahead_call.sh``: the variants alternating
each substep in one process, 6 substeps each, 14 CG iterations, max |Δp| = 0): the pressure
stage 5.72 → 5.55 ms (medians; every substep 0.1–0.2 ms lower), the set-up's pieces with a
sync on each side 1.80 → 1.64 ms.
"""

from __future__ import annotations

from .sparse_multigrid import _MARGIN, KEY_BITS
from .sparse_pressure_buffers import table_caps
from .sparse_pressure_setup import _level0_base


def guessed_base(lo, hi):
    """Level 0's key base for a set-up launched before its box is read: the last set-up's box
    (*lo*, *hi*) centred in the keys' range. Any base with every cell at least _MARGIN above
    it and room for the queries below 2^KEY_BITS gives the same tables (the kernels compare
    and step keys, and a cell's parity and parent are of its lattice coordinates, not its
    key), so the guess holds while the liquid stays within ~2^(KEY_BITS − 1) cells of it."""
    room = (1 << KEY_BITS) - 1 - 2 * _MARGIN
    return tuple(lo_ - _MARGIN - max(0, (room - (hi_ - lo_)) // 2) for lo_, hi_ in zip(lo, hi))


def tables_stand(caps, lo, hi, bounds, guess) -> bool:
    """Whether tables built ahead on *guess* and the workspace's capacities *caps* are those of
    the read box (*lo*, *hi*) and set bounds: the base below every cell by _MARGIN and the
    keys in range (the exact base's test, ``_level0_base``, raising as it does), and
    capacities that ``Workspace.tables`` keeps for *bounds* (every set within its rows, as
    many levels)."""
    _level0_base(lo, hi)
    if any(lo_ - _MARGIN < g or hi_ - g + _MARGIN >= 1 << KEY_BITS for lo_, hi_, g in zip(lo, hi, guess)):
        return False
    return table_caps([b + 1 for b in bounds[1:]], caps) == caps
