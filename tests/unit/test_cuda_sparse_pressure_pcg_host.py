"""The fused PCG kernels (cuda/flip_sparse_pressure_pcg.cu, sparse_pressure_gpu.FUSE) on the
host without a GPU, as tests/unit/test_cuda_sparse_pressure_host.py builds them: the
direction update folded into the Laplacian (FUSE "1") gives the d and q that
update_direction then apply_laplacian (flip_sparse_pressure.cu) give, apply_laplacian_alpha
(FUSE "finish") the same q, and all equal NumPy's float32 operations bit for bit; the
arrival counter is back at 0 after each launch; a stopped solve writes nothing. α and β
(the last block's sums in the 1024-thread order of finish_*) need real warps:
tests/gpu/test_flip_sparse_pressure_gpu.py compares whole solves bit for bit."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE
from voxfx.kernels.flip.sparse_pressure_gpu import _FUSED, _K

# Input: m stride stopped beta(hex double), nbr (6 × stride), diag, z, d_old (stride each,
# hex floats). Output: d and q (m each) by update_direction + apply_laplacian, then d and q
# by direction_laplacian, then its counter; q by apply_laplacian_alpha, then its counter.
HARNESS = PREAMBLE.replace('#include "flip_sparse_pressure.cu"', r"""
#define __threadfence() ((void)0)
#define __ldcg(p) (*(p))
#include "flip_sparse_pressure.cu"
#include "flip_sparse_pressure_pcg.cu"
#define LAUNCH(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
static void read_floats(std::vector<float>& v, int n) {
    v.resize(n);
    for (auto& x : v) { char t[64]; scanf("%63s", t); x = strtof(t, nullptr); }
}
int main() {
    int m, stride, stopped;
    char t[64];
    if (scanf("%d %d %d %63s", &m, &stride, &stopped, t) != 4) return 1;
    double scalars[8] = {0, 0, 0, 0.5, 0, strtod(t, nullptr), 0, 0};
    int state[4] = {0, stopped, 0, 1000};
    int sizes[2] = {m / 2, m};
    std::vector<int> nbr(6 * (size_t)stride);
    for (auto& v : nbr) scanf("%d", &v);
    std::vector<float> diag, z, d_old;
    read_floats(diag, stride);
    read_floats(z, stride);
    read_floats(d_old, stride);
    std::vector<double> partials(stride, 0.0);
    std::vector<float> d = d_old, q(stride, -7.0f);
    LAUNCH(stride, update_direction(d.data(), z.data(), sizes, scalars, state));
    LAUNCH(stride, apply_laplacian(d.data(), q.data(), nbr.data(), diag.data(), stride, sizes, partials.data(),
                                   state));
    for (int c = 0; c < m; ++c) printf("%a %a\n", d[c], q[c]);
    std::vector<float> d2(stride, -7.0f), q2(stride, -7.0f);
    unsigned counter = 0;
    LAUNCH(stride, direction_laplacian(z.data(), d_old.data(), d2.data(), q2.data(), nbr.data(), diag.data(), stride,
                                       sizes, partials.data(), scalars, state, &counter));
    for (int c = 0; c < m; ++c) printf("%a %a\n", d2[c], q2[c]);
    printf("%u\n", counter);
    std::vector<float> q3(stride, -7.0f);  // apply_laplacian_alpha on update_direction's d
    LAUNCH(stride, apply_laplacian_alpha(d.data(), q3.data(), nbr.data(), diag.data(), stride, sizes, partials.data(),
                                         scalars, state, &counter));
    for (int c = 0; c < m; ++c) printf("%a\n", q3[c]);
    printf("%u\n", counter);
    return 0;
}
""")


@pytest.fixture(scope="module")
def fused(tmp_path_factory):
    defines = {o[2:].split("=", 1)[0]: o[2:].split("=", 1)[1] for k in (_K, _FUSED) for o in k.options
               if o.startswith("-D")}
    lines = [f"#define {k} {v}" for k, v in sorted(defines.items())]
    return _build(tmp_path_factory, HARNESS.replace("// DEFINES", "\n".join(lines)))


def _case(rng, m, stride, beta, stopped=0):
    nbr = rng.integers(0, m + 1, (6, stride)).astype(np.int32)  # m: the sentinel
    nbr[:, rng.random(stride) < 0.2] = m
    diag = rng.integers(1, 7, stride).astype(np.float32)
    z = rng.normal(0, 1, stride).astype(np.float32)
    d_old = rng.normal(0, 1, stride).astype(np.float32)
    z[m:] = d_old[m:] = 0.0  # the sentinel and the spare room, as _load leaves them
    lines = [f"{m} {stride} {stopped} {float(beta).hex()}", *map(str, nbr.ravel())]
    lines += [float(v).hex() for a in (diag, z, d_old) for v in a]
    return lines, nbr, diag, z, d_old


def _parse(text, m):
    rows = text.split()
    vals = np.array([float.fromhex(v) for v in rows[:4 * m]], np.float32).reshape(2, m, 2)
    q3 = np.array([float.fromhex(v) for v in rows[4 * m + 1:5 * m + 1]], np.float32)
    return vals[0], vals[1], int(rows[4 * m]), q3, int(rows[5 * m + 1])


@pytest.mark.parametrize("m, stride, beta", [(1, 2, 0.0), (37, 64, 0.3712), (500, 700, 1.9e-3), (900, 901, 0.0)])
def test_direction_in_the_laplacian_equals_update_then_apply_bit_for_bit(fused, m, stride, beta):
    rng = np.random.default_rng(m)
    lines, nbr, diag, z, d_old = _case(rng, m, stride, beta)
    split, joined, counter, q_alpha, counter_alpha = _parse(fused.raw(lines), m)
    b = np.float32(beta)  # the kernels' (float)β
    d = np.append(z[:m] + b * d_old[:m], np.float32(0))  # update_direction; the sentinel stays 0
    s = d[nbr[0, :m]]
    for k in range(1, 6):
        s = s + d[nbr[k, :m]]
    q = diag[:m] * d[:m] - s
    assert split[:, 0].view(np.uint32).tolist() == d[:m].view(np.uint32).tolist()
    assert split[:, 1].view(np.uint32).tolist() == q.view(np.uint32).tolist()
    assert joined.view(np.uint32).tolist() == split.view(np.uint32).tolist()
    assert q_alpha.view(np.uint32).tolist() == q.view(np.uint32).tolist()  # apply_laplacian_alpha
    assert counter == counter_alpha == 0  # the last block reset it for the next launch


def test_a_stopped_solve_writes_no_direction(fused):
    rng = np.random.default_rng(5)
    m = 40
    lines, *_ = _case(rng, m, 64, 0.5, stopped=1)
    split, joined, counter, q_alpha, counter_alpha = _parse(fused.raw(lines), m)
    assert (joined == -7.0).all() and (q_alpha == -7.0).all() and counter == counter_alpha == 0
    assert (split[:, 1] == -7.0).all()  # the old kernels are masked alike
