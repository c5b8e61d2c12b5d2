"""The CUDA triangle/box test gives the CPU's exact answers, checked on the host (no GPU
needed): nvcc builds small host programs from kernels/cuda/include/voxfx_exact.cuh
(exact predicates, __host__ __device__) and from voxelize.cu itself (its device
functions compiled for the host as well, atomics replaced by plain operations),
fed near-degenerate inputs and soups whose answers come from rationals and from the
NumPy reference. The bit-for-bit GPU comparison is tests/gpu/test_voxelize_gpu.py."""

import shutil
import subprocess
from fractions import Fraction as F

import numpy as np
import pytest

from voxfx.kernels import backend
from voxfx.kernels.grid import launch
from voxfx.kernels.voxelize import gpu

HARNESS = r"""
#include <cstdio>
#include "voxfx_exact.cuh"
int main() {
    char kind;
    while (scanf(" %c", &kind) == 1) {
        double p[12];
        int n = kind == 'o' ? 6 : 12;
        for (int i = 0; i < n; ++i) scanf("%la", &p[i]);
        int s = kind == 'o' ? orient2d_exact(p[0], p[1], p[2], p[3], p[4], p[5])
                            : plane_exact(p, p + 3, p + 6, p + 9);
        printf("%d\n", s);
    }
    return 0;
}
"""


# voxelize.cu's make_setup and tests on the host: T triangles, grid, thin flag, then
# queries "t i j k" answered 1 where the kernel's column loop would set voxel (i, j, k).
TRIANGLE_HARNESS = r"""
#include <cstdio>
#undef __device__
#define __device__ __attribute__((host)) __attribute__((device))
template <typename T> __host__ __device__ T plain_add(T* p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> __host__ __device__ T plain_or(T* p, T v) { T o = *p; *p = o | v; return o; }
template <typename T> __host__ __device__ T plain_xor(T* p, T v) { T o = *p; *p = o ^ v; return o; }
template <typename T> __host__ __device__ T plain_min(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
#define atomicAdd plain_add
#define atomicOr plain_or
#define atomicXor plain_xor
#define atomicMin plain_min
#include "voxelize.cu"
int main() {
    int T, nx, ny, nz, thin;
    if (scanf("%d %d %d %d %d", &T, &nx, &ny, &nz, &thin) != 5) return 1;
    static double pv[9 * 4096];
    static int tris[3 * 4096];
    for (int i = 0; i < 9 * T; ++i) scanf("%la", &pv[i]);
    for (int i = 0; i < 3 * T; ++i) tris[i] = i;
    long long t, i, j, k;
    while (scanf("%lld %lld %lld %lld", &t, &i, &j, &k) == 4) {
        Setup s;
        make_setup(pv, tris, t, nx, ny, nz, thin, s);
        double q[3] = {(double)i, (double)j, (double)k};
        bool ok = projection_test<0>(s, q) && projection_test<1>(s, q) && projection_test<2>(s, q)
                  && (!s.thin || thin_test(s, q)) && plane_test(s, q);
        printf("%d\n", ok ? 1 : 0);
    }
    return 0;
}
"""


def _build(tmp_path_factory, source, defines=None, name="exact"):
    """The host harness *source* built with nvcc (skipped without it): ``run(lines)`` → the
    printed integers, ``run.raw(lines, check=False)`` → the printed text (*check*: the
    harness must exit 0). *defines*: the kernel module's ``-D`` options (default
    voxelize.cu's, as its kernel module passes them)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    d = tmp_path_factory.mktemp(name)
    src, exe = d / "harness.cu", d / "harness"
    src.write_text(source)
    # host code without FMA contraction, as the device code is compiled (--fmad=false)
    defines = launch.define_options(gpu.DEFINES) if defines is None else tuple(defines)
    r = subprocess.run(["nvcc", "--std=c++17", "-Xcompiler", "-ffp-contract=off", f"-I{backend.CUDA_DIR}",
                        f"-I{backend.CUDA_INCLUDE}", *defines, "-o", str(exe), str(src)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr

    def raw(lines, check=False):
        out = subprocess.run([str(exe)], input="\n".join(lines), capture_output=True, text=True, timeout=300)
        assert not check or out.returncode == 0, (out.returncode, out.stderr)
        return out.stdout

    def run(lines):
        return [int(x) for x in raw(lines).split()]

    run.raw = raw  # the output as text (harnesses that print floats)
    return run


def kernel_defines(kernels):
    """*kernels*' ``-D`` options (the values its kernel module compiles with), for ``_build``."""
    return [o for o in kernels.options if o.startswith("-D")]


def build_words(tmp_path_factory, source, defines, name):
    """``_build``, then ``run(lines)`` → the harness's printed words (it must exit 0)."""
    build = _build(tmp_path_factory, source, defines, name)
    return lambda lines: build.raw(lines, check=True).split()


def build_ints(tmp_path_factory, source, defines, name):
    """``_build``, then ``run(lines)`` → the harness's printed integers as int64 (it must exit 0)."""
    words = build_words(tmp_path_factory, source, defines, name)
    return lambda lines: np.array([int(x) for x in words(lines)], np.int64)


def hex32(a):
    """*a* as float32, each value's exact hex (``%a`` for the harness's scanf), space-separated."""
    return " ".join(float(x).hex() for x in np.asarray(a, np.float32).ravel())


def with_defines(source, kernels, extra=()):
    """*source* with its ``// DEFINES`` line replaced by *kernels*' ``-D`` options as
    ``#define`` lines (the values its kernel module compiles with), then *extra* lines."""
    lines = [f"#define {o[2:].replace('=', ' ', 1)}" for o in kernel_defines(kernels)]
    return source.replace("// DEFINES", "\n".join(lines + list(extra)))


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return _build(tmp_path_factory, HARNESS)


@pytest.fixture(scope="module")
def triangle_harness(tmp_path_factory):
    return _build(tmp_path_factory, TRIANGLE_HARNESS)


@pytest.mark.parametrize("thin", [False, True], ids=["surface", "thin"])
def test_cuda_triangle_test_equals_the_cpu_reference_on_soups(triangle_harness, thin):
    """Every voxel of every triangle's touched box, on the soups of test_voxelize_exact_surface
    (unit and scaled grids): the CUDA decision equals triangles.overlaps."""
    from tests import exact_soups as soups
    from voxfx.kernels.voxelize import triangles
    from voxfx.kernels.voxelize.triangles import to_voxel_units

    for seed in range(3):
        for scaled in (False, True):
            v, t = soups.soup(2000 + seed, per_kind=4)
            spec = soups.UNIT
            if scaled:
                v, spec = soups.scaled(v), soups.SCALED
            pv = to_voxel_units(v, spec.origin, spec.voxel_size)
            s = triangles.setup(pv, t, spec.shape, thin)
            rows = []
            for m in range(len(t)):
                lo, hi = s.lo[m], s.hi[m]
                if (hi < lo).any():
                    continue
                k, j, i = np.meshgrid(*(np.arange(lo[a], hi[a] + 1) for a in (2, 1, 0)), indexing="ij")
                rows.append(np.stack([np.full(i.size, m), i.ravel(), j.ravel(), k.ravel()], axis=1))
            q = np.concatenate(rows)
            want = triangles.overlaps(s, q[:, 0], q[:, 1:].astype(np.float64))
            head = [f"{len(t)} {spec.shape[0]} {spec.shape[1]} {spec.shape[2]} {int(thin)}",
                    " ".join(float(x).hex() for x in pv[t].reshape(-1))]
            got = triangle_harness(head + [" ".join(map(str, r)) for r in q])
            assert np.array_equal(np.array(got, dtype=bool), want), (seed, scaled)
            assert want.any()


def sign(x):
    return (x > 0) - (x < 0)


def near_degenerate(rng, n):
    """Triangles (u, w, c = u + t(w − u) rounded) and integer corners near them, in
    one-decimal, dyadic and wide-exponent coordinates."""
    u = np.round(rng.uniform(0, 8, (n, 3)), 1)
    w = np.round(rng.uniform(0, 8, (n, 3)), 1)
    w[: n // 4] = np.round(w[: n // 4] * 4) / 4
    u[n // 4: n // 2] *= 10.0 ** rng.integers(-6, 6, (n // 4, 1))
    c = u + rng.choice([0.3, 0.5, 0.7, 0.1], (n, 1)) * (w - u)
    x = np.floor(u + rng.uniform(0, 1, (n, 1)) * (w - u))
    return u, w, c, x


def test_orient2d_and_plane_signs_are_exact(harness):
    rng = np.random.default_rng(3)
    u, w, c, x = near_degenerate(rng, 600)
    lines, want, naive = [], [], []
    for m in range(len(u)):
        U, W, C, X = ([F(float(q)) for q in p[m]] for p in (u, w, c, x))
        for a, b in ((0, 1), (1, 2), (2, 0)):
            for point, P in ((x, X), (c, C)):
                args = (u[m, a], u[m, b], w[m, a], w[m, b], point[m, a], point[m, b])
                lines.append("o " + " ".join(float(q).hex() for q in args))
                want.append(sign((W[a] - U[a]) * (P[b] - U[b]) - (W[b] - U[b]) * (P[a] - U[a])))
        e0 = [W[k] - U[k] for k in range(3)]
        e1 = [C[k] - W[k] for k in range(3)]
        n = (e0[1] * e1[2] - e0[2] * e1[1], e0[2] * e1[0] - e0[0] * e1[2], e0[0] * e1[1] - e0[1] * e1[0])
        lines.append("p " + " ".join(float(q).hex() for q in (*u[m], *w[m], *c[m], *x[m])))
        want.append(sign(sum(n[k] * (X[k] - U[k]) for k in range(3))))
        naive.append(sign(float(np.dot(np.cross(w[m] - u[m], c[m] - w[m]), x[m] - u[m]))))
    got = harness(lines)
    assert len(got) == len(want)
    assert got == want
    assert 0 < sum(1 for s in want if s == 0) < len(want)  # true ties are among them
    assert naive != want[6::7]  # and cases that plain float64 gets wrong
