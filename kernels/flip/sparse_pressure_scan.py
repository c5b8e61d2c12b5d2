"""The sparse pressure set-up's prefix sums (split from ``sparse_pressure_setup``, which
re-exports these names; no behaviour change): ``inclusive_scan`` over one row or several of
int32 flags — one launch of scan_lookback (a single pass with decoupled look-back) where its
status words hold the tiles, else scan_tile_sums + scan_tiles, or ``cupy.cumsum`` — by
``sparse_pressure_setup.SCAN`` (read there at each call, so a test or bench that sets it there
picks the way), and scan_lookback's tile floor (``VOXFX_SPARSE_SCAN_TILE``); ``inclusive_scans``:
two independent row sets in one launch (scan_lookback_pair, ``VOXFX_SPARSE_SCAN_JOIN``); the
look-back kernels' way of a tile (``VOXFX_SPARSE_SCAN_WAY``: read twice in chunks, or once in
registers: scan_lookback_wide, scan_lookback_pair_wide)."""

from __future__ import annotations

import numpy as np

from ..grid.launch import THREADS, Kernels
from ..settings import env_choice

_S = Kernels("flip_sparse_pressure_scan.cu", (), THREADS)  # inclusive_scan's kernels
_SCAN_TILES = 1024  # at most this many tiles a row: scan_tiles sums the earlier ones per block
_LOOKBACK_WORDS = 4 * _SCAN_TILES  # scan_lookback's status words (rows × tiles at most; more: two launches)
_lookback = {}  # (device, stream) → (status words, ctrl): scan_lookback's state between launches


# scan_lookback's tile floor in block widths (``VOXFX_SPARSE_SCAN_TILE``, read at each scan):
# "8" (2,048 items) or 16, 32 (4,096, 8,192: a quarter of the tiles, so a quarter of the
# look-back chain; 32 items a thread over the chunks of the same kernel). i24u, 8M on an H100:
# level 0's scan 0.067 ms over 2,673 tiles of 2,048 (~25 ns a tile). The same integers any
# width (host harness, tests/gpu/test_flip_sparse_pressure_scan_gpu.py). Timed in session 17
# (8M, H100): level 0 0.069 → 0.066 (16) / 0.063 ms (32), but the coarse levels' six scans
# 0.054 → 0.063 / 0.080 (their rows are short: wider tiles leave blocks idle) — "8" stays.
SCAN_TILE_WIDTHS = ("8", "16", "32")


def scan_tile_floor(given=None) -> str:
    """scan_lookback's tile floor in block widths (``SCAN_TILE_WIDTHS``)."""
    return env_choice("VOXFX_SPARSE_SCAN_TILE", SCAN_TILE_WIDTHS, given)


def scan_tile(n, width=8) -> int:
    """Items a block of the scan kernels owns in a row of *n*: at least *width* blocks'
    widths, wide enough for at most _SCAN_TILES tiles."""
    return max(width * THREADS, -(-int(n) // (_SCAN_TILES * THREADS)) * THREADS)


# VOXFX_SPARSE_SCAN_WAY (read at each scan, ``scan_way``; s22a, session 22; "1" the default since
# its device call): the look-back kernels' way of a tile (cuda/flip_sparse_pressure_scan.cu's
# notes). "0": scan_lookback and
# scan_lookback_pair — tiles of ``scan_tile`` (the SCAN_TILE floor), read twice, chunks of 8
# items a thread, a 32-tile look-back window. "1": scan_lookback_wide and scan_lookback_pair_wide
# — tiles of _WIDE_TILE items read once into registers (int4 loads and stores), a 128-tile
# window; where the rows' tiles overflow the status words (more than 4,096 tiles: ~16.7M items)
# the "0" kernels. The same integers (host harness; tests/gpu/test_flip_sparse_pressure_scan_
# wide_gpu.py). H100 80GB HBM3 (bench/flip_sparse_setup_kernels.py, 8M row, both orders): level 0's
# scan 0.069 / 0.071 → 0.025 / 0.024 ms (~1.65 TB/s of its 41 MB), the coarse levels' two pairs
# 0.029 / 0.031 → 0.019 / 0.018 and two singles 0.018 / 0.017 → 0.015 / 0.015: the seven scans
# 0.115 / 0.119 → 0.059 / 0.056 ms of device a substep.
SCAN_WAYS = ("0", "1")
_WIDE_TILE = 16 * THREADS  # SCAN_VECS int4 vectors a thread


def scan_way(given=None) -> str:
    """The look-back kernels' way of a tile (``SCAN_WAYS``)."""
    return env_choice("VOXFX_SPARSE_SCAN_WAY", SCAN_WAYS, given, default="1")


def _wide(*row_sets) -> bool:
    """Whether the "1" kernels take these (rows, n) sets: the way on and their tiles of
    _WIDE_TILE within the status words."""
    return scan_way() == "1" and sum(rows * -(-n // _WIDE_TILE) for rows, n in row_sets) <= _LOOKBACK_WORDS


def inclusive_scan(a, out=None, sums=None):
    """``cupy.cumsum(a, axis=-1, dtype=int32)`` of a C-contiguous int32 array of one row
    (n,) or several (rows, n): scan_lookback (or scan_lookback_wide: ``SCAN_WAY``), scan_tile_sums
    and scan_tiles, or cupy.cumsum (``SCAN``);
    *out* (a's shape, int32) and *sums* (int32, ``_SCAN_TILES`` a row at least) where the
    caller keeps them (``sparse_pressure_workspace``), else new arrays."""
    import cupy as cp

    from . import sparse_pressure_setup

    SCAN = sparse_pressure_setup.SCAN  # read there at each call (module notes)
    if SCAN not in ("kernel", "lookback") or a.dtype != cp.int32 or a.ndim not in (1, 2) or not a.flags.c_contiguous:
        if SCAN not in ("kernel", "lookback", "cupy"):
            raise ValueError(f"VOXFX_SPARSE_PRESSURE_SCAN must be kernel, lookback or cupy, not {SCAN!r}")
        return cp.cumsum(a, axis=-1, dtype=cp.int32, out=out)
    n, rows = int(a.shape[-1]), 1 if a.ndim == 1 else int(a.shape[0])
    out = cp.empty(a.shape, cp.int32) if out is None else out
    if n == 0 or rows == 0:
        return out
    tile = scan_tile(n)
    grid = (-(-n // tile), rows)
    if SCAN == "lookback" and _wide((rows, n)):
        status, ctrl = lookback_state(cp)
        tiles, i32 = -(-n // _WIDE_TILE), np.int32  # scan_lookback_pair_wide's arguments, no second set
        _S.launch_grid("scan_lookback_wide", (tiles * rows,), (THREADS,),
                       (a, i32(n), i32(_WIDE_TILE), i32(tiles), i32(rows), out, a, i32(n), i32(_WIDE_TILE), i32(0), out,
                        status, ctrl))
        return out
    if SCAN == "lookback" and grid[0] * rows <= _LOOKBACK_WORDS:
        tile = scan_tile(n, int(scan_tile_floor()))
        grid = (-(-n // tile), rows)
        status, ctrl = lookback_state(cp)
        _S.launch_grid("scan_lookback", (grid[0] * rows,), (THREADS,), (a, np.int32(n), np.int32(tile),
                                                                        np.int32(grid[0]), status, ctrl, out))
        return out
    sums = cp.empty(grid[0] * rows, cp.int32) if sums is None else sums
    _S.launch_grid("scan_tile_sums", grid, (THREADS,), (a, np.int32(n), np.int32(tile), sums))
    _S.launch_grid("scan_tiles", grid, (THREADS,), (a, np.int32(n), np.int32(tile), sums, out))
    return out


# VOXFX_SPARSE_SCAN_JOIN (read at each set-up, ``scan_join``): "1" (the default since session 22)
# scans two independent row sets in one launch (``inclusive_scans``: scan_lookback_pair) where the
# coarse levels have them ready together — a level's red/black flags and the next level's take,
# both written by one mgs_level_cells_coarsen launch (``sparse_pressure_workspace_levels``): at 8M
# (levels 0 … 3 launched, the tail from 4) the seven scans 7 → 5 launches and level 2's mgs_coarsen
# joined into level 1's mgs_level_cells, the coarse levels 25 → 22 launches. "0": the launches as
# before. The same integers (host harness; tests/gpu/test_flip_sparse_pressure_scan_join_gpu.py).
# H100 80GB HBM3 (session 22, bench/flip_sparse_setup_kernels.py): the coarse levels' kernels 0.413
# → 0.396 ms of device a substep, the CuPy code between them 0.039 → 0.032; the 8M row in one
# process, substeps alternating, pressure 3.416 → 3.278 ms (the second way of such an A/B reads
# ~0.08 ms lower whatever it is: the same row's other A/Bs of that call).
SCAN_JOIN = ("0", "1")


def scan_join(given=None) -> str:
    """Whether the coarse levels pair their independent scans into one launch (``SCAN_JOIN``)."""
    return env_choice("VOXFX_SPARSE_SCAN_JOIN", SCAN_JOIN, given, default="1")


def inclusive_scans(a, out_a, b, out_b, sums=None):
    """``inclusive_scan(a, out_a, sums)`` and ``inclusive_scan(b, out_b, sums)`` — a of rows
    (rows, n_a), b of one row (n_b,), C-contiguous int32 — in one launch of
    scan_lookback_pair where ``SCAN`` is "lookback" and the status words hold both sets'
    tiles, else the two calls: the same integers either way."""
    import cupy as cp

    from . import sparse_pressure_setup

    n_a, n_b = int(a.shape[-1]), int(b.shape[-1])
    rows_a = 1 if a.ndim == 1 else int(a.shape[0])
    fits = (sparse_pressure_setup.SCAN == "lookback" and a.ndim in (1, 2) and b.ndim == 1
            and all(x.dtype == cp.int32 and x.flags.c_contiguous for x in (a, b, out_a, out_b))
            and n_a > 0 and n_b > 0 and rows_a > 0)
    wide = fits and _wide((rows_a, n_a), (1, n_b))
    if wide:
        tile_a = tile_b = _WIDE_TILE
        tiles_a, tiles_b = -(-n_a // tile_a), -(-n_b // tile_b)
    elif fits:
        floor = int(scan_tile_floor())
        tile_a, tile_b = scan_tile(n_a, floor), scan_tile(n_b, floor)
        tiles_a, tiles_b = -(-n_a // tile_a), -(-n_b // tile_b)
        fits = tiles_a * rows_a + tiles_b <= _LOOKBACK_WORDS
    if not fits:
        inclusive_scan(a, out_a, sums)
        inclusive_scan(b, out_b, sums)
        return out_a, out_b
    status, ctrl = lookback_state(cp)
    grid, i32 = (tiles_a * rows_a + tiles_b,), np.int32
    if wide:  # the same arguments
        _S.launch_grid("scan_lookback_pair_wide", grid, (THREADS,),
                       (a, i32(n_a), i32(tile_a), i32(tiles_a), i32(rows_a), out_a, b, i32(n_b), i32(tile_b),
                        i32(tiles_b), out_b, status, ctrl))
    else:
        _S.launch_grid("scan_lookback_pair", grid, (THREADS,),
                       (a, i32(n_a), i32(tile_a), i32(tiles_a), i32(rows_a), out_a, b, i32(n_b), i32(tile_b),
                        i32(tiles_b), out_b, status, ctrl))
    return out_a, out_b


def lookback_state(cp):
    """scan_lookback's status words (zeroed once) and ctrl (epoch 1, ticket 0, done 0) for the
    current device and stream: kept, each launch leaves them ready for the next (the kernel's
    notes); launches on one stream run in turn, so they never share a ticket counter."""
    key = (cp.cuda.runtime.getDevice(), cp.cuda.get_current_stream().ptr)  # no Device object a scan
    state = _lookback.get(key)
    if state is None:
        state = _lookback[key] = (cp.zeros(_LOOKBACK_WORDS, cp.uint64), cp.asarray(np.array([1, 0, 0], np.uint32)))
    return state
