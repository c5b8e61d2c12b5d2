"""What CuPy's small operations cost on the host (issue 24: the topology stage is host-bound): µs of
host time per call, best of five runs of many calls each, for the operations a substep's Python
does between its launches (views, allocations from the memory pool, a kernel launch of many
arguments by the ways CuPy takes them, a read of a few flags). The device queue is drained
between runs; no call here waits on the device but the read.

    python3 bench/cupy_host_ops.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import os
import timeit

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.grid.sparse_mac import carve  # noqa: E402

SOURCE = r"""
extern "C" __global__ void nothing(const unsigned char* a, long long n, float x, float y, float z, float h,
                                   int c, int nx, int ny, int nz, const long long* keys, const int* slots,
                                   long long nk, const int* index, int lx, int ly, int lz, int dx, int dy, int dz,
                                   unsigned char* out, unsigned long long* flag, const float* vel,
                                   unsigned int* speed2, int mode)
{
    if (threadIdx.x == 0 && blockIdx.x == 0 && n < 0) flag[0] = 1ULL;
}
"""


def nothing_arguments(a):
    """``nothing``'s 25 arguments (mark_occupied's shape) from *a*: (bytes, keys, slots and index, flags, float32
    view, uint32 view), arrays or pointers."""
    f32, i32, i64 = np.float32, np.int32, np.int64
    return (a[0], i64(5), f32(0), f32(0), f32(0), f32(1), i32(1), i32(64), i32(64), i32(64), a[1], a[2],
            i64(4), a[2], i32(-1), i32(-1), i32(-1), i32(10), i32(10), i32(10), a[0], a[3], a[4], a[5], i32(2))


def best_us(fn, number, stream, runs=5):
    """µs of host time a call of *fn*: the best of *runs* runs of *number* calls, after one call (compiles,
    pool blocks), *stream* drained before each run and after the last."""
    fn()
    best = float("inf")
    for _ in range(runs):
        stream.synchronize()
        best = min(best, timeit.timeit(fn, number=number) / number)
    stream.synchronize()
    return best * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    import cupy as cp

    calls = args.calls
    stream = cp.cuda.get_current_stream()
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, CuPy {cp.__version__}, "
          f"NumPy {np.__version__}")

    def us(fn, number=calls):
        return best_us(fn, number, stream)

    buf = cp.zeros(1 << 20, cp.uint8)
    small = cp.arange(4000, dtype=cp.int32)
    other = cp.arange(3000, dtype=cp.int32)
    flags = cp.zeros(5, cp.uint64)
    data = buf.data
    module = cp.RawModule(code=SOURCE)
    raw = module.get_function("nothing")
    function = raw.kernel
    i32 = np.int32
    arrays = (buf, small, other, flags, buf.view(cp.float32), buf.view(cp.uint32))
    pointers = tuple(a.data for a in arrays)

    with_arrays, with_pointers = nothing_arguments(arrays), nothing_arguments(pointers)
    try:  # the scalars as CuPy's CScalar objects made once (sparse_topology_args, helper h21k)
        from cupy._core._scalar import CScalar

        with_kept = tuple(a if isinstance(a, (cp.ndarray, cp.cuda.MemoryPointer)) else CScalar(a) for a in with_arrays)
    except Exception:  # no such class in this CuPy: the rows time the plain arguments
        def CScalar(value):
            return value

        with_kept = with_arrays
    addresses = {}  # a device address → its kept CScalar (a T* argument's bytes: helper s23e's way, not taken)

    def pointer(a):
        value = a.data.ptr
        hit = addresses.get(value)
        if hit is None:
            hit = addresses[value] = CScalar(np.uint64(value))
        return hit

    with_addresses = tuple(pointer(a) if isinstance(a, cp.ndarray) else b for a, b in zip(with_arrays, with_kept))
    rows = [
        ("slice a[i:j]", lambda: buf[256:4096]),
        ("slice + view(uint32)", lambda: buf[256:4096].view(cp.uint32)),
        ("ndarray(n, dtype, memptr=data + offset)", lambda: cp.ndarray(960, cp.uint32, memptr=data + 256)),
        ("MemoryPointer + offset", lambda: data + 256),
        ("flags[i:i + 1] x5", lambda: tuple(flags[i:i + 1] for i in range(5))),
        ("empty(1 MiB) from the pool", lambda: cp.empty(1 << 20, cp.uint8)),
        ("zeros(1 MiB) from the pool", lambda: cp.zeros(1 << 20, cp.uint8)),
        ("full(1 MiB, nan) float32", lambda: cp.full(1 << 18, np.nan, cp.float32)),
        ("concatenate two int32 (4000 + 3000)", lambda: cp.concatenate([small, other])),
        ("ascontiguousarray(int32, int32)", lambda: cp.ascontiguousarray(small, dtype=cp.int32)),
        ("copy a[:n] = b (3000 int32)", lambda: small.__setitem__(slice(0, 3000), other)),
        ("copy a.data.copy_from_device_async(b.data)", lambda: small.data.copy_from_device_async(other.data,
                                                                                               other.nbytes)),
        ("RawKernel launch, 25 args (arrays)", lambda: raw((1,), (32,), with_arrays)),
        ("Function launch, 25 args (arrays)", lambda: function((1,), (32,), with_arrays)),
        ("RawKernel launch, 25 args (MemoryPointers)", lambda: raw((1,), (32,), with_pointers)),
        ("RawKernel launch, 25 args (arrays, scalars as kept CScalars)", lambda: raw((1,), (32,), with_kept)),
        ("RawKernel launch, 25 args (arrays as kept address CScalars, scalars kept)",
         lambda: raw((1,), (32,), with_addresses)),
        ("address of an array: a.data.ptr + a dict look-up",
         lambda: pointer(buf)),
        ("CScalar(np.int32) made", lambda: CScalar(i32(5))),
        ("flags.get() (5 uint64, a sync)", lambda: flags.get()),
        ("int(np.prod(count))", lambda: int(np.prod(5000))),
        ("os.environ.get", lambda: os.environ.get("VOXFX_SPARSE_TOPOLOGY", "")),
    ]
    cells = 3600 * 512  # the 8M dam break's pool: fused_tables' eleven arrays, one allocation each or carved
    tables = {"coords": (np.int32, (3600, 3)), "nbr27": (np.int32, (3600, 27)), "nbr": (np.int32, (6, cells)),
              **{f"mark{i}": (np.uint8, cells) for i in range(5)},
              **{f"face{i}": (np.float32, cells) for i in range(3)}}
    rows += [("tables: 11 empty at a 3,600-brick pool", lambda: [cp.empty(shape, dtype) for dtype, shape in
                                                                tables.values()]),
             ("tables: one carve (size class) of them", lambda: carve(cp, tables, classed=True))]
    print("operation | host µs a call")
    for name, fn in rows:
        print(f"{name} | {us(fn, calls if 'get()' not in name else calls // 4):.2f}")


if __name__ == "__main__":
    main()
