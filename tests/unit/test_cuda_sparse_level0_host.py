"""Level 0's passes with their neighbours found from the bricks (cuda/flip_sparse_pressure_level0.cu,
the name_nb kernels; sparse_pressure_vcycle.NBR "bricks") on the host without a GPU: nvcc builds
them with their table twins (flip_sparse_pressure_vcycle.cu's mg_smooth … mg_smooth_red_dot,
flip_sparse_pressure.cu's apply_laplacian and cg_init_warm) as host functions, and a C++ driver
runs each pair on the same inputs: the NumPy reference's level 0 (``sparse_pressure.Unknowns``:
its nbr table, diag), the grid's brick table, its cells and positions, random b and x. Every
value each writes (x, r, q, d and the reductions' partial sums) must be the table twin's bit for
bit, on pools whose slots are out of key order, with a pinned cell (AIR inside the liquid), on a
tank of several bricks a side; the residual must be the NumPy one. The device run is
tests/gpu/test_flip_sparse_level0_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_bricks_host import brick_tables, scene
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _hex
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_vcycle
from voxfx.kernels.flip.grid import AIR, FLUID
from voxfx.kernels.flip.pressure import MG_SWEEPS
from voxfx.kernels.flip.sparse_pressure_gpu import _MG, _NB

# Input: size capacity, nbr27 (27 × capacity), m_red m, the m cells, the size positions, the
# table (6 × (m + 1)), diag, b, x (m + 1 each, hex). Output, each pair table then bricks: per
# kernel its written vectors (m + 1 values each, hex) and partial sums (G doubles, hex).
HARNESS = PREAMBLE + r"""
#include "flip_sparse_pressure_vcycle.cu"
#include "flip_sparse_pressure_level0.cu"
typedef long long ll;
#define LAUNCH(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
static const int G = 7;  // the reductions' "blocks"
static void put(const std::vector<float>& v) { for (float a : v) printf("%a\n", a); }
static void put(const std::vector<double>& v) { for (double a : v) printf("%a\n", a); }

int main() {
    int size, cap, m_red, m;
    if (scanf("%d %d", &size, &cap) != 2) return 1;
    std::vector<int> nbr27(27 * (size_t)cap), position(size), nbr;
    for (auto& v : nbr27) scanf("%d", &v);
    scanf("%d %d", &m_red, &m);
    std::vector<ll> cells(std::max(m, 1));
    for (int u = 0; u < m; ++u) scanf("%lld", &cells[u]);
    for (auto& v : position) scanf("%d", &v);
    const int s = m + 1;
    read_ints(nbr, 6 * (size_t)s);
    std::vector<float> diag, b, x0;
    read_floats(diag, s);
    read_floats(b, s);
    read_floats(x0, s);
    int sizes[2] = {m_red, m}, state[4] = {0, 0, 0, 0};
    unsigned long long ptrs[BT_WORDS] = {(unsigned long long)(size_t)position.data(),
                                         (unsigned long long)(size_t)cells.data(),
                                         (unsigned long long)(size_t)nbr27.data(), 0, 0, 0};
    const float nan = __builtin_nanf("");
    for (int way = 0; way < 2; ++way) {
        std::vector<float> x, r, q, d;
        std::vector<double> p(2 * G, nan);
        for (int colour = 0; colour < 2; ++colour) {  // mg_smooth, each colour from x0
            x = x0;
            if (way) LAUNCH(s, mg_smooth_nb(x.data(), b.data(), ptrs, diag.data(), sizes, 0, colour, 0, state));
            else LAUNCH(s, mg_smooth(x.data(), b.data(), nbr.data(), diag.data(), s, sizes, 0, colour, 0, state));
            put(x);
        }
        x.assign(s, nan); x[m] = 0.0f;  // mg_smooth_first, mg_smooth_first2: from b alone
        if (way) LAUNCH(s, mg_smooth_first_nb(x.data(), b.data(), ptrs, diag.data(), sizes, 0, state));
        else LAUNCH(s, mg_smooth_first(x.data(), b.data(), nbr.data(), diag.data(), s, sizes, 0, state));
        put(x);
        x.assign(s, nan); x[m] = 0.0f;
        if (way) LAUNCH(s, mg_smooth_first2_nb(x.data(), b.data(), ptrs, diag.data(), sizes, 0, state));
        else LAUNCH(s, mg_smooth_first2(x.data(), b.data(), nbr.data(), diag.data(), s, sizes, 0, state));
        put(x);
        x = x0; r.assign(s, nan);  // mg_smooth_black_residual
        if (way) LAUNCH(s, mg_smooth_black_residual_nb(x.data(), b.data(), ptrs, diag.data(), sizes, 0, r.data(),
                                                       state));
        else LAUNCH(s, mg_smooth_black_residual(x.data(), b.data(), nbr.data(), diag.data(), s, sizes, 0, r.data(),
                                                state));
        put(x); put(r);
        for (int all = 1; all >= 0; --all) {  // mg_residual over every unknown, over the red
            r.assign(s, nan);
            if (way) LAUNCH(s, mg_residual_nb(x0.data(), b.data(), ptrs, diag.data(), sizes, 0, all, r.data(), state));
            else LAUNCH(s, mg_residual(x0.data(), b.data(), nbr.data(), diag.data(), s, sizes, 0, all, r.data(),
                                       state));
            put(r);
        }
        x = x0;  // mg_smooth_red_dot
        if (way) LAUNCH(G, mg_smooth_red_dot_nb(x.data(), b.data(), ptrs, diag.data(), sizes, p.data(), state));
        else LAUNCH(G, mg_smooth_red_dot(x.data(), b.data(), nbr.data(), diag.data(), s, sizes, p.data(), state));
        put(x); put(p);
        q.assign(s, nan);  // apply_laplacian (d = x0)
        if (way) LAUNCH(G, apply_laplacian_nb(x0.data(), q.data(), ptrs, diag.data(), sizes, p.data(), state));
        else LAUNCH(G, apply_laplacian(x0.data(), q.data(), nbr.data(), diag.data(), s, sizes, p.data(), state));
        put(q); put(p);
        r.assign(s, nan); d.assign(s, nan);  // cg_init_warm (x₀ = x0)
        if (way) LAUNCH(G, cg_init_warm_nb(b.data(), x0.data(), r.data(), d.data(), ptrs, diag.data(), sizes,
                                           p.data()));
        else LAUNCH(G, cg_init_warm(b.data(), x0.data(), r.data(), d.data(), nbr.data(), diag.data(), s, sizes,
                                    p.data()));
        put(r); put(d); put(p);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def level0(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(HARNESS, _MG, [f"#define MG_SWEEPS {MG_SWEEPS}"]), name="level0")


def _bits(words):
    return np.array([float.fromhex(w) for w in words], np.float64)


def _grid(name):
    if name == "big":  # several bricks a side: faces crossed along every axis
        from tests.unit.test_cuda_sparse_pressure_host import _tank

        return _tank((40, 24, 36), 8)
    return scene(name)


def test_level0_kernels_are_compiled_with_the_vcycles_options():
    """The name_nb kernels round as their twins: the same -D constants (ω, sweeps), no FMA."""
    assert _NB.options == _MG.options


@pytest.mark.parametrize("name", ["tank", "sealed", "moved", "big"])
def test_brick_neighbours_give_the_table_kernels_values_bit_for_bit(level0, name):
    """Every level-0 pass through the bricks writes its table twin's values, every bit, and the
    residual is the NumPy one; the sums are not trivially exact (another neighbour order rounds
    otherwise), so a neighbour found wrong or added out of order would show."""
    g = _grid(name)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    m, m_red = level.m, level.m_red
    assert m > 0 and 0 < m_red < m
    if name == "sealed":  # liquid up to the lid, no AIR: pin one FLUID cell as a sealed region's pin is
        kind = kind.copy()
        kind[np.flatnonzero(kind == FLUID)[len(np.flatnonzero(kind == FLUID)) // 2]] = AIR
    _, nbr27 = brick_tables(g)
    nbr = np.asarray(level.nbr, np.int64)
    diag = np.asarray(level.diag, np.float32)
    rng = np.random.default_rng(5)
    # magnitudes over six decades: a sum in another order or with another term rounds otherwise
    b = np.append(rng.normal(0, 1, m) * 10.0 ** rng.integers(-3, 3, m), 0).astype(np.float32)
    x = np.append(rng.normal(0, 1, m) * 10.0 ** rng.integers(-3, 3, m), 0).astype(np.float32)
    lines = [f"{g.size} {g.capacity}", *map(str, np.asarray(nbr27).ravel()), f"{m_red} {m}",
             *map(str, level.cells), *map(str, level.position), *map(str, nbr.ravel()), *_hex(diag), *_hex(b),
             *_hex(x)]
    out = level0.raw(lines, check=True).split()
    s, G = m + 1, 7
    # per way: smooth ×2, first, first2, black x + r, residual ×2, red_dot x + p, laplacian q + p, warm r + d + p
    counts = [s] * 8 + [s, 2 * G] + [s, 2 * G] + [s, s, 2 * G]
    half = sum(counts)
    assert len(out) == 2 * half, (len(out), s)
    table, bricks = _bits(out[:half]), _bits(out[half:])
    assert np.array_equal(table.view(np.int64), bricks.view(np.int64)), np.flatnonzero(table != bricks)[:10]
    residual = table[sum(counts[:6]):sum(counts[:7])]
    A_x = diag[:m] * x[:m] - sum_in_order(x, nbr, range(6))[:m]
    assert np.array_equal(residual[:m].astype(np.float32).view(np.int32), (b[:m] - A_x).view(np.int32))
    assert not np.array_equal(sum_in_order(x, nbr, range(5, -1, -1))[:m].view(np.int32),
                              sum_in_order(x, nbr, range(6))[:m].view(np.int32))


def sum_in_order(x, nbr, order):
    """Σ x over the six neighbours, float32, added in *order*."""
    order = list(order)
    s = x[nbr[order[0]]]
    for d in order[1:]:
        s = (s + x[nbr[d]]).astype(np.float32)
    return s


def test_nbr_switch_reads_the_environment(monkeypatch):
    monkeypatch.setattr(sparse_pressure_vcycle, "NBR", None)
    monkeypatch.setenv("VOXFX_SPARSE_MG_NBR", "bricks")
    assert sparse_pressure_vcycle.nbr_choice() == "bricks"
    monkeypatch.setenv("VOXFX_SPARSE_MG_NBR", "rows")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_MG_NBR"):
        sparse_pressure_vcycle.nbr_choice()


def test_nbr_table_switch_reads_the_environment_and_applies_to_brick_solvers_only(monkeypatch):
    """``NBR_TABLE`` (level 0's nbr rows on the brick path): "skip" by default, "fill" kept, any
    other word refused; the brick passes (and so the skip) apply to a set-up workspace's
    multigrid solver of two levels or more with ``NBR`` "bricks", to no other."""
    monkeypatch.setattr(sparse_pressure_vcycle, "NBR_TABLE", None)
    monkeypatch.delenv("VOXFX_SPARSE_MG_NBR_TABLE", raising=False)
    assert sparse_pressure_vcycle.nbr_table_choice() == "skip"
    monkeypatch.setenv("VOXFX_SPARSE_MG_NBR_TABLE", "fill")
    assert sparse_pressure_vcycle.nbr_table_choice() == "fill"
    monkeypatch.setattr(sparse_pressure_vcycle, "NBR_TABLE", "skip")  # a bench's value overrides
    assert sparse_pressure_vcycle.nbr_table_choice() == "skip"
    monkeypatch.setattr(sparse_pressure_vcycle, "NBR_TABLE", None)
    monkeypatch.setenv("VOXFX_SPARSE_MG_NBR_TABLE", "none")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_MG_NBR_TABLE"):
        sparse_pressure_vcycle.nbr_table_choice()
    applies = sparse_pressure_vcycle.nbr_bricks_apply
    assert applies("bricks", 3, "mg", 2)
    assert not applies("table", 3, "mg", 2)
    assert not applies("bricks", None, "mg", 5)  # no workspace: the table's passes
    assert not applies("bricks", 3, "jacobi", 5)
    assert not applies("bricks", 3, "mg", 1)
