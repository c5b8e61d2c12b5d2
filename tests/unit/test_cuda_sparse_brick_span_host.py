"""Level 0's brick smoother with the span loads (cuda/flip_sparse_pressure_brick_smooth.cu:
mg_brick_span_table, mg_brick_pre_smooth_span, mg_brick_post_smooth_span;
VOXFX_SPARSE_MG_BRICK_THREADS "span") on the host without a GPU: nvcc builds the kernels as host
functions (a block one thread: BSS_THREADS 1, so a thread holds all 256 cells of a class; shared
memory static) and a C++ driver runs them on the NumPy reference's level 0
(``sparse_pressure.Unknowns``), the grid's brick table and random b and x. The span table must be
``sparse_multigrid_bricks.span_table``'s word for word and address every unknown
(``span_unknowns``); the pre- and post-smoothed x ``pre_smooth`` / ``post_smooth``'s bit for bit
(the same as the position kernels'); r·z the sum in the kernels' order. The device run is
tests/gpu/test_flip_sparse_mg_bricks_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_brick_smooth_host import _global_post, _grid
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _hex
from voxfx.kernels.flip import sparse_multigrid_bricks, sparse_pressure
from voxfx.kernels.flip.grid import AIR, FLUID
from voxfx.kernels.flip.sparse_multigrid import MG_OMEGA
from voxfx.kernels.flip.sparse_pressure_gpu import _BS

W = sparse_multigrid_bricks.SPAN_WORDS
# Input: size capacity blocks table_blocks, nbr27 (27 × capacity), m_red m, the size positions, diag,
# b, x (m + 1 each, hex). Output: the span table (capacity × W ints), the halo table (capacity × 384),
# x by mg_brick_pre_smooth_span (m + 1), x_out by mg_brick_post_smooth_span from x (m + 1), its
# partials_rz (G doubles), the ticket; the same three by mg_brick_post_smooth_spanh.
HARNESS = PREAMBLE + r"""
#define __syncthreads_or(flag) (flag)  // a block is one thread
#define __threadfence() ((void)0)
#include "flip_sparse_pressure_brick_smooth.cu"
#define LAUNCH(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
static const int G = 7;  // the reduction grid: partials_rz's entries

int main() {
    int size, cap, m_red, m, blocks, table_blocks;
    if (scanf("%d %d %d %d", &size, &cap, &blocks, &table_blocks) != 4) return 1;
    std::vector<int> nbr27(27 * (size_t)cap), position(size), span((size_t)cap * BSS_WORDS, -7),
        halo((size_t)cap * BS_FACES, -7);
    for (auto& v : nbr27) scanf("%d", &v);
    scanf("%d %d", &m_red, &m);
    for (auto& v : position) scanf("%d", &v);
    const int s = m + 1;
    std::vector<float> diag, b, x0;
    read_floats(diag, s);
    read_floats(b, s);
    read_floats(x0, s);
    int sizes[2] = {m_red, m}, state[4] = {0, 0, 0, 0};
    unsigned long long ptrs[BT_SPAN_HALO + 1] = {(unsigned long long)(size_t)position.data(), 0,
                                                 (unsigned long long)(size_t)nbr27.data(), 0, 0,
                                                 (unsigned long long)cap * 64, (unsigned long long)(size_t)span.data(),
                                                 (unsigned long long)(size_t)halo.data()};
    LAUNCH(table_blocks, mg_brick_span_table(ptrs, sizes, span.data()));
    for (int v : span) printf("%d\n", v);
    for (int v : halo) printf("%d\n", v);
    const float nan = __builtin_nanf("");
    std::vector<float> x(s, nan), out(s, nan);
    x[m] = 0.0f;
    LAUNCH(blocks, mg_brick_pre_smooth_span(b.data(), ptrs, diag.data(), sizes, x.data(), state));
    for (float v : x) printf("%a\n", v);
    std::vector<double> p(G, nan), block_rz(blocks, nan);
    int ticket = 0;
    LAUNCH(blocks, mg_brick_post_smooth_span(x0.data(), b.data(), ptrs, diag.data(), sizes, out.data(),
                                             block_rz.data(), &ticket, p.data(), G, state));
    for (float v : out) printf("%a\n", v);
    for (double v : p) printf("%a\n", v);
    printf("%d\n", ticket);
    std::vector<float> out_h(s, nan);  // the halo table's post-smoothing (spanh)
    std::vector<double> p_h(G, nan);
    LAUNCH(blocks, mg_brick_post_smooth_spanh(x0.data(), b.data(), ptrs, diag.data(), sizes, out_h.data(),
                                              block_rz.data(), &ticket, p_h.data(), G, state));
    for (float v : out_h) printf("%a\n", v);
    for (double v : p_h) printf("%a\n", v);
    printf("%d\n", ticket);
    return 0;
}
"""


@pytest.fixture(scope="module", params=[None, 2], ids=["sweeps-default", "sweeps-2"])
def smoother(request, tmp_path_factory):
    """The harness (a block one thread) with the module's BRICK_SWEEPS, or *param* sweeps."""
    extra = ["#define BSS_THREADS 1"]
    if request.param is not None:
        extra += ["#undef BRICK_SWEEPS", f"#define BRICK_SWEEPS {request.param}"]
    run = _build(tmp_path_factory, with_defines(HARNESS, _BS, extra), name="brick_span")
    run.sweeps = request.param or sparse_multigrid_bricks.SWEEPS
    return run


def _level(name):
    g = _grid(name)
    kind, _, _ = sparse_pressure.solver_cells(g)
    if name == "sealed":  # liquid up to the lid, no AIR: pin one FLUID cell as a sealed region's pin is
        kind = kind.copy()
        kind[np.flatnonzero(kind == FLUID)[len(np.flatnonzero(kind == FLUID)) // 2]] = AIR
    return g, sparse_pressure.Unknowns(g, kind)


@pytest.mark.parametrize("name", ["tank", "sealed", "moved", "big"])
def test_span_table_addresses_every_unknown(name):
    """The NumPy span table gives each live slot's cells their unknowns (``span_unknowns``), free
    slots none; a numbering whose class is not one run is refused."""
    from tests.unit.test_cuda_sparse_pressure_bricks_host import brick_tables

    g, level = _level(name)
    _, nbr27 = brick_tables(g)
    live = np.asarray(nbr27)[:, 13] >= 0
    table = sparse_multigrid_bricks.span_table(level.position, live, level.m_red, level.m)
    got = sparse_multigrid_bricks.span_unknowns(table, level.m).reshape(-1, 512)
    want = np.asarray(level.position).reshape(-1, 512).copy()
    want[~live] = level.m
    assert np.array_equal(got, want)
    assert np.all(table[live, 48] == 0)  # red: the even cells (bricks 8-aligned)
    swapped = np.asarray(level.position).copy()  # two unknowns of one class swapped: not a run
    on = np.flatnonzero(swapped < level.m_red)
    swapped[on[0]], swapped[on[1]] = swapped[on[1]], swapped[on[0]]
    with pytest.raises(ValueError, match="not one run"):
        sparse_multigrid_bricks.span_table(swapped, live, level.m_red, level.m)


@pytest.mark.parametrize("name,blocks", [("tank", 7), ("sealed", 7), ("moved", 7), ("big", 7), ("big", 1),
                                         ("big", "slots"), ("moved", "slots+5")])
def test_span_kernels_give_the_numpy_reference_bit_for_bit(smoother, name, blocks):
    """The table (3 blocks of 8 slots in turn) the NumPy one's; grid-stride over the slots (7 blocks,
    one) and a block a slot (five blocks more than slots): x the brick reference's, r·z in
    partials_rz[0] in the kernels' order, the rest 0, the ticket back to 0."""
    from tests.unit.test_cuda_sparse_pressure_bricks_host import brick_tables

    g, level = _level(name)
    m, m_red = level.m, level.m_red
    assert m > 0 and 0 < m_red < m
    _, nbr27 = brick_tables(g)
    nbr27 = np.asarray(nbr27)
    rng = np.random.default_rng(5)
    b = np.append(rng.normal(0, 1, m) * 10.0 ** rng.integers(-3, 3, m), 0).astype(np.float32)
    x = np.append(rng.normal(0, 1, m) * 10.0 ** rng.integers(-3, 3, m), 0).astype(np.float32)
    diag = np.asarray(level.diag, np.float32)
    if isinstance(blocks, str):
        blocks = g.capacity + (5 if blocks.endswith("+5") else 0)
    lines = [f"{g.size} {g.capacity} {blocks} 3", *map(str, nbr27.ravel()), f"{m_red} {m}",
             *map(str, level.position), *_hex(diag), *_hex(b), *_hex(x)]
    out = smoother.raw(lines, check=True).split()
    s, G, T, H = m + 1, 7, g.capacity * W, g.capacity * sparse_multigrid_bricks.SPAN_HALO
    assert len(out) == T + H + 3 * s + 2 * G + 2 and out[-1] == "0"  # the ticket ready for the next launch
    table = np.array(out[:T], np.int64).astype(np.int32).reshape(-1, W)
    live = nbr27[:, 13] >= 0
    assert np.array_equal(table, sparse_multigrid_bricks.span_table(level.position, live, m_red, m))
    halo = np.array(out[T:T + H], np.int64).reshape(g.capacity, -1)
    assert np.array_equal(halo, sparse_multigrid_bricks.span_halo(level.position, nbr27, m))
    with_halo, out = out[T + H + 2 * s + G + 1:], out[:T] + out[T + H:T + H + 2 * s + G + 1]
    assert with_halo[:s + G] == out[T + s:T + 2 * s + G] and with_halo[-1] == "0"  # spanh: the same bits
    pre = np.array([float.fromhex(w) for w in out[T:T + s]], np.float32)
    post = np.array([float.fromhex(w) for w in out[T + s:T + 2 * s]], np.float32)
    partials = np.array([float.fromhex(w) for w in out[T + 2 * s:-1]])
    assert np.all(partials[1:] == 0)
    inside = sparse_multigrid_bricks.brick_inside(level)
    want_pre = sparse_multigrid_bricks.pre_smooth(level, inside, b, MG_OMEGA, smoother.sweeps)
    want_post = sparse_multigrid_bricks.post_smooth(level, inside, x.copy(), b, MG_OMEGA, smoother.sweeps)
    assert np.array_equal(pre[:m].view(np.int32), want_pre[:m].view(np.int32)), \
        np.flatnonzero(pre[:m] != want_pre[:m])[:10]
    assert np.array_equal(post[:m].view(np.int32), want_post[:m].view(np.int32)), \
        np.flatnonzero(post[:m] != want_post[:m])[:10]
    assert pre[m] == 0 and np.isnan(post[m])  # the sentinel untouched
    assert partials[0] == _span_order_rz(level, live, g.capacity, blocks, b, want_post)
    assert not np.array_equal(want_post, _global_post(level, x, b, smoother.sweeps))


def _span_order_rz(level, live, capacity, blocks, b, x):
    """Σ b·x as the host run sums it: per block (one thread) its slots in turn, each slot's class 0
    then class 1 cells in z, y, x order, then the blocks' partials in block order."""
    position, m, total = np.asarray(level.position), level.m, 0.0
    order = []
    for q in (0, 1):
        for k in range(256):
            z, y = k >> 5, (k >> 2) & 7
            order.append((z << 6) | (y << 3) | ((k & 3) << 1) | ((y + z + q) & 1))
    for block in range(blocks):
        part = 0.0
        for slot in range(block, capacity, blocks):
            if not live[slot]:
                continue
            for cell in order:
                u = position[slot * 512 + cell]
                if u < m:
                    part += float(b[u]) * float(x[u])
        total += part
    return total
