"""The PCG's stopping test ahead of the V-cycle (cuda/flip_sparse_pressure.cu: update_solution_stop,
finish_order_total; sparse_pressure_gpu.EARLY_STOP) on the host without a GPU: nvcc builds the
kernels as host functions (a block one thread, atomics plain) and a C++ driver runs them. The last
block's total of the ‖r‖² partials must be block_total's on finish_beta's 1024 threads bit for bit
(a model of the warp shuffles here, on partials of many magnitudes, where the order shows); a
harness built to sum in another order (256 threads) must fail that; update_solution_stop's x, r and
partials must be update_solution's, its writes finish_beta's where finish_beta would stop (converged,
iteration limit, a non-finite ‖r‖²) and none otherwise, its ticket back to 0. The device run is
tests/gpu/test_flip_sparse_pcg_early_stop_gpu.py."""

import math

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _hex
from voxfx.kernels.flip import sparse_pressure_gpu
from voxfx.kernels.flip.sparse_pressure_gpu import _FINISH_THREADS, _K

# Input: op 0 — n, n partials (hex doubles): prints finish_order_total's sum on one block. op 1 —
# G m it maxit stopped thresh alpha (the last two hex doubles), then x, r, d, q (m + 1 hex floats
# each): prints update_solution's x, r, partials, then update_solution_stop's (from the same
# inputs), its state[0..3], scalars[D_RR] (NaN unless written) and the ticket after it.
HARNESS = PREAMBLE + r"""
#define LAUNCH(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
static void print_f(const std::vector<float>& v) { for (float a : v) printf("%a\n", a); }
static void print_d(const std::vector<double>& v) { for (double a : v) printf("%a\n", a); }

int main() {
    int op;
    if (scanf("%d", &op) != 1) return 1;
    if (op == 0) {
        int n;
        scanf("%d", &n);
        std::vector<double> p(n);
        for (auto& a : p) scanf("%la", &a);
        h_dim.x = 1; h_thread.x = 0; h_grid.x = 1; h_block.x = 0;
        printf("%a\n", finish_order_total(p.data(), n));
        return 0;
    }
    int G, m, it, maxit, stopped;
    double thresh, alpha;
    scanf("%d %d %d %d %d %la %la", &G, &m, &it, &maxit, &stopped, &thresh, &alpha);
    std::vector<float> x, r, d, q, z(m + 1, 0.0f), diag(m + 1, 1.0f);
    read_floats(x, m + 1);
    read_floats(r, m + 1);
    read_floats(d, m + 1);
    read_floats(q, m + 1);
    const double nan = __builtin_nan("");
    int sizes[2] = {0, m};
    for (int pass = 0; pass < 2; ++pass) {
        std::vector<float> xs = x, rs = r;
        std::vector<double> partials(2 * G, nan), scalars(8, nan);
        scalars[D_ALPHA] = alpha;
        scalars[D_THRESH] = thresh;
        int state[4] = {it, stopped, 0, maxit}, ticket = 0;
        if (pass == 0)
            LAUNCH(G, update_solution(xs.data(), rs.data(), d.data(), q.data(), z.data(), diag.data(), sizes, PRE_MG,
                                      scalars.data(), partials.data(), state));
        else
            LAUNCH(G, update_solution_stop(xs.data(), rs.data(), d.data(), q.data(), z.data(), diag.data(), sizes,
                                           PRE_MG, scalars.data(), partials.data(), state, &ticket));
        print_f(xs);
        print_f(rs);
        partials.resize(G);
        print_d(partials);
        if (pass == 1) {
            for (int s : state) printf("%d\n", s);
            printf("%a\n%d\n", scalars[D_RR], ticket);
        }
    }
    return 0;
}
"""


def _harness(tmp_path_factory, threads=None):
    extra = [] if threads is None else ["#undef FINISH_THREADS", f"#define FINISH_THREADS {threads}"]
    return _build(tmp_path_factory, with_defines(HARNESS, _K, extra), name=f"pcg_stop{threads or ''}")


@pytest.fixture(scope="module")
def stop(tmp_path_factory):
    return _harness(tmp_path_factory)


def block_total(partials, threads=_FINISH_THREADS):
    """voxfx_reduce.cuh block_total on *threads* threads, thread 0's result: each thread's
    strided sum in turn, each warp's by warp_sum (a lane past the warp's end reads its own value,
    as __shfl_down_sync), then the warps' by warp_sum, lanes past the warps 0."""
    def warp_sum(v):
        for o in (16, 8, 4, 2, 1):
            v = [v[lane] + (v[lane + o] if lane + o < 32 else v[lane]) for lane in range(32)]
        return v[0]

    sums = []
    for t in range(threads):
        s = 0.0
        for i in range(t, len(partials), threads):
            s += float(partials[i])
        sums.append(s)
    warps = [warp_sum(sums[w:w + 32]) for w in range(0, threads, 32)]
    return warp_sum(warps + [0.0] * (32 - len(warps)))


def _partials(rng, n):
    """Non-negative doubles over ~30 binary orders of magnitude (‖r‖² partials): the sum's order shows."""
    return rng.random(n) * np.exp2(rng.integers(-15, 15, n))


def _total(run, partials):
    return float.fromhex(run.raw(["0", str(len(partials)), *[float(p).hex() for p in partials]]).split()[0])


def test_the_finish_threads_are_the_finish_launch_and_a_define_of_the_loop_kernels():
    assert f"-DFINISH_THREADS={_FINISH_THREADS}" in _K.options and _FINISH_THREADS == 1024
    assert f"-DS_MAXIT={sparse_pressure_gpu._S_MAXIT}" in _K.options


@pytest.mark.parametrize("n", [1, 7, 33, 1000, 1024])
def test_the_last_blocks_total_is_finish_betas_bit_for_bit_and_another_order_is_not(stop, n):
    rng = np.random.default_rng(n)
    differs = 0
    for _ in range(6):
        p = _partials(rng, n)
        total = _total(stop, p)
        assert total.hex() == block_total(p).hex()
        differs += total != math.fsum(p) or total != block_total(p, 256) or total != sum(float(v) for v in p)
    if n >= 1000:  # the order matters on these partials: a sequential or 256-thread sum differs somewhere
        assert differs


def test_a_harness_summing_in_another_order_fails(tmp_path_factory):
    """The mutant: finish_order_total on 256 threads — block_total's order on 1024 no longer comes out."""
    mutant = _harness(tmp_path_factory, 256)
    rng = np.random.default_rng(5)
    misses = sum(_total(mutant, p).hex() != block_total(p).hex() for p in (_partials(rng, 1024) for _ in range(6)))
    assert misses > 0


def _solution(run, G, m, it, maxit, thresh, alpha, x, r, d, q, stopped=0):
    lines = ["1", f"{G} {m} {it} {maxit} {stopped} {float(thresh).hex()} {float(alpha).hex()}",
             *_hex(x), *_hex(r), *_hex(d), *_hex(q)]
    out = run.raw(lines, check=True).split()
    s, k = m + 1, 0
    parts = []
    for length in (s, s, G, s, s, G):
        parts.append(out[k:k + length])
        k += length
    state = [int(v) for v in out[k:k + 4]]
    return parts, state, float.fromhex(out[k + 4]), int(out[k + 5])


def _vectors(rng, m, bad=None):
    x, r, d, q = ((rng.standard_normal(m + 1) * 10.0 ** rng.integers(-3, 3, m + 1)).astype(np.float32)
                  for _ in range(4))
    for v in (x, r, d, q):
        v[m] = 0.0  # the sentinel
    if bad is not None:
        r[3] = bad
    return x, r, d, q


@pytest.mark.parametrize("case", ["converges", "runs-on", "limit", "not-finite", "converges-at-limit", "stopped"])
def test_update_solution_stop_is_update_solution_and_latches_what_finish_beta_would(stop, case):
    """The same x, r and ‖r‖² partials as update_solution; where finish_beta would stop this
    iteration (‖r‖² ≤ tol²‖b‖²; the iteration limit; ‖r‖² not finite) its writes — D_RR the total,
    S_IT + 1, S_CONVERGED, S_STOPPED — and otherwise none; a stopped solve untouched; the ticket 0."""
    rng = np.random.default_rng(len(case))
    G, m, alpha = 37, 5000, 0.37
    x, r, d, q = _vectors(rng, m, bad=np.inf if case == "not-finite" else None)
    first, *_ = _solution(stop, G, m, 4, 1000, 0.0, alpha, x, r, d, q)  # ‖r‖² partials of this update
    total = block_total([float.fromhex(v) for v in first[2]]) if case != "not-finite" else math.inf
    thresh = {"converges": total * 1.5, "converges-at-limit": total, "runs-on": total * 0.5,
              "limit": total * 0.5, "not-finite": 1e30, "stopped": total * 2}[case]
    maxit = 5 if case in ("limit", "converges-at-limit") else 1000
    stopped = int(case == "stopped")
    (x1, r1, p1, x2, r2, p2), state, rr, ticket = _solution(stop, G, m, 4, maxit, thresh, alpha, x, r, d, q, stopped)
    assert ticket == 0
    if stopped:  # returns at its first line: nothing moves
        assert [float.fromhex(v) for v in x2 + r2] == [float(v) for v in np.concatenate([x, r])]
        assert state == [4, 1, 0, maxit] and math.isnan(rr)
        return
    assert (x2, r2, p2) == (x1, r1, p1)
    if case == "not-finite":
        assert state == [5, 1, 0, maxit] and not math.isfinite(rr)
        return
    assert block_total([float.fromhex(v) for v in p2]) == total
    converged = total <= thresh
    if converged or case == "limit":  # finish_beta's writes, ahead of the V-cycle
        assert state == [5, 1, int(converged), maxit] and rr.hex() == total.hex()
    else:  # finish_beta's to make after the V-cycle, as before
        assert state == [4, 0, 0, maxit] and math.isnan(rr)
