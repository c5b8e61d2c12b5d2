"""The topology stage's launch arguments made once (``sparse_topology_args``, issue 24, helper h21k):
a kept ``CScalar`` passes a kernel the bytes its NumPy scalar does, and the stage with
``VOXFX_SPARSE_TOPOLOGY_ARGS=kept`` (the default) gives the topology of ``plain`` to the bit."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_topology_gpu import ways_in_turn
from voxfx.kernels.flip import sparse_topology_args

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
    grids, grew, changed = ways_in_turn(monkeypatch, "VOXFX_SPARSE_TOPOLOGY_ARGS", sparse_topology_args.ARGS_MODES,
                                        "kept", "plain", margins, index=True)
    assert grew >= 2 and changed >= 6
    assert getattr(grids["kept"], "_topology_args", None) is not None
    assert getattr(grids["kept"], "_index_args", None) is not None
    assert getattr(grids["plain"], "_topology_args", None) is None
