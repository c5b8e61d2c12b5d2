"""The dense G2P kernel's push-out (cuda/flip_transfer.cu ``push_out``, on
include/voxfx_push.cuh's ``push_out_point`` as the sparse kernels' push-outs are) gives
pushout.py's NumPy bits: points in and around random solids of a closed box, clamped into
it, moved to the nearest free neighbour or back to the fallback (non-finite points, and the
middle of a solid block with no free neighbour). Built as host code like
tests/unit/test_cuda_brick_reach_host.py (the sparse push-outs: test_cuda_sparse_flip_host.py)."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import _build
from voxfx.kernels.flip import particles, pushout

# Input: nx ny nz n, origin, h, 1/h, the solid bytes (x fastest), then per point x and fallback.
# Output: each point's pushed-out position.
HARNESS = STUBS + '#include "flip_transfer.cu"\n' + DRIVER + r"""
int main() {
    int nx, ny, nz;
    long long n;
    if (scanf("%d %d %d %lld", &nx, &ny, &nz, &n) != 4) return 1;
    const float o[3] = {rf(), rf(), rf()};
    const float h = rf(), inv_h = rf();
    std::vector<unsigned char> solid((size_t)nx * ny * nz);
    for (auto& s : solid) { int v; scanf("%d", &v); s = (unsigned char)v; }
    std::vector<float> out;
    for (long long p = 0; p < n; ++p) {
        float x[3], fallback[3];
        for (auto& v : x) v = rf();
        for (auto& v : fallback) v = rf();
        push_out(x, fallback, solid.data(), nx, ny, nz, o, h, inv_h);
        out.insert(out.end(), x, x + 3);
    }
    pf(out);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    defines = [o for o in particles.KERNELS.options if o.startswith("-D")]
    build = _build(tmp_path_factory, HARNESS, defines, "push_out")
    return lambda lines: np.array([float.fromhex(t) for t in build.raw(lines, check=True).split()], np.float32)


def test_dense_push_out_matches_the_numpy_reference_bit_for_bit(harness):
    rng = np.random.default_rng(7)
    shape = nx, ny, nz = 9, 7, 6
    h = np.float32(0.1)
    inv_h = np.float32(1) / h
    o = np.array([-0.3, 0.2, 0.05], np.float32)
    solid = (rng.random((nz, ny, nx)) < 0.45).astype(np.uint8)
    solid[2:5, 2:5, 2:5] = 1  # its middle cell has no free neighbour
    n = 6000
    extent = np.array(shape) * h
    x = (o + rng.uniform(-0.15, 1.05, (n, 3)) * extent).astype(np.float32)  # some outside the box
    x[::89] = (o + (3.5 + rng.uniform(-0.4, 0.4, (len(x[::89]), 3))) * h).astype(np.float32)
    x[::97, 1] = np.nan
    x[::101, 0] = np.inf
    fallback = (o + rng.uniform(0.1, 0.9, (n, 3)) * extent).astype(np.float32)
    lines = [f"{nx} {ny} {nz} {n}"] + [float(v).hex() for v in (*o, h, inv_h)] + [str(v) for v in solid.reshape(-1)]
    lines += [float(v).hex() for p in range(n) for v in (*x[p], *fallback[p])]
    got = harness(lines).reshape(n, 3)

    flat = solid.reshape(-1) != 0

    def solid_at(i, j, k):
        inside = (i >= 0) & (i < nx) & (j >= 0) & (j < ny) & (k >= 0) & (k < nz)
        return inside & flat[(np.clip(k, 0, nz - 1) * ny + np.clip(j, 0, ny - 1)) * nx + np.clip(i, 0, nx - 1)]

    want = np.stack(pushout.push_out_of([x[:, a] for a in range(3)], [fallback[:, a] for a in range(3)],
                                        (*o, h, inv_h), shape, True, solid_at, np), axis=1)
    back = (want == fallback).all(axis=1)
    assert back[np.isfinite(x).all(axis=1)].any() and back[~np.isfinite(x).all(axis=1)].all()  # both fallbacks
    assert ((want != x) & ~back[:, None]).any()  # moved points
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
