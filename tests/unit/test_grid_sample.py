"""The one trilinear sampler (kernels/grid/sample.py and its device twin
cuda/include/voxfx_lattice.cuh): against a float64 textbook interpolation, on the fields
it must reproduce exactly, and the device code built for the host (nvcc, no GPU needed)
against the NumPy code bit for bit."""

import shutil
import subprocess

import numpy as np
import pytest

from voxfx.kernels import backend
from voxfx.kernels.grid import mac
from voxfx.kernels.grid.sample import face_lattice, sample_face, sample_faces, sample_lattice


def textbook(f, x, y, z):
    """Trilinear interpolation with the eight weights, float64, clamped to the lattice."""
    sz, sy, sx = f.shape
    out = []
    for p in zip(x, y, z):
        c = [min(max(float(a), 0.0), s - 1.0) for a, s in zip(p, (sx, sy, sz))]
        i0 = [min(int(a), s - 2) if s > 1 else 0 for a, s in zip(c, (sx, sy, sz))]
        t = [a - i for a, i in zip(c, i0)]
        total = 0.0
        for dk in (0, 1):
            for dj in (0, 1):
                for di in (0, 1):
                    w = (t[0] if di else 1 - t[0]) * (t[1] if dj else 1 - t[1]) * (t[2] if dk else 1 - t[2])
                    if w:
                        total += w * float(f[i0[2] + dk, i0[1] + dj, i0[0] + di])
        out.append(total)
    return np.array(out)


@pytest.mark.parametrize("shape", [(3, 4, 5), (1, 2, 3), (2, 1, 1)])
def test_sample_matches_the_textbook_interpolation(shape):
    rng = np.random.default_rng(7)
    f = rng.standard_normal(shape).astype(np.float32)
    pts = [rng.uniform(-1.5, s + 0.5, 400).astype(np.float32) for s in shape[::-1]]
    np.testing.assert_allclose(sample_lattice(f, *pts), textbook(f, *pts), rtol=1e-5, atol=1e-5)


def test_nodes_uniform_fields_and_affine_gradients_are_exact():
    rng = np.random.default_rng(8)
    f = rng.standard_normal((4, 5, 6)).astype(np.float32)
    k, j, i = (a.ravel().astype(np.float32) for a in np.indices((3, 4, 5)))  # t = 0 on every axis
    assert (sample_lattice(f, i, j, k) == f[:3, :4, :5].ravel()).all()  # at the nodes: the node values
    pts = [rng.uniform(-3, 9, 200).astype(np.float32) for _ in range(3)]
    assert (sample_lattice(np.full((4, 5, 6), 2.5, np.float32), *pts) == np.float32(2.5)).all()
    kk, jj, ii = np.indices(f.shape).astype(np.float32)
    affine = 1.0 * ii + 2.0 * jj + 4.0 * kk  # small integers: every operation exact
    inside = [rng.integers(0, 4 * (s - 1), 200).astype(np.float32) / 4 for s in (6, 5, 4)]
    value, grad = sample_lattice(affine.astype(np.float32), *inside, gradient=True)
    assert (value == inside[0] + 2 * inside[1] + 4 * inside[2]).all()
    assert all((g == c).all() for g, c in zip(grad, (1.0, 2.0, 4.0)))


def test_faces_sample_their_own_lattice():
    nx, ny, nz = 4, 3, 5
    rng = np.random.default_rng(9)
    faces = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)]
    for comp in range(3):  # at a face centre (below the last of each axis: t = 0), the face's own value
        x, y, z = (np.broadcast_to(a, faces[comp].shape)[:-1, :-1, :-1].ravel()
                   for a in mac.face_positions(comp, nx, ny, nz, np))
        assert (sample_face(comp, faces[comp], x, y, z) == faces[comp][:-1, :-1, :-1].ravel()).all()
        lx, ly, lz = face_lattice(comp, x, y, z)
        assert (lx == x - np.float32(0.5) * (comp != 0)).all() and (lz == z - np.float32(0.5) * (comp != 2)).all()
    got = sample_faces(faces, np.float32([1.5]), np.float32([1.5]), np.float32([2.5]))
    f32 = np.float32
    assert [g[0] for g in got] == [sample_face(c, faces[c], f32(1.5), f32(1.5), f32(2.5))[()] for c in range(3)]


HARNESS = r"""
#include <cstdio>
#undef __device__
#define __device__ __attribute__((host)) __attribute__((device))
#include "voxfx_lattice.cuh"
int main() {
    int comp, nx, ny, nz, sx, sy, sz, n;
    if (scanf("%d %d %d %d %d", &comp, &nx, &ny, &nz, &n) != 5) return 1;
    sx = nx + (comp == 0); sy = ny + (comp == 1); sz = nz + (comp == 2);
    static float f[1 << 16];
    for (int i = 0; i < sx * sy * sz; ++i) scanf("%a", &f[i]);
    for (int q = 0; q < n; ++q) {
        float x, y, z, g[3];
        scanf("%a %a %a", &x, &y, &z);
        float v = sample_face(comp, f, nx, ny, nz, x, y, z, g);
        float plain = sample_face(comp, f, nx, ny, nz, x, y, z);
        printf("%a %a %a %a %a\n", v, g[0], g[1], g[2], plain);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def device_sampler(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    d = tmp_path_factory.mktemp("lattice")
    src, exe = d / "harness.cu", d / "harness"
    src.write_text(HARNESS)
    # host code without FMA contraction, as the device code is compiled (--fmad=false)
    r = subprocess.run(["nvcc", "--std=c++17", "-Xcompiler", "-ffp-contract=off", f"-I{backend.CUDA_INCLUDE}",
                        "-o", str(exe), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr

    def run(comp, f, nx, ny, nz, x, y, z):
        lines = [f"{comp} {nx} {ny} {nz} {len(x)}", " ".join(float(a).hex() for a in f.ravel())]
        lines += [" ".join(float(a).hex() for a in p) for p in zip(x, y, z)]
        out = subprocess.run([str(exe)], input="\n".join(lines), capture_output=True, text=True, timeout=300)
        return np.array([[float.fromhex(a) for a in line.split()] for line in out.stdout.splitlines()],
                        dtype=np.float32)

    return run


@pytest.mark.parametrize("cells", [(5, 4, 3), (1, 2, 1), (2, 1, 3)])
def test_device_sampler_matches_numpy_bit_for_bit(device_sampler, cells):
    nx, ny, nz = cells
    rng = np.random.default_rng(10)
    for comp, shape in enumerate(mac.face_shapes(nx, ny, nz)):
        f = rng.standard_normal(shape).astype(np.float32)
        x, y, z = (rng.uniform(-1.5, n + 1.5, 300).astype(np.float32) for n in cells)
        x[:5] = np.nan  # NaN clamps to 0 on both
        got = device_sampler(comp, f, nx, ny, nz, x, y, z)
        value, grad = sample_face(comp, f, x, y, z, gradient=True)
        want = np.stack([value, *grad, value], axis=1).astype(np.float32)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()
