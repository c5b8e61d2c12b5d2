"""The topology stage's launch arguments made once (``sparse_topology_args``, issue 24, helper h21k):
a kept ``CScalar`` passes a kernel the bytes its NumPy scalar does, and the stage with
``VOXFX_SPARSE_TOPOLOGY_ARGS=kept`` (the default) gives the topology of ``plain`` to the bit."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_topology_gpu import assert_same_grids, drifted
from voxfx.kernels.flip import sparse_topology_args
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec

SOURCE = r"""
extern "C" __global__ void echo(int a, long long b, float c, double d, unsigned long long e, unsigned int f,
                                int g, long long h, unsigned char* out)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const void* values[8] = {&a, &b, &c, &d, &e, &f, &g, &h};
    const int sizes[8] = {4, 8, 4, 8, 8, 4, 4, 8};
    int at = 0;
    for (int i = 0; i < 8; ++i)
        for (int k = 0; k < sizes[i]; ++k)
            out[at++] = static_cast<const unsigned char*>(values[i])[k];
}
"""


def test_made_scalars_pass_the_numpy_scalars_bytes():
    """Each argument made here (``made``, ``i32``, ``i64``, kept and taken again) reaches the kernel as the
    bytes of the NumPy scalar CuPy converts itself: negative, large, NaN payload and −0 values."""
    import cupy

    assert sparse_topology_args._cscalar() is not None  # CuPy 14 has CScalar: "kept" is not plain here
    kernel = cupy.RawKernel(SOURCE, "echo")
    cases = [(-7, -(1 << 40), np.float32(-0.0), np.float64(np.nan), np.uint64((1 << 64) - 3), np.uint32(1 << 31),
              123456, 1 << 33),
             (0, 0, np.float32(3.4e38), np.float64(-1e-300), np.uint64(0), np.uint32(0), -1, -1)]
    for a, b, c, d, e, f, g, h in cases:
        plain = (np.int32(a), np.int64(b), c, d, e, f, np.int32(g), np.int64(h))
        out = {}
        for way in ("plain", "made"):
            if way == "plain":
                args = plain
            else:
                made = sparse_topology_args.made(plain[2:6])
                args = (sparse_topology_args.i32(a, True), sparse_topology_args.i64(b, True), *made,
                        sparse_topology_args.i32(g, True), sparse_topology_args.i64(h, True))
                again = (sparse_topology_args.i32(a, True), sparse_topology_args.i64(b, True))
                assert again[0] is args[0] and again[1] is args[1]  # kept by value
                assert sparse_topology_args.i32(a, True) is not sparse_topology_args.i64(a, True)  # kind in the key
            buf = cupy.zeros(48, cupy.uint8)
            kernel((1,), (32,), (*args, buf))
            out[way] = cupy.asnumpy(buf).tobytes()
        expected = b"".join(np.asarray(v).tobytes() for v in plain)
        assert out["plain"] == expected and out["made"] == expected


@pytest.mark.parametrize("margins", ["per brick", "one"])
def test_kept_arguments_give_the_plain_topology(monkeypatch, margins):
    """``VOXFX_SPARSE_TOPOLOGY_ARGS=kept`` against ``plain`` over substeps whose bricks come and go,
    whose pool grows and whose fast particles make the pipeline run again with the learned radius:
    the same keys, slots, free list, capacity, tables, marks, channels and learned margin to the bit;
    the kept way's grid holds its made scalars, the plain one's none."""
    import cupy

    from voxfx.kernels.flip.sparse_grid import BrickReach

    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (64, 48, 40))
    up = np.asarray(spec.upper)
    spread = rng.normal(0, 1, (20000, 3))
    grids = {way: SparseFlipGrid(spec, cupy, True) for way in sparse_topology_args.ARGS_MODES}
    grew, changed = 0, 0
    for step in range(10):
        scale = [0.06, 0.08, 0.10, 0.12, 0.13, 0.12, 0.14, 0.11, 0.10, 0.09][step] * up
        pos = cupy.asarray(drifted(0.4 * up, up, step, spread, scale))
        vel = cupy.asarray(rng.normal(0, 2.0 + 18.0 * (step % 3 == 2), (20000, 3)).astype(np.float32))
        reach = BrickReach(vel, 1 / 120, 9.81, spec.voxel_size) if margins == "per brick" else None
        for way, g in grids.items():
            monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_ARGS", way)
            capacity = g.capacity
            added, freed = g.update(pos, None if reach is not None else 3 + step % 4, reach=reach, scratch=True)
            if way == "kept":
                grew += int(g.capacity > capacity)
                changed += int(len(added) + len(freed) > 0)
        a, b = grids["kept"], grids["plain"]
        assert_same_grids(a, b, step, index=True)
    assert grew >= 2 and changed >= 6
    assert getattr(grids["kept"], "_topology_args", None) is not None
    assert getattr(grids["kept"], "_index_args", None) is not None
    assert getattr(grids["plain"], "_topology_args", None) is None
