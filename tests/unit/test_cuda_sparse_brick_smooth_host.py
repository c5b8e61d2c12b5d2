"""Level 0's brick smoother (cuda/flip_sparse_pressure_brick_smooth.cu: mg_brick_pre_smooth,
mg_brick_post_smooth; sparse_multigrid_bricks, VOXFX_SPARSE_MG_SMOOTHER "brick") on the host
without a GPU: nvcc builds the kernels as host functions (a block one thread, its shared memory
static; the grid-stride over the pool's slots with 7 blocks) and a C++ driver runs them on the
NumPy reference's level 0 (``sparse_pressure.Unknowns``: its cells and positions, diag), the
grid's brick table and random b and x. The pre-smoothed x and the post-smoothed x_out must be
``sparse_multigrid_bricks.pre_smooth`` / ``post_smooth``'s bit for bit, the r·z partials sum to
Σ b·x_out, on pools whose slots are out of key order, with a pinned cell, on a tank of several
bricks a side. The device run is tests/gpu/test_flip_sparse_mg_bricks_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_bricks_host import brick_tables, scene
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _hex
from voxfx.kernels.flip import sparse_multigrid_bricks, sparse_pressure
from voxfx.kernels.flip.grid import AIR, FLUID
from voxfx.kernels.flip.sparse_multigrid import MG_OMEGA
from voxfx.kernels.flip.sparse_pressure_gpu import _BS, _MG

# Input: size capacity blocks (the smoothing's grid), nbr27 (27 × capacity), m_red m, the size
# positions, diag, b, x (m + 1 each, hex). Output: x by mg_brick_pre_smooth (m + 1), x_out by
# mg_brick_post_smooth from x (m + 1), its partials_rz (G doubles), every value hex; the ticket after it.
HARNESS = PREAMBLE + r"""
#define __syncthreads_or(flag) (flag)  // a block is one thread
#define __threadfence() ((void)0)
#include "flip_sparse_pressure_brick_smooth.cu"
#define LAUNCH(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
static const int G = 7;  // the reduction grid: partials_rz's entries

int main() {
    int size, cap, m_red, m, blocks;
    if (scanf("%d %d %d", &size, &cap, &blocks) != 3) return 1;
    std::vector<int> nbr27(27 * (size_t)cap), position(size);
    for (auto& v : nbr27) scanf("%d", &v);
    scanf("%d %d", &m_red, &m);
    for (auto& v : position) scanf("%d", &v);
    const int s = m + 1;
    std::vector<float> diag, b, x0;
    read_floats(diag, s);
    read_floats(b, s);
    read_floats(x0, s);
    int sizes[2] = {m_red, m}, state[4] = {0, 0, 0, 0};
    unsigned long long ptrs[BT_WORDS] = {(unsigned long long)(size_t)position.data(), 0,
                                         (unsigned long long)(size_t)nbr27.data(), 0, 0,
                                         (unsigned long long)cap * 64};
    const float nan = __builtin_nanf("");
    std::vector<float> x(s, nan), out(s, nan);
    x[m] = 0.0f;
    LAUNCH(blocks, mg_brick_pre_smooth(b.data(), ptrs, diag.data(), sizes, x.data(), state));
    for (float v : x) printf("%a\n", v);
    std::vector<double> p(G, nan), block_rz(blocks, nan);
    int ticket = 0;
    LAUNCH(blocks, mg_brick_post_smooth(x0.data(), b.data(), ptrs, diag.data(), sizes, out.data(), block_rz.data(),
                                        &ticket, p.data(), G, state));
    for (float v : out) printf("%a\n", v);
    for (double v : p) printf("%a\n", v);
    printf("%d\n", ticket);
    return 0;
}
"""


@pytest.fixture(scope="module", params=[None, 2], ids=["sweeps-default", "sweeps-2"])
def smoother(request, tmp_path_factory):
    """The harness with the module's BRICK_SWEEPS, or with *param* sweeps (VOXFX_SPARSE_MG_BRICK_SWEEPS);
    ``run.sweeps``: theirs."""
    extra = [] if request.param is None else ["#undef BRICK_SWEEPS", f"#define BRICK_SWEEPS {request.param}"]
    run = _build(tmp_path_factory, with_defines(HARNESS, _BS, extra), name="brick_smooth")
    run.sweeps = request.param or sparse_multigrid_bricks.SWEEPS
    return run


def test_brick_smooth_kernels_are_compiled_with_the_vcycles_options():
    """They round as the V-cycle's kernels: the same -D constants (ω, sweeps), no FMA; and the
    brick's sweeps (sparse_multigrid_bricks.SWEEPS)."""
    assert set(_BS.options) == set(_MG.options) | {f"-DBRICK_SWEEPS={sparse_multigrid_bricks.SWEEPS}"}


def _grid(name):
    if name == "big":  # several bricks a side: faces crossed along every axis
        from tests.unit.test_cuda_sparse_pressure_host import _tank

        return _tank((40, 24, 36), 8)
    return scene(name)


@pytest.mark.parametrize("name,blocks", [("tank", 7), ("sealed", 7), ("moved", 7), ("big", 7), ("big", 1),
                                         ("big", "slots"), ("moved", "slots+5")])
def test_brick_smooth_kernels_give_the_numpy_reference_bit_for_bit(smoother, name, blocks):
    """Grid-stride over the slots (7 blocks, one) and a block a slot (the slots, five blocks more
    than them: blocks with no slot): the same x every time; r·z in partials_rz[0], the rest 0, the
    ticket back to 0."""
    g = _grid(name)
    kind, _, _ = sparse_pressure.solver_cells(g)
    if name == "sealed":  # liquid up to the lid, no AIR: pin one FLUID cell as a sealed region's pin is
        kind = kind.copy()
        kind[np.flatnonzero(kind == FLUID)[len(np.flatnonzero(kind == FLUID)) // 2]] = AIR
    level = sparse_pressure.Unknowns(g, kind)
    m, m_red = level.m, level.m_red
    assert m > 0 and 0 < m_red < m
    _, nbr27 = brick_tables(g)
    rng = np.random.default_rng(5)
    # magnitudes over six decades: a sum in another order or with another term rounds otherwise
    b = np.append(rng.normal(0, 1, m) * 10.0 ** rng.integers(-3, 3, m), 0).astype(np.float32)
    x = np.append(rng.normal(0, 1, m) * 10.0 ** rng.integers(-3, 3, m), 0).astype(np.float32)
    diag = np.asarray(level.diag, np.float32)
    if isinstance(blocks, str):
        blocks = g.capacity + (5 if blocks.endswith("+5") else 0)
    lines = [f"{g.size} {g.capacity} {blocks}", *map(str, np.asarray(nbr27).ravel()), f"{m_red} {m}",
             *map(str, level.position), *_hex(diag), *_hex(b), *_hex(x)]
    out = smoother.raw(lines, check=True).split()
    s, G = m + 1, 7
    assert len(out) == 2 * s + G + 1 and out[-1] == "0"  # the ticket ready for the next launch
    pre = np.array([float.fromhex(w) for w in out[:s]], np.float32)
    post = np.array([float.fromhex(w) for w in out[s:2 * s]], np.float32)
    partials = np.array([float.fromhex(w) for w in out[2 * s:-1]])
    assert np.all(partials[1:] == 0)  # the total in the first (finish_beta sums them in order)
    inside = sparse_multigrid_bricks.brick_inside(level)
    sweeps = smoother.sweeps
    want_pre = sparse_multigrid_bricks.pre_smooth(level, inside, b, MG_OMEGA, sweeps)
    want_post = sparse_multigrid_bricks.post_smooth(level, inside, x.copy(), b, MG_OMEGA, sweeps)
    assert np.array_equal(pre[:m].view(np.int32), want_pre[:m].view(np.int32)), \
        np.flatnonzero(pre[:m] != want_pre[:m])[:10]
    assert np.array_equal(post[:m].view(np.int32), want_post[:m].view(np.int32)), \
        np.flatnonzero(post[:m] != want_post[:m])[:10]
    assert pre[m] == 0 and np.isnan(post[m])  # the sentinel untouched
    rz = float(np.dot(b[:m].astype(np.float64), want_post[:m].astype(np.float64)))
    assert partials.sum() == pytest.approx(rz, rel=1e-12, abs=1e-12 * float(np.abs(b[:m] * want_post[:m]).sum()))
    assert partials[0] == _block_order_rz(level, np.asarray(nbr27), g.capacity, blocks, b, want_post)
    # the brick smoother is not the global sweeps: a halo held fixed changes values
    assert not np.array_equal(want_post, _global_post(level, x, b, sweeps))


def _block_order_rz(level, nbr27, capacity, blocks, b, x):
    """Σ b·x as the host run sums it: per block (a block one thread) its slots in turn (slot ≡
    block mod blocks), their cells in order, then the blocks' partials in block order."""
    position, m, total = np.asarray(level.position), level.m, 0.0
    for block in range(blocks):
        part = 0.0
        for slot in range(block, capacity, blocks):
            if nbr27.reshape(-1, 27)[slot, 13] < 0:
                continue
            for u in position[slot * 512:(slot + 1) * 512]:
                if u < m:
                    part += float(b[u]) * float(x[u])
        total += part
    return total


def _global_post(level, x, b, sweeps):
    from voxfx.kernels.flip import sparse_multigrid

    y = x.copy()
    for _ in range(sweeps):
        sparse_multigrid.sweep(level, y, b, 1, MG_OMEGA)
        sparse_multigrid.sweep(level, y, b, 0, MG_OMEGA)
    return y
