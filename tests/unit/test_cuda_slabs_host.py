"""The CUDA kernels cut to a box (voxelize.cu's surface_columns and solid_flip_starts with
box arguments, issue 21 §6) set the voxels the NumPy reference sets in that box, checked
on the host without a GPU: nvcc builds the kernels as host functions (one "thread" per
call, atomics replaced by plain operations), launched over every work item in order.
The device comparison is tests/gpu/test_voxelize_slabs_gpu.py."""

import numpy as np
import pytest

from tests.cuda_host import VOXELIZE_STUBS
from tests.unit.test_cuda_exact import _build
from tests.unit.test_voxelize_slabs import CASES
from voxfx.kernels.grid import bitgrid
from voxfx.kernels.voxelize.slabs import SplitMesh
from voxfx.kernels.voxelize.solid import flip_starts_cpu, prefix_xor_rows
from voxfx.kernels.voxelize.surface import surface_voxels_cpu

# Input: T V nx ny nz lx ly lz hx hy hz kind drop, then V×3 vertices (%a), T×3 indices,
# then (solid) one carry bit per box row. kind: 0 surface, 1 thin, 2 solid (flip starts
# and prefix xor). Output: the box's words.
KERNEL_HARNESS = r"""
#include <cstdio>
#include <vector>
""" + VOXELIZE_STUBS + r"""
#include "voxelize.cu"
static void at(long long i) { h_block.x = (unsigned)i; h_dim.x = 1; h_thread.x = 0; }
int main() {
    long long T, V;
    int nx, ny, nz, lx, ly, lz, hx, hy, hz, kind, drop;
    if (scanf("%lld %lld %d %d %d %d %d %d %d %d %d %d %d", &T, &V, &nx, &ny, &nz, &lx, &ly, &lz, &hx, &hy, &hz,
              &kind, &drop) != 13) return 1;
    std::vector<double> pv(3 * V);
    std::vector<int> tris(3 * T);
    for (auto& x : pv) scanf("%la", &x);
    for (auto& x : tris) scanf("%d", &x);
    long long bx = hx - lx, by = hy - ly, bz = hz - lz, wx = (bx + 31) / 32, rows = by * bz;
    std::vector<unsigned int> words(rows * wx, 0u);
    std::vector<long long> counts(T), ends(T);
    unsigned long long flags[2] = {0, 0};
    if (kind == 2) for (long long r = 0; r < rows; ++r) { int c; scanf("%d", &c); words[r * wx] ^= (unsigned)c; }
    for (long long t = 0; t < T; ++t) {
        at(t);
        if (kind == 2) solid_column_counts(pv.data(), tris.data(), T, V, ly, lz, hy, hz, counts.data(), flags);
        else surface_column_counts(pv.data(), tris.data(), T, V, nx, ny, nz, lx, ly, lz, hx, hy, hz,
                                   counts.data(), flags);
    }
    long long total = 0;
    for (long long t = 0; t < T; ++t) { total += counts[t]; ends[t] = total; }
    for (long long item = 0; item < total; ++item) {
        at(item);
        if (kind == 2) solid_flip_starts(pv.data(), tris.data(), ends.data(), counts.data(), T, total, lx, ly, lz,
                                         hx, hy, hz, drop, words.data());
        else surface_columns(pv.data(), tris.data(), ends.data(), counts.data(), T, total, nx, ny, nz, lx, ly, lz,
                             hx, hy, hz, kind, words.data());
    }
    if (kind == 2)
        for (long long r = 0; r < rows; ++r) { at(r); prefix_xor_rows(words.data(), rows, (int)wx, (int)bx); }
    for (auto w : words) printf("%u\n", w);
    return 0;
}
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    run = _build(tmp_path_factory, KERNEL_HARNESS)

    def launch(pv, tris, shape, lo, hi, kind, drop=0, carry=None):
        head = [len(tris), len(pv), *shape, *lo, *hi, kind, drop]
        lines = [" ".join(str(int(x)) for x in head)]
        lines += [" ".join(float(x).hex() for x in row) for row in pv]
        lines += [" ".join(str(int(x)) for x in row) for row in tris]
        dims = np.asarray(hi) - np.asarray(lo)
        if kind == 2:
            c = np.zeros(dims[1] * dims[2], int) if carry is None else np.asarray(carry, int).reshape(-1)
            lines += [str(x) for x in c]
        out = np.array(run(lines), dtype=np.uint32)
        return out.reshape(int(dims[2]), int(dims[1]), bitgrid.words_along_x(int(dims[0])))

    return launch


def boxes(shape, rng, n=6):
    nx, ny, nz = shape
    yield (0, 0, 0), shape
    yield (0, 0, nz // 3), (nx, ny, max(nz // 3 + 1, 2 * nz // 3))
    for _ in range(n):
        lo = rng.integers(0, (nx - 1, ny - 1, nz - 1))
        yield tuple(lo), tuple(lo + 1 + rng.integers(0, np.array(shape) - lo))


@pytest.mark.parametrize("case", [CASES[i] for i in (1, 3, 4, 6, 7)], ids=lambda c: c[0])
def test_cuda_box_kernels_equal_the_cpu_box(kernels, case):
    _, v, t, spec = case
    mesh = SplitMesh(v, t, spec)
    pv, tris, shape = mesh.pv, mesh.triangles, spec.shape
    rng = np.random.default_rng(11)
    for lo, hi in boxes(shape, rng):
        box = (np.array(lo), np.array(hi))
        for thin in (False, True):
            want = surface_voxels_cpu(pv, tris, shape, thin, box=box)
            assert np.array_equal(kernels(pv, tris, shape, lo, hi, int(thin)), want), (lo, hi, thin)
        want = prefix_xor_rows(flip_starts_cpu(pv, tris, shape, box=box), hi[0] - lo[0])
        assert np.array_equal(kernels(pv, tris, shape, lo, hi, 2), want), (lo, hi)
        carry = rng.integers(0, 2, size=(hi[2] - lo[2], hi[1] - lo[1])).astype(bool)
        want = prefix_xor_rows(flip_starts_cpu(pv, tris, shape, box=box, carry=carry), hi[0] - lo[0])
        got = kernels(pv, tris, shape, lo, hi, 2, drop=int(lo[0] > 0), carry=carry)
        assert np.array_equal(got, want), (lo, hi, "carry")
