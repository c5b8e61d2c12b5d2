"""``sparse_topology_args`` without CuPy's ``CScalar`` (this machine: no CuPy): every way is the plain
one, the arguments the NumPy scalars the launches took before (issue 24, helper h21k); the switch's
values checked. The made scalars' bytes and the kept way's topology are ``tests/gpu``'s
(``test_flip_sparse_topology_args_gpu.py``)."""

import numpy as np
import pytest

from voxfx.kernels.flip import sparse_topology_args as args
from voxfx.kernels.flip.sparse_gpu_base import _dims, _frame
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_reach import grid_limit
from voxfx.kernels.grid import GridSpec


def test_plain_arguments_are_the_numpy_scalars(monkeypatch):
    if args._cscalar() is not None:
        pytest.skip("CuPy with CScalar here: tests/gpu covers the kept way")
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_ARGS", "kept")
    assert args.kept() is False  # no CScalar: plain
    for kind, make in ((np.int32, args.i32), (np.int64, args.i64)):
        for value in (-5, 0, 1 << 30):
            a = make(value, False)
            assert type(a) is kind and int(a) == value
    values = (np.float32(-0.0), np.int32(3), np.uint64(7))
    made = args.made(values, False)
    assert all(a is b for a, b in zip(made, values))
    grid = SparseFlipGrid(GridSpec((0.5, 0.0, -1.0), 0.1, (40, 24, 16)), np, True)
    frame, dims, closed, limit = args.grid_args(grid, False)
    assert frame == _frame(grid) and dims == _dims(grid) and limit is None
    assert type(closed) is np.int32 and int(closed) == 1
    assert grid_limit(grid) > 0
    index = (np.zeros(1, np.int32), *(np.int32(v) for v in (-1, -1, -1, 7, 5, 4)))
    assert args.index_args(grid, index, False) is index


def test_the_switch_refuses_other_values(monkeypatch):
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_ARGS", "cached")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_TOPOLOGY_ARGS"):
        args.args_mode()
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_ARGS", "plain")
    assert args.args_mode() == "plain" and args.kept() is False
    monkeypatch.delenv("VOXFX_SPARSE_TOPOLOGY_ARGS")
    assert args.args_mode() == "kept"
