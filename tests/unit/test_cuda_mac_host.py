"""The device side of the one projection (cuda/include/voxfx_mac.cuh: cell_face_sum and
project_face, FLIP's and the wind's cases) against mac.fixed_faces / mac.project, bit
for bit, on the host without a GPU: nvcc builds the header's functions as host
functions (no FMA contraction, as the wind's kernels are compiled) and a loop over
cells and faces plays the kernels' threads."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build
from voxfx.kernels.grid import mac

# Input: nx ny nz mode c, then u v w su sv sw p (hex floats) and the cell types. mode 0:
# FLIP (fluid 1, solid 2, walls fixed to su/sv/sw); mode 1: the wind (fluid 0, solid 1,
# walls free, fixed faces 0). Output: the face sum of every cell, then u, v, w projected.
HARNESS = r"""
#include <cstdio>
#include <vector>
#undef __device__
#define __device__ __attribute__((host)) __attribute__((device))
#include "voxfx_mac.cuh"
int main() {
    int nx, ny, nz, mode;
    float c;
    if (scanf("%d %d %d %d %a", &nx, &ny, &nz, &mode, &c) != 5) return 1;
    const long long nu = (long long)(nx + 1) * ny * nz, nv = (long long)nx * (ny + 1) * nz;
    const long long nw = (long long)nx * ny * (nz + 1), nc = (long long)nx * ny * nz;
    std::vector<float> u(nu), v(nv), w(nw), su(nu), sv(nv), sw(nw), p(nc);
    std::vector<unsigned char> cell(nc);
    for (auto* a : {&u, &v, &w, &su, &sv, &sw, &p})
        for (auto& x : *a) scanf("%a", &x);
    for (auto& x : cell) {
        int t;
        scanf("%d", &t);
        x = (unsigned char)t;
    }
    for (long long q = 0; q < nc; ++q) {
        int i, j, k;
        decode_cell(q, nx, ny, i, j, k);
        const float d = mode == 0 ? cell_face_sum<true>(u.data(), v.data(), w.data(), su.data(), sv.data(), sw.data(),
                                                        cell.data(), 2, true, q, i, j, k, nx, ny, nz)
                                  : cell_face_sum<false>(u.data(), v.data(), w.data(), nullptr, nullptr, nullptr,
                                                         nullptr, 1, false, q, i, j, k, nx, ny, nz);
        printf("%a\n", d);
    }
    for (long long id = 0; id < nu + nv + nw; ++id) {
        int comp, i, j, k;
        long long f;
        decode_face(id, nx, ny, nz, comp, i, j, k, f);
        float* vel = comp == 0 ? u.data() : (comp == 1 ? v.data() : w.data());
        const float* fixed = comp == 0 ? su.data() : (comp == 1 ? sv.data() : sw.data());
        if (mode == 0)
            project_face<true>(vel, fixed, p.data(), cell.data(), 1, 2, true, comp, i, j, k, f, nx, ny, nz, c);
        else
            project_face<false>(vel, nullptr, p.data(), cell.data(), 0, 1, false, comp, i, j, k, f, nx, ny, nz, c);
    }
    for (auto* a : {&u, &v, &w})
        for (float x : *a) printf("%a\n", x);
    return 0;
}
"""


@pytest.fixture(scope="module")
def device(tmp_path_factory):
    run = _build(tmp_path_factory, HARNESS)

    def call(faces, fixed, p, cell, c, mode):
        nz, ny, nx = cell.shape
        lines = [f"{nx} {ny} {nz} {mode} {float(c).hex()}"]
        lines += [float(x).hex() for a in (*faces, *fixed, p) for x in a.ravel()]
        lines += [str(int(t)) for t in cell.ravel()]
        out = run.raw(lines)
        vals = np.array([float.fromhex(x) for x in out.split()], np.float32)
        return vals[: cell.size].reshape(cell.shape), vals[cell.size:]

    return call


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 1), (5, 4, 3), (9, 3, 8)])
@pytest.mark.parametrize("mode", [0, 1])
def test_device_projection_equals_mac_project_bit_for_bit(device, shape, mode):
    nx, ny, nz = shape
    rng = np.random.default_rng(7)
    cell = rng.integers(0, 3 if mode == 0 else 2, (nz, ny, nx)).astype(np.uint8)
    faces = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)]
    fixed = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)]
    p = rng.standard_normal((nz, ny, nx)).astype(np.float32)
    c = np.float32(0.37)
    D, projected = device(faces, fixed, p, cell, c, mode)
    want = [f.copy() for f in faces]
    if mode == 0:
        want_D = mac.face_sum(*mac.fixed_faces(*faces, cell, 2, True, fixed))
        mac.project(*want, p, c, cell, 1, 2, True, fixed)
        kept = cell != 2  # the divergence is taken on cells that are not solid
    else:
        want_D = mac.face_sum(*faces)
        mac.project(*want, p, c, cell, 0, 1, False)
        kept = np.ones(cell.shape, bool)
    assert np.array_equal(D[kept], want_D[kept])
    assert np.array_equal(projected, np.concatenate([a.ravel() for a in want]))
    assert not np.array_equal(projected, np.concatenate([a.ravel() for a in faces]))  # something was projected
