"""The sparse pressure solve's set-up on the device in four launches (issue 24): the
right-hand side, the cell types and the sealed-region labels that ``sparse_pressure``'s
``pressure_rhs`` builds with CuPy array code (~4 ms at 8M particles on an H200, 2.5 ms of
it the compaction and union-find of the labels), by the kernels of
``cuda/flip_sparse_pressure_cells.cu``:

  cells_rhs     b = −(h/Δt)·D on FLUID cells (seed 003 §8; D over the faces as the
                projection sees them), plus the density correction's (h²/Δt)·s from the
                cell's particle count where a ``density.Crowding`` is given, "touches AIR",
                parent = self or the lowest FLUID neighbour below (``LINK_INIT``);
  cells_hook    union-find over FLUID cells' +x, +y, +z FLUID links, straight on the flat
                cells (no compaction), roots the lowest flat index of their component
                (``HOOK`` "bricks": cells_hook_bricks, the links inside each brick in
                shared memory — or cells_hook_bricks_local, ``BRICK_LINKS`` — then
                cells_hook_faces, those across brick faces; ``CELLS_BRICK`` "fused", the
                default: cells_rhs_brick, these and cells_rhs in one launch);
  cells_label   each FLUID cell's root, and reach[root] for cells that touch AIR;
  cells_sealed  the count of FLUID cells whose component reaches no AIR, and the solver's
                cell types (each sealed region's pin AIR).

and after the solve

  project_faces the projection's three face updates and the solid faces in one pass
                (``sparse_pressure.project``: ~60 array operations, ~1.9 ms at 8M particles
                on an H100, for a pass whose bandwidth floor is ~0.02 ms); project_faces_fluid
                the same from the brick table with the fluid faces' masks (``PROJECT_FLUID``).

One host read (the count) decides (``stage`` has none: the solve reads the count with the
unknowns' sizes, ``sparse_pressure_setup.staged_setup``): no sealed region (the usual
substep) and the result is (b, cell types, None, None); otherwise ``assemble`` pins each sealed region's lowest cell
and makes b compatible as ``sparse_pressure.solver_cells`` / ``pressure_rhs`` do (the same
values: b bit for bit, the kernels compiled without FMA contraction).

``sparse_pressure.SETUP_KERNELS`` (``VOXFX_SPARSE_PRESSURE_CELLS``) picks this path on CuPy
("fused") or the array code ("reference"). Host harness:
tests/unit/test_cuda_sparse_pressure_cells_host.py; device: tests/gpu/test_flip_sparse_pressure_gpu.py.
"""

from __future__ import annotations

import os

import numpy as np

from ..grid.launch import THREADS, Kernels
from ..settings import env_choice
from . import density
from .grid import AIR, FLUID, SOLID

_K = Kernels("flip_sparse_pressure_cells.cu", ("--fmad=false",), THREADS,
             defines={"CELL_AIR": AIR, "CELL_FLUID": FLUID, "CELL_SOLID": SOLID})
_KB = Kernels("flip_sparse_pressure_cells_brick.cu", ("--fmad=false",), THREADS,
              defines={"CELL_AIR": AIR, "CELL_FLUID": FLUID, "CELL_SOLID": SOLID})
KERNELS = ("cells_rhs", "cells_hook", "cells_hook_bricks", "cells_hook_bricks_local", "cells_hook_faces",
           "cells_label", "cells_sealed", "project_faces", "project_faces_fluid", "warm_guess", "unknowns_scatter",
           "warm_carry", "unknowns_scatter_carry", "warm_relax_mark", "warm_relax_grow", "warm_relax_sweep")
# cells_rhs starts each FLUID cell's tree at its lowest FLUID neighbour below it ("1") or at
# itself ("0"): the same labels (each component's lowest flat index) either way.
LINK_INIT = os.environ.get("VOXFX_SPARSE_LABEL_LINK_INIT", "1") != "0"
# The labels' union-find: "bricks" (each brick's links in shared memory, then the links
# across brick faces: two launches) or "cells" (every link on the flat cells, one launch);
# the same labels (each component's lowest flat index). 8M dam break on an H100, alternating
# in one process: cells_hook 0.36 ms → cells_hook_bricks 0.08 + cells_hook_faces 0.02 ms, the
# pressure stage 5.55 → 5.25 ms, the same pressure bit for bit
# (tests/gpu/test_flip_sparse_pressure_hook_gpu.py).
HOOK = os.environ.get("VOXFX_SPARSE_LABEL_HOOK", "bricks")
_BRICK_THREADS = 128  # cells_hook_bricks' block: 4 of a brick's 512 cells a thread
# How "bricks" finds a brick's inner links (``VOXFX_SPARSE_LABEL_BRICK_LINKS``, read at each
# set-up): "local" (the default since session 17: cells_hook_bricks_local, the brick's cells read
# once into shared memory, the links at local + 1, + 8, + 64, the x runs joined without atomics;
# 0.037 ms at 8M on an H100) or "nbr" (cells_hook_bricks: the neighbour table's +x, +y, +z rows,
# then the cell behind each — two dependent global reads a link; 0.079 ms, ~0.65 TB/s). The same
# parents (host harness, tests/gpu/test_flip_sparse_pressure_hook_gpu.py; bench/RESULTS.md,
# seventeenth session).
BRICK_LINKS = ("local", "nbr")


def brick_links(given=None) -> str:
    """cells_hook_bricks' way to a brick's inner links (``BRICK_LINKS``)."""
    return env_choice("VOXFX_SPARSE_LABEL_BRICK_LINKS", BRICK_LINKS, given)
# The stage's first launches (``VOXFX_SPARSE_CELLS_BRICK``, read at each set-up; issue 24, helper
# s22e): "fused" (the default: cells_rhs_brick, a block a pool slot, the neighbours from the brick
# table, the brick's links in shared memory and the links across each face joined by the second of
# its two bricks to finish; ``cuda/flip_sparse_pressure_cells_brick.cu``), "apart" (cells_rhs,
# cells_hook_bricks_local, cells_hook_faces: three launches over the neighbour table's rows) or
# "inner" (cells_rhs_brick joining the brick's inner links alone, then cells_hook_faces). Then
# cells_label and cells_sealed either way: the same b, labels, reach, count and kinds (GPU tests).
# H100 80GB HBM3, 8M dam break (bench/flip_sparse_setup_kernels.py, ways in turn each substep): the
# cells stage 0.178 ms in 5 launches → 0.113–0.120 in 3 (cells_rhs_brick 0.080–0.086 against
# cells_rhs + the two hooks 0.146; "inner" 0.127 in 4); the 8M row, both orders, pressure 3.40 →
# 3.22–3.24 ms. Measured and dropped: the brick's values staged in shared memory first (0.093–0.104).
CELLS_BRICK = ("fused", "apart", "inner")
_FUSED_THREADS = 128  # cells_rhs_brick's block: 4 of a brick's 512 cells a thread (256, 512: no faster)
_EPOCH = [0]  # the last stage's epoch (cells_rhs_brick's face tickets)


def cells_brick(given=None) -> str:
    """The stage's first launches (``CELLS_BRICK``)."""
    return env_choice("VOXFX_SPARSE_CELLS_BRICK", CELLS_BRICK, given)


# VOXFX_SPARSE_CELLS_PAIRS (read at each set-up; issue 24, helper s23i; where the brick table is read:
# CELLS_BRICK "fused" or "inner"): "links" — cells_rhs_brick_pairs joins of a face's 64 links only
# those whose face predecessor is no FLUID–FLUID link (a full face: 1 unite; "fused" only); "label" —
# cells_label_brick, a block a slot, finds on the global parents only the roots of cells whose parent
# is themselves or outside their brick, the rest in shared memory; "1" both (the default since
# session 25); "0" neither (the kernels before, the A/B). The same labels, reach, count and kinds
# (host harness: tests/unit/test_cuda_sparse_pressure_cells_brick_host.py; GPU file
# tests/gpu/test_flip_sparse_cells_pairs_gpu.py, the pressure bit for bit). H100 80GB HBM3, 8M dam
# break, each set-up kernel's device time (bench/flip_sparse_setup_kernels.py, the ways in turn, two
# processes): the cells stage 0.134 / 0.122 ms ("0") → 0.108 / 0.107 ("1"; "links" alone 0.113 / 0.111,
# "label" alone 0.122 / 0.121: its pass is quicker after the paired links); the 8M row's substep A/B
# (24 substeps, both orders) −0.11 / +0.07 ms, within the host's noise.
CELLS_PAIRS = ("1", "0", "links", "label")


def cells_pairs(given=None) -> str:
    """The face links by pairs and the label pass by brick (``CELLS_PAIRS``)."""
    return env_choice("VOXFX_SPARSE_CELLS_PAIRS", CELLS_PAIRS, given)


def _brick_table(grid, n):
    """The grid's brick table where cells_rhs_brick can read it (int32, 27 slots a slot, every
    slot of the *n* cells), else None."""
    import cupy as cp

    t = getattr(grid, "brick_nbr", None)
    ok = (t is not None and t.dtype == cp.int32 and t.ndim == 2 and t.shape[1] == 27 and t.shape[0] * 512 >= n
          and t.flags.c_contiguous)
    return t if ok else None


def _face_tickets(grid, slots):
    """(cells_rhs_brick's face tickets, 3 a slot, kept on the grid; this stage's epoch): the
    tickets hold earlier stages' epochs, never the new one, so they are made (zeros) only when
    the pool grows."""
    import cupy as cp

    _EPOCH[0] = _EPOCH[0] % (2 ** 31 - 2) + 1
    kept = getattr(grid, "_face_tickets", None)
    if kept is None or kept.shape[0] < 3 * slots:
        kept = cp.zeros(3 * slots, cp.int32)
        try:
            grid._face_tickets = kept
        except AttributeError:  # a grid that takes no attributes: fresh tickets each stage
            pass
    return kept, np.int32(_EPOCH[0])


# Around the solve on CuPy (``VOXFX_SPARSE_PRESSURE_AROUND``, read at each solve): "kernels"
# (default) — the warm start's x₀ (warm_guess), the flat pressure from the solver's unknowns
# (unknowns_scatter) and the carried pressure (warm_carry) one launch each, and no FLUID mask
# after the solve (``sparse_pressure.solve_pressure``) — or "arrays", the CuPy array code
# (isfinite + where; zeros + a scatter; == + where + astype, twice). The same bits. Each CuPy
# array operation took ~40 µs of host on this host-bound path: 8M dam break on an H100 (substeps
# alternating in one simulation, bench/flip_sparse_pressure_timeline.py, medians of 5): x₀ 0.074
# → 0.041 ms, the scatter 0.117 → 0.049, the mask 0.128 → 0, the carry 0.082 → 0.043; the
# pressure stage 4.79 → 4.44 ms.
AROUND = ("kernels", "arrays")


def around_kernels(given=None) -> bool:
    """Whether the warm start, the pressure's scatter and the carry take one kernel each (``AROUND``)."""
    return env_choice("VOXFX_SPARSE_PRESSURE_AROUND", AROUND, given, default="kernels") == "kernels"


def warm_guess(carried):
    """x₀ = carried where finite, else 0 (``sparse_pressure_warm.initial_guess``, new cells
    "zero", no sealed region) in one launch."""
    import cupy as cp

    n = int(carried.shape[0])
    out = cp.empty(n, cp.float32)
    _K.launch("warm_guess", n, (carried, np.int32(n), out))
    return out


def warm_relax(carried, kind, nbr, b, x0, sweeps, width):
    """``sparse_pressure_warm.relax_guess`` in 1 + *width* + *sweeps* launches (the same bits):
    the changed unknowns marked, grown *width* cells, *sweeps* Jacobi sweeps from *x0*."""
    import cupy as cp

    n = int(x0.shape[0])
    kind = cp.ascontiguousarray(kind, dtype=cp.uint8)
    nbr = cp.ascontiguousarray(nbr, dtype=cp.int32)
    mark, grown = cp.empty(n, cp.uint8), cp.empty(n, cp.uint8)
    _K.launch("warm_relax_mark", n, (carried, kind, nbr, np.int32(n), mark))
    for _ in range(width):
        _K.launch("warm_relax_grow", n, (mark, kind, nbr, np.int32(n), grown))
        mark, grown = grown, mark
    x, out = x0, cp.empty(n, cp.float32)
    for i in range(sweeps):
        _K.launch("warm_relax_sweep", n, (x, b, kind, nbr, mark, np.int32(n), out))
        x, out = out, (cp.empty(n, cp.float32) if i == 0 else x)  # x0 stays the caller's
    return x


def unknowns_scatter(position, x, m, size, out=None):
    """The flat pressure (*size* cells) from the compacted *x* of *m* unknowns: x at each
    unknown (*position*: flat → unknown, m where none), 0 elsewhere, in one launch (into *out*
    where given: ``sparse_pressure_scatter_ahead`` launches it again)."""
    import cupy as cp

    out = cp.empty(int(size), cp.float32) if out is None else out
    _K.launch("unknowns_scatter", int(size), (position, x, np.int32(m), np.int32(size), out))
    return out


def unknowns_scatter_carry(position, x, m, size, cell, out=(None, None)):
    """(``unknowns_scatter``'s p, ``warm_carry``'s carried pressure of it) in one launch: a warm
    solve without sealed regions (``sparse_pressure.solve_pressure``), the same bits. Two arrays, as
    the two launches made: one of 2·size would keep p's half alive with the carry between substeps.
    *out*: (p, carried) to write into where not None (``sparse_pressure_scatter_ahead``)."""
    import cupy as cp

    n = int(size)
    p, carried = (cp.empty(n, cp.float32) if a is None else a for a in out)  # apart: p is let go before the carry
    _K.launch("unknowns_scatter_carry", n, (position, x, np.int32(m), np.int32(n), cell.astype(cp.uint8, copy=False),
                                            np.float32(np.nan), p, carried))
    return p, carried


def warm_carry(cell, p):
    """p on FLUID cells, NaN elsewhere (``sparse_pressure_warm.carry``) in one launch."""
    import cupy as cp

    n = int(p.shape[0])
    out = cp.empty(n, cp.float32)
    _K.launch("warm_carry", n, (cell.astype(cp.uint8, copy=False), p, np.int32(n), np.float32(np.nan), out))
    return out


def assemble(grid, b, label, reach, sealed, xp):
    """(b, kind, enclosed, labels) of ``sparse_pressure.pressure_rhs`` from the kernels'
    outputs: *b* the raw right-hand side, *label* per cell its component's root (size off
    FLUID), *reach* (size + 1 flags) the roots that touch AIR, *sealed* the count of FLUID
    cells in sealed regions."""
    from .sparse_pressure import _region_mean_removed

    cell = grid["cell"]
    kind = cell.copy()
    if sealed == 0:
        return b, kind, None, None
    labels = label.astype(xp.int64)
    enclosed = (cell == FLUID) & (reach[labels] == 0)
    pins = enclosed & (labels == xp.arange(grid.size, dtype=labels.dtype))
    kind[pins] = AIR
    b = _region_mean_removed(b, enclosed, labels, xp)
    b = xp.where(kind == FLUID, b, np.float32(0)).astype(xp.float32)
    return b, kind, enclosed, labels


def crowd_args(grid, crowding):
    """cells_rhs's density-correction arguments (``density.device_args`` over at least the
    grid's cells, one-dimensional counts)."""
    return density.device_args(crowding, grid.size, grid.h, flat=True)


def pressure_rhs(grid, dt, crowding=None):
    """``sparse_pressure.pressure_rhs(grid, dt, crowding)`` on CuPy by the four kernels and one
    host read; None where the grid's tables are not the kernels' (64-bit indices, no cells)
    or the *crowding*'s counts are not (``crowd_args``)."""
    import cupy as cp

    staged = stage(grid, dt, crowding)
    if staged is None:
        return None
    b, _, label, reach, count = staged
    return assemble(grid, b, label, reach, int(count.get()[0]), cp)  # the one host read


def stage(grid, dt, crowding=None):
    """The four kernels without a host read: (raw b, kind, label, reach, count) — *kind* the
    solver's cell types with the sealed regions' pins (``assemble``'s), *count* (device,
    1 int32) the sealed FLUID cells, read later with the unknowns' sizes
    (``sparse_pressure_setup.staged_setup``); b with the *crowding*'s source (a
    ``density.Crowding``: the density correction); None as ``pressure_rhs``."""
    import cupy as cp

    n = grid.size
    if n == 0 or grid.nbr.dtype != cp.int32 or grid.nbr.shape != (6, n):
        return None
    crowd = crowd_args(grid, crowding)
    if crowd is None:
        return None
    u8 = [grid[name].astype(cp.uint8, copy=False) for name in ("cell", "solid", *grid.EXISTS)]
    cell, solid, exists = u8[0], u8[1], u8[2:]
    faces = [grid[name] for name in grid.FACES] + [grid["solid_" + name] for name in grid.FACES]
    b, touch, parent = cp.empty(n, cp.float32), cp.empty(n, cp.uint8), cp.empty(n, cp.int32)
    # cells_label's reach and cells_sealed's count: zeroed by cells_rhs (two memsets fewer, h21f)
    label, reach, count = cp.empty(n, cp.int32), cp.empty(n + 1, cp.uint8), cp.empty(1, cp.int32)
    scale = np.float32(-grid.h / float(dt))  # as pressure_rhs: −(h/Δt) rounded to float32 once
    way, pairs = cells_brick(), cells_pairs()
    nbr27 = _brick_table(grid, n) if HOOK == "bricks" and n % 512 == 0 and way != "apart" else None
    if nbr27 is not None:  # CELLS_BRICK "fused" ("inner": and cells_hook_faces) for _apart's three launches
        tickets, epoch = _face_tickets(grid, n // 512)
        name = "cells_rhs_brick_pairs" if pairs in ("links", "1") and way == "fused" else "cells_rhs_brick"
        _KB.launch_grid(name, (n // 512,), (_FUSED_THREADS,),
                        (cell, solid, *faces, *exists, nbr27, np.int32(n), scale, b, touch, parent, *crowd, reach,
                         count, tickets, epoch, np.int32(way != "inner")))
        if way == "inner":
            _K.launch("cells_hook_faces", (n // 512) * 192, (cell, cp.ascontiguousarray(grid.nbr), np.int32(n), parent))
    else:
        _apart(grid, n, cell, solid, faces, exists, scale, b, touch, parent, crowd, reach, count)
    if nbr27 is not None and pairs in ("label", "1"):
        _KB.launch_grid("cells_label_brick", (n // 512,), (_FUSED_THREADS,),
                        (cell, touch, np.int32(n), parent, label, reach))
    else:
        _K.launch("cells_label", n, (cell, touch, np.int32(n), parent, label, reach))
    kind = cp.empty(n, cp.uint8)
    _K.launch("cells_sealed", n, (cell, label, np.int32(n), reach, count, kind))
    return b, kind.astype(grid["cell"].dtype, copy=False), label, reach, count


def _apart(grid, n, cell, solid, faces, exists, scale, b, touch, parent, crowd, reach, count):
    """The stage's first launches over the neighbour table (``CELLS_BRICK`` "apart"): cells_rhs,
    then the union-find (``HOOK``, ``BRICK_LINKS``)."""
    import cupy as cp

    nbr = cp.ascontiguousarray(grid.nbr)
    _K.launch("cells_rhs", n, (cell, solid, *faces, *exists, nbr, np.int32(n), scale, np.int32(LINK_INIT), b, touch,
                               parent, *crowd, reach, count))
    if HOOK == "bricks" and n % 512 == 0:
        inner = "cells_hook_bricks_local" if brick_links() == "local" else "cells_hook_bricks"
        _K.launch_grid(inner, (n // 512,), (_BRICK_THREADS,), (cell, nbr, np.int32(n), parent))
        _K.launch("cells_hook_faces", (n // 512) * 192, (cell, nbr, np.int32(n), parent))
    elif HOOK in ("bricks", "cells"):
        _K.launch("cells_hook", n, (cell, nbr, np.int32(n), parent))
    else:
        raise ValueError(f"VOXFX_SPARSE_LABEL_HOOK must be bricks or cells, not {HOOK!r}")


# The projection's neighbours and the fluid faces (``VOXFX_SPARSE_PROJECT_FLUID``, read at each
# projection; issue 24, helper h21d): "0" (the default) project_faces reads each face's lower
# neighbour from the 24 B a cell neighbour index and sparse_transfer.fluid_faces makes the
# masks in a launch of its own after it; "1" project_faces_fluid takes the neighbours from the
# brick table (the same entries) and writes the fluid faces' masks in the same pass, kept on
# the grid for the next ``sparse_gpu.fluid_faces`` of these cell types (``projected_fluid``):
# one launch and one pass over the cells fewer. The same faces and masks (host harness; GPU
# tests). H100 80GB HBM3 (driver 580.159.04), 8M after 4 substeps (3,258 bricks, 1.67M pool cells),
# the stage from the same u* and p, the ways in turn (bench/flip_sparse_g2p_project.py, medians of 9
# and 7, two calls): project 0.039 → 0.037 ms, fluid faces + 2 rings 0.092 → 0.083, the stage 0.131
# → 0.120; the 8M row (separate processes alternating) not resolved: project stage 0.21 / 0.21 →
# 0.21 / 0.20 ms — there the stage is paced by the host after the pressure's last read (its
# sub-stages: project 0.082 / 0.083 → 0.099 / 0.093, the tail 0.123 / 0.124 → 0.114 / 0.106). Opt-in.
PROJECT_FLUID = ("0", "1")


def project_fluid(given=None) -> bool:
    """Whether the projection writes the fluid faces' masks too (``PROJECT_FLUID``)."""
    return env_choice("VOXFX_SPARSE_PROJECT_FLUID", PROJECT_FLUID, given) == "1"


def project(grid, p, dt) -> bool:
    """``sparse_pressure.project(grid, p, dt)`` on CuPy by project_faces (the same values bit
    for bit: no FMA contraction), or project_faces_fluid with the fluid faces' masks kept
    (``PROJECT_FLUID``); False where the grid's tables are not the kernel's."""
    import cupy as cp

    n = grid.size
    if n == 0 or grid.nbr.dtype != cp.int32 or grid.nbr.shape != (6, n) or p.dtype != cp.float32:
        return False
    u8 = [grid[name].astype(cp.uint8, copy=False) for name in ("cell", "solid", *grid.EXISTS)]
    faces = [grid[name] for name in grid.FACES] + [grid["solid_" + name] for name in grid.FACES]
    out = [cp.empty(n, cp.float32) for _ in grid.FACES]
    c = np.float32(float(dt) / grid.h)  # as project: Δt/h rounded to float32 once
    nbr27 = grid.brick_nbr
    fused = project_fluid() and u8[0] is grid["cell"] and nbr27 is not None and nbr27.shape[0] * 512 >= n
    if fused:
        masks = tuple(cp.empty(n, cp.uint8) for _ in grid.FACES)
        _K.launch("project_faces_fluid", n, (u8[0], u8[1], *faces, *u8[2:], nbr27, np.int32(n),
                                             cp.ascontiguousarray(p), c, *out, *masks))
    else:
        _K.launch("project_faces", n, (u8[0], u8[1], *faces, *u8[2:], cp.ascontiguousarray(grid.nbr), np.int32(n),
                                       cp.ascontiguousarray(p), c, *out))
    for name, f in zip(grid.FACES, out):
        grid[name] = f
    try:
        grid._projected_fluid = (grid["cell"], grid.brick_nbr, masks) if fused else None
    except AttributeError:  # a grid that takes no attributes: fluid_faces makes the masks
        pass
    return True


def projected_fluid(grid):
    """The fluid faces' masks project_faces_fluid wrote, where the grid's cell types and brick
    table are still those it read, else None; taken once (the next call answers None)."""
    kept = getattr(grid, "_projected_fluid", None)
    if kept is None:
        return None
    grid._projected_fluid = None
    cell, nbr27, masks = kept
    return masks if cell is grid["cell"] and nbr27 is grid.brick_nbr and masks[0].shape[0] == grid.size else None
