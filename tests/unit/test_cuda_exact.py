"""The CUDA exact predicates (kernels/cuda/include/voxfx_exact.cuh) give the exact signs,
checked on the host: the header is __host__ __device__, so nvcc builds a small host
program from it, fed near-degenerate inputs whose signs are computed in rationals.
This tests the GPU's tier-3 arithmetic on machines without a GPU."""

import shutil
import subprocess
from fractions import Fraction as F

import numpy as np
import pytest

from voxfx.kernels import backend

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


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    d = tmp_path_factory.mktemp("exact")
    src, exe = d / "harness.cu", d / "harness"
    src.write_text(HARNESS)
    r = subprocess.run(["nvcc", "--std=c++17", f"-I{backend.CUDA_INCLUDE}", "-o", str(exe), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr

    def run(lines):
        out = subprocess.run([str(exe)], input="\n".join(lines), capture_output=True, text=True, timeout=120)
        return [int(x) for x in out.stdout.split()]

    return run


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
            lines.append("o " + " ".join(float(q).hex() for q in (u[m, a], u[m, b], w[m, a], w[m, b], x[m, a], x[m, b])))
            want.append(sign((W[a] - U[a]) * (X[b] - U[b]) - (W[b] - U[b]) * (X[a] - U[a])))
            lines.append("o " + " ".join(float(q).hex() for q in (u[m, a], u[m, b], w[m, a], w[m, b], c[m, a], c[m, b])))
            want.append(sign((W[a] - U[a]) * (C[b] - U[b]) - (W[b] - U[b]) * (C[a] - U[a])))
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
