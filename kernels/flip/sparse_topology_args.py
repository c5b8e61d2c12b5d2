"""The sparse FLIP topology stage's kernel arguments made once (issue 24, helper h21k): the
scalars of its launches (``sparse_topology_gpu._reach``'s ``mark_occupied``, ``sparse_reach.launch_slots``,
``sparse_topology_update.launch_fused_update``'s three, ``sparse_topology_tables.fused_tables``' two)
as the objects CuPy launches with, kept, in place of NumPy scalars it converts each launch.

CuPy (14) turns every argument of a ``RawKernel`` launch into a ``CPointer`` (``cupy/cuda/function.pyx``,
``_pointer``): a NumPy scalar into a new ``CScalar`` (its dtype looked up and checked, its value
stored), a CuPy array into a new ``CArray`` (its shape and strides copied into an allocation), a
``MemoryPointer`` into a new ``CIntptr``, and a ``CPointer`` it is given as it is. The stage's 7
launches a changed substep take ~170 arguments, ~80 of them scalars, most of which hold from substep
to substep: the grid's frame, dims, closed flag and class limit, the brick index's corner and dims,
the counts (particles, slots, entries, tiles) while they stay. Here each is a ``CScalar`` made once:
the grid's kept on the grid while its ``origin``, ``h`` and ``shape`` are the same objects (``_frame``'s
way), the index's while its scalar objects are (the fused update hands them on), integers in a
bounded table by (kind, value). The kernels get the same bytes: a ``CScalar`` of a NumPy scalar
stores that scalar's value in its dtype, as CuPy's own conversion does at the launch.

``VOXFX_SPARSE_TOPOLOGY_ARGS`` (``args_mode``): ``kept`` (the default) or ``plain`` (the A/B
baseline: NumPy scalars, CuPy converting them each launch). Where CuPy has no ``CScalar`` taking
a NumPy scalar (NumPy, another version) both are ``plain``.

Measured (NVIDIA H100 80GB HBM3, driver 580.159.04, CuPy 14.2, one call; bench/RESULTS.md, h21k):
``bench/cupy_host_ops.py`` a launch of 25 arguments 10.4 µs, 5.9 with its scalars kept ``CScalar``s
(one made 0.44 µs; ``MemoryPointer``s in place of the arrays no cheaper: 10.7);
``bench/flip_sparse_topology_stage.py`` at 8M, kept and plain alternating in one simulation: the
stage 0.631 → 0.601 and 1.173 → 1.137 ms in two processes, the launch calls' host 116 → 87 and
222 → 165 µs a changed substep. The 8M row in separate processes (main against this) was not
resolved (0.49 / 0.51 against 0.52 / 0.53 ms, the processes' spread).
"""

from __future__ import annotations

import numpy as np

from ..settings import env_choice

ARGS_MODES = ("kept", "plain")  # VOXFX_SPARSE_TOPOLOGY_ARGS (module notes)
_TABLE_LIMIT = 4096  # integers kept: the table is emptied past this (a run of ever new counts)
_kept_ints: dict = {}
_maker = []  # [CScalar or None], looked up once


def args_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY_ARGS`` (``ARGS_MODES``; default kept)."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_ARGS", ARGS_MODES)


def _cscalar():
    """CuPy's ``CScalar`` class (``cupy._core._scalar``) where it takes a NumPy scalar, else None."""
    if not _maker:
        try:
            from cupy._core._scalar import CScalar
            from cupy.cuda.function import CPointer

            if not isinstance(CScalar(np.int32(7)), CPointer):  # a launch would convert it again
                CScalar = None
        except Exception:  # no CuPy, or one whose CScalar is not built this way: plain arguments
            CScalar = None
        _maker.append(CScalar)
    return _maker[0]


def kept(plain: bool = False) -> bool:
    """Whether the arguments are made once here: ``args_mode()`` kept and a CuPy ``CScalar`` to make them
    (*plain*: the caller has read the mode as plain)."""
    return not plain and _cscalar() is not None and args_mode() == "kept"


def made(values, on: bool = True) -> tuple:
    """*values* (NumPy scalars) as ``CScalar``s when *on* (``kept()``), else as they are."""
    if not on:
        return tuple(values)
    maker = _cscalar()
    return tuple(maker(v) for v in values)


def _integer(kind, value: int, on: bool):
    if not on:
        return kind(value)
    key = (kind, value)
    hit = _kept_ints.get(key)
    if hit is None:
        if len(_kept_ints) >= _TABLE_LIMIT:
            _kept_ints.clear()
        hit = _kept_ints[key] = _cscalar()(kind(value))
    return hit


def i64(value: int, on: bool):
    """An int64 argument (kept by value when *on*)."""
    return _integer(np.int64, int(value), on)


def i32(value: int, on: bool):
    """An int32 argument (kept by value when *on*)."""
    return _integer(np.int32, int(value), on)


def grid_args(grid, on: bool) -> tuple:
    """((ox, oy, oz, h, 1/h), (nx, ny, nz), closed, class limit) of *grid* for the kernels
    (``sparse_gpu_base._frame``, ``_dims``, ``sparse_reach.grid_limit``): with *on* made once and kept
    on the grid while its ``origin``, ``h``, ``shape`` and ``closed`` are the same objects, else the
    NumPy scalars as before (the limit None: ``sparse_reach`` makes it where it launches)."""
    from .sparse_gpu_base import _dims, _frame
    from .sparse_reach import grid_limit

    if not on:  # the limit as before: only where a launch takes it (None here)
        return _frame(grid), _dims(grid), np.int32(grid.closed), None
    held = getattr(grid, "_topology_args", None)
    if held is not None:
        key = held[0]
        if key[0] is grid.origin and key[1] is grid.h and key[2] is grid.shape and key[3] is grid.closed:
            return held[1]
    key = (grid.origin, grid.h, grid.shape, grid.closed)
    make = _cscalar()
    out = (made(_frame(grid)), made(_dims(grid)), make(np.int32(grid.closed)), make(np.int32(grid_limit(grid))))
    try:
        grid._topology_args = (key, out)
    except AttributeError:  # a grid that takes no attributes: made each time
        pass
    return out


def index_args(grid, index, on: bool) -> tuple:
    """``brick_index``'s seven arguments (the table, its corner and dims) with the six scalars made
    once while they are the same objects (*on*), else *index*."""
    if not on:
        return index
    held = getattr(grid, "_index_args", None)
    if held is not None:
        k = held[0]  # six identity tests (~0.2 µs; a generator over them ~1 µs)
        if (k[0] is index[1] and k[1] is index[2] and k[2] is index[3] and k[3] is index[4] and k[4] is index[5]
                and k[5] is index[6]):
            return (index[0], *held[1])
    scalars = made(index[1:])
    try:
        grid._index_args = (tuple(index[1:]), scalars)
    except AttributeError:
        pass
    return (index[0], *scalars)


def flag_words(flags):
    """The kernels' one-flag arguments (``sparse_topology_gpu._reach``'s flags, uint64 words): each flag's device
    address (a ``MemoryPointer`` into *flags*, ~0.3 µs of host time) in place of a one-word slice (a CuPy view each);
    moved here from ``sparse_topology_gpu`` (helper s22r)."""
    data = flags.data
    return (data, data + 8, data + 16, data + 24, data + 32)  # uint64 words


def flags_host(grid):
    """The merged pipeline's page-locked host words for the flags read (kept on the grid: no
    host array made and no staging copy by the driver for a pageable one)."""
    host = getattr(grid, "_flags_host", None)
    if host is None:
        import cupyx

        host = grid._flags_host = cupyx.empty_pinned(5, np.uint64)
    return host
