"""The multigrid set-up's brick path (sparse_pressure_setup.BRICKS: level 1 and its tables to
and from level 0 by the brick look-ups of cuda/flip_sparse_pressure_bricks.cu, then the
sorted-key kernels of flip_sparse_pressure_setup.cu from level 2 on) against the NumPy
reference (sparse_multigrid.VCycle), on the host without a GPU: nvcc builds the kernels as
host functions (one "thread" a block, atomics plain) and a C++ driver launches them in
sparse_pressure_setup.build's order, a stable sort standing in for cupy.argsort. Every
level's m, m_red, nbr, diag, up and down must be the reference's integers. The device run
is tests/gpu/test_flip_sparse_pressure_bricks_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _tank
from tests.unit.test_cuda_sparse_pressure_setup_host import SETUP_LEVELS, assert_levels
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure, sparse_transfer
from voxfx.kernels.flip.grid import FLUID, SOLID
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.grid import GridSpec

# After "size capacity" (int size, cap, m_red0, m0, n0, lo[3] declared): level 0 as
# level0_lines writes it: kind (size), the capacity active flags, slot coordinates
# (3 × capacity), nbr27 (27 × capacity), m_red m, the m cells, the size positions, the set's
# size and lattice box min (3). Shared with the V-cycle's brick transfers
# (test_cuda_sparse_vcycle_bricks_host.py).
LEVEL0_INPUT = r"""
    std::vector<unsigned char> kind(size);
    for (auto& k : kind) { int t; scanf("%d", &t); k = (unsigned char)t; }
    std::vector<char> active_bytes(cap);
    for (auto& a : active_bytes) { int t; scanf("%d", &t); a = (char)t; }
    const bool* active = reinterpret_cast<const bool*>(active_bytes.data());
    std::vector<int> coords(3 * (size_t)cap), nbr27(27 * (size_t)cap), position0(size);
    for (auto& v : coords) scanf("%d", &v);
    for (auto& v : nbr27) scanf("%d", &v);
    scanf("%d %d", &m_red0, &m0);
    std::vector<ll> cells0(std::max(m0, 1));
    for (int u = 0; u < m0; ++u) scanf("%lld", &cells0[u]);
    for (auto& v : position0) scanf("%d", &v);
    scanf("%d %d %d %d", &n0, &lo[0], &lo[1], &lo[2]);
"""

# After "nbk": the topology's nbk sorted brick keys, then their slots (bkeys, bslots).
BRICK_KEYS_INPUT = r"""
    std::vector<ll> bkeys(std::max(nbk, 1));
    std::vector<int> bslots(std::max(nbk, 1));
    for (int p = 0; p < nbk; ++p) scanf("%lld", &bkeys[p]);
    for (int p = 0; p < nbk; ++p) scanf("%d", &bslots[p]);
"""

# Input: MG_MIN_SIDE MAX_LEVELS MARGIN TAIL (0: every level launch by launch, else the first
# level of mgs_tail_levels, ≥ 2), size capacity, kind (size), the capacity active flags,
# slot coordinates (3 × capacity), the brick table nbr27 (27 × capacity); level 0's m_red m,
# its m cells, the size positions, its set's size and lattice box min (3); RANKS (1: level 1 by
# ranks, 0: sorted) and the topology's brick count, sorted keys and their slots. Output per kept
# coarse level: m m_red, nbr, diag (hex), up (8 × (m_fine + 1)), down (64 × (m + 1)).
BRICKS = PREAMBLE.replace('#include "flip_sparse_pressure.cu"', '#include "flip_sparse_pressure_setup.cu"\n'
                          '#include "flip_sparse_pressure_bricks.cu"') + r"""
#include <algorithm>
#include <climits>
#include <numeric>
""" + SETUP_LEVELS + r"""
int main() {
    int min_side, max_levels, margin, tail, size, cap, m_red0, m0, n0, lo[3];
    if (scanf("%d %d %d %d %d %d", &min_side, &max_levels, &margin, &tail, &size, &cap) != 6) return 1;
""" + LEVEL0_INPUT + r"""
    int ranked, nbk;
    scanf("%d %d", &ranked, &nbk);
""" + BRICK_KEYS_INPUT + r"""    const std::vector<int> bounds = level_bounds(n0, max_levels);
    const int count = (int)bounds.size();
    std::vector<int> cnt, span;
    level_sizes(count, cnt, span);
    cnt[0] = n0; cnt[1] = m_red0; cnt[2] = m0;
    ONE_PER_ITEM(m0, mgb_unknown_span(cells0.data(), &cnt[0], coords.data(), &span[0]));
    std::vector<Built> built(count);
    // level 1 by the bricks (sparse_pressure_setup._level1_by_bricks)
    const int cand = cap * 64, nb1 = bounds[1], room = std::max(nb1, 1);
    std::vector<unsigned char> flag(cand, 9), fluid(room, 7);
    std::vector<int> take(cand, -7), scan, candv(room, -7);
    std::vector<int> map1(cand, -7);
    ONE_PER_ITEM(cand, mgb_coarsen(kind.data(), active, cand, flag.data(), take.data(), map1.data()));
    scan_rows(take, scan, 1, cand);
    Set f;
    f.bx = coarser(lo[0] - margin, margin); f.by = coarser(lo[1] - margin, margin);
    f.bz = coarser(lo[2] - margin, margin);
    std::vector<ll> keys(room, -7);
    f.keys.assign(room, -1); f.fluid.assign(room, 7);
    std::vector<int> scand(room, -7), uorder;
    if (ranked) {  // sparse_pressure_setup.RANKS: mgb_segment_counts, a scan, mgb_ranked
        std::vector<int> seg(std::max(16 * nbk, 1), -7), segscan;
        ONE_PER_ITEM(16 * nbk, mgb_segment_counts(bkeys.data(), bslots.data(), nbk, flag.data(), seg.data()));
        seg.resize(16 * nbk);
        scan_rows(seg, segscan, 1, 16 * nbk);
        segscan.resize(std::max(16 * nbk, 1));
        ONE_PER_ITEM(std::max(16 * nbk, 1), mgb_ranked(bkeys.data(), bslots.data(), nbk, flag.data(), seg.data(),
                                                       segscan.data(), coords.data(), f.bx, f.by, f.bz, room,
                                                       f.keys.data(), f.fluid.data(), scand.data(), map1.data(),
                                                       &cnt[4]));
    } else {
        ONE_PER_ITEM(std::max(cand, room), mgb_parents(flag.data(), scan.data(), cand, coords.data(), f.bx, f.by, f.bz,
                                                       room, keys.data(), fluid.data(), candv.data(), &cnt[4]));
        std::vector<ll> order(room);
        std::iota(order.begin(), order.end(), 0LL);
        std::stable_sort(order.begin(), order.end(), [&](ll a, ll b) { return keys[a] < keys[b]; });
        ONE_PER_ITEM(nb1, mgb_sorted(order.data(), keys.data(), fluid.data(), candv.data(), &cnt[4], nb1,
                                     f.keys.data(), f.fluid.data(), scand.data(), map1.data()));
    }
    std::vector<ll> ukeys;
    Built& B1 = built[1];
    level_tables(f, &cnt[4], nb1, B1, ukeys, uorder);
    B1.stride_f = m0 + 1;
    B1.up.assign(8 * (size_t)(m0 + 1), -7);
    ONE_PER_ITEM(m0 + 1, mgb_prolong(cells0.data(), &cnt[0], m0 + 1, nbr27.data(), map1.data(), f.position.data(),
                                     &cnt[4], B1.up.data()));
    B1.down.assign(64 * (size_t)(nb1 + 1), -7);
    ONE_PER_ITEM(nb1 + 1, mgb_restrict(scand.data(), uorder.data(), &cnt[4], nb1 + 1, nbr27.data(), position0.data(),
                                       &cnt[0], B1.down.data()));
    ONE_PER_ITEM(nb1, mgs_key_span(ukeys.data(), &cnt[4], &span[6]));
    int stride = nb1 + 1;
    // levels 2 … by the sorted-key kernels (sparse_pressure_setup.build's loop)
    build_levels(2, count, bounds, margin, tail, f, ukeys, stride, cnt, span, built);
    print_kept(min_side, count, cnt, span, built);
    return 0;
}
"""


@pytest.fixture(scope="module")
def bricks(tmp_path_factory):
    from voxfx.kernels.flip.sparse_pressure_setup import _B

    return _build(tmp_path_factory, with_defines(BRICKS, _B))


def brick_tables(g):
    """(slot_coords (capacity, 3), nbr27 (capacity, 27)) of a NumPy grid, as the device's
    sparse_mac.brick_tables: each slot's brick coordinates and the slots of the 27 bricks
    around it (offset index (dz + 1)·9 + (dy + 1)·3 + dx + 1; −1 inactive or free)."""
    cap, topo = g.capacity, g.topology
    coords = np.zeros((cap, 3), np.int64)
    coords[topo.slots] = topo.coords()
    nbr27 = np.full((cap, 27), -1, np.int32)
    for o in range(27):
        off = np.array([o % 3 - 1, (o // 3) % 3 - 1, o // 9 - 1], np.int64)
        nbr27[topo.slots, o] = g.slots_of_bricks(topo.coords() + off)
    return coords.astype(np.int32), nbr27


def level0_lines(g, kind, level, lo=None):
    """LEVEL0_INPUT's lines: "size capacity", the cells' kind, the active flags, the brick
    tables, level 0's m_red m, cells and positions, the set's size and lattice box min (*lo*:
    by default the set's own; sparse_multigrid._level0_cells' set)."""
    in_set = np.flatnonzero(g.active() & (kind != 0))
    if lo is None:
        lo = [int(a[in_set].min()) for a in g.lattice()]
    coords, nbr27 = brick_tables(g)
    return [f"{g.size} {g.capacity}", *map(str, kind.astype(int)), *map(str, g.brick_slot.astype(int)),
            *map(str, coords.ravel()), *map(str, nbr27.ravel()), f"{level.m_red} {level.m}",
            *map(str, level.cells), *map(str, level.position), str(len(in_set)), *map(str, lo)]


def _moved_tank():
    """``_tank``'s liquid on a pool whose slots are out of key order: the grid held liquid
    elsewhere first (level 1's ranks then differ from the candidates' slot order)."""
    rng = np.random.default_rng(8)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (20, 12, 18))
    up = np.asarray(spec.upper)
    pos = np.concatenate([(rng.uniform(0.0, 0.4, (6000, 3)) * up), (rng.uniform(0.7, 0.95, (3000, 3)) * up)])
    pos = pos.astype(np.float32)
    g = SparseFlipGrid(spec, np, closed=True)
    g.update((up - pos[:3000]).astype(np.float32), 3)
    g.update(pos, 3, obstacle=np.array([(i, j, 2) for i in range(3, 7) for j in range(2, 5)]))
    sparse_transfer.classify(g, pos)
    assert not np.all(np.diff(g.topology.slots) > 0)  # slots out of key order
    return g


def scene(name):
    g = _moved_tank() if name == "moved" else _tank()
    active = g.active()
    if name == "sealed":  # fluid up to the lid: one pinned cell, deep hierarchy
        g["cell"] = np.where(active & (g["cell"] != SOLID), np.uint8(FLUID), g["cell"]).astype(np.uint8)
    elif name == "sheet":  # one layer of fluid in air, no walls: level 1 is empty
        k = g.lattice()[2]
        g["cell"] = np.where(active & (k == 0), np.uint8(FLUID), np.uint8(0)).astype(np.uint8)
    elif name == "puddle":  # a 3-cell-deep puddle on the floor: too thin to coarsen, one level
        i, j, k = g.lattice()
        inside = active & (i >= 4) & (i < 7) & (j >= 3) & (j < 6) & (k >= 1) & (k < 4)
        g["cell"] = np.where(inside, np.uint8(FLUID), np.where(g["cell"] == SOLID, g["cell"], 0)).astype(np.uint8)
    return g


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("ranked", [True, False])
@pytest.mark.parametrize("tail", [0, 2, 3])
@pytest.mark.parametrize("name", ["tank", "sealed", "sheet", "puddle", "moved"])
def test_brick_setup_builds_the_numpy_multigrid_tables(bricks, name, tail, ranked):
    """Level 1 by mgb_coarsen … mgb_restrict (one brick read a query; its set in key order by
    ranks from brick-row segments, or sorted), levels 2 … by the sorted-key kernels (launch
    by launch, or from level *tail* in mgs_tail_levels): every kept level's m, m_red, nbr,
    diag, up and down are VCycle's, and as many levels."""
    g = scene(name)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    M = VCycle(g, kind, level)
    if name == "puddle":
        assert len(M.levels) == 1 and level.m > 0
    elif name == "sheet":
        assert len(M.levels) == 2 and M.levels[1].m == 0
    else:
        assert len(M.levels) >= 3
    lines = [f"{sparse_multigrid.MG_MIN_SIDE} {sparse_multigrid.MAX_LEVELS} {sparse_multigrid._MARGIN} {tail}",
             *level0_lines(g, kind, level), f"{int(ranked)} {g.topology.count}",
             *map(str, g.topology.keys), *map(str, g.topology.slots)]
    assert_levels(bricks.raw(lines).split(), M)


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("tail", [0, 2])
@pytest.mark.parametrize("name", ["tank", "sealed", "moved"])
def test_brick_setup_on_a_guessed_key_base_builds_the_same_tables(bricks, name, tail):
    """The tables built before the set's box is read (sparse_pressure_ahead) use a
    key base guessed from an earlier box, ~2^20 cells below the liquid: every kept level's
    integers are still the reference's (keys are compared and stepped, never decoded into a
    parity or parent relative to the base). The guess from a box 37 cells off, as after the
    liquid moved."""
    from voxfx.kernels.flip.sparse_pressure_ahead import guessed_base

    g = scene(name)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    M = VCycle(g, kind, level)
    lattice = g.lattice()
    in_set = np.flatnonzero(g.active() & (kind != 0))
    lo = [int(a[in_set].min()) for a in lattice]
    hi = [int(a[in_set].max()) for a in lattice]
    guess = guessed_base([v + 37 for v in lo], [v + 37 for v in hi])
    assert all(lo_ - g_ > 2 ** 19 for lo_, g_ in zip(lo, guess))  # far below the exact base
    lines = [f"{sparse_multigrid.MG_MIN_SIDE} {sparse_multigrid.MAX_LEVELS} {sparse_multigrid._MARGIN} {tail}",
             *level0_lines(g, kind, level, [b + sparse_multigrid._MARGIN for b in guess]),
             f"1 {g.topology.count}", *map(str, g.topology.keys), *map(str, g.topology.slots)]
    assert_levels(bricks.raw(lines).split(), M)


def test_brick_tables_of_the_harness_are_the_grids_neighbours():
    """The NumPy stand-in for the device's brick table agrees with the grid's own cell
    neighbour index (nbr): the harness feeds the kernels what the device builds."""
    g = _tank()
    coords, nbr27 = brick_tables(g)
    slot = np.repeat(np.arange(g.capacity), 512)
    local = np.tile(np.arange(512), g.capacity)
    lx, ly, lz = local & 7, (local >> 3) & 7, local >> 6
    for d, (dx, dy, dz) in enumerate(((-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1))):
        x, y, z = lx + dx, ly + dy, lz + dz
        o = ((z >> 3) + 1) * 9 + ((y >> 3) + 1) * 3 + (x >> 3) + 1
        s = nbr27[slot, o]
        want = np.where(s < 0, -1, s * 512 + ((z & 7) * 8 + (y & 7)) * 8 + (x & 7))
        used = g.brick_slot[slot]
        assert np.array_equal(want[used], g.nbr[d][used])
    i, j, k = g.lattice()
    used = g.active()
    assert np.array_equal((coords[slot, 0] * 8 + lx)[used], i[used])
    assert np.array_equal((coords[slot, 2] * 8 + lz)[used], k[used])


def _kernel_params(source):
    """{kernel name: parameter count} of the extern "C" kernels of a .cu file; a parameter list that is one
    macro of the file (flip_sparse_pressure_scan.cu's SCAN_PAIR_PARAMS) counted as its definition."""
    import re

    macros = {m.group(1): m.group(2).replace("\\\n", " ")
              for m in re.finditer(r"^#define (\w+)[ \t]+((?:.*\\\n)*.*)$", source, re.M)}
    out = {}
    for m in re.finditer(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(([^)]*)\)', source):
        params = macros.get(m.group(2).strip(), m.group(2))
        out[m.group(1)] = len([p for p in params.split(",") if p.strip()])
    return out


def test_every_setup_launch_names_a_kernel_of_its_module_with_its_arguments():
    """Each launch in sparse_pressure_setup.py, sparse_pressure_scan.py, sparse_pressure_workspace.py,
    sparse_pressure_workspace_views.py and sparse_pressure_workspace_levels.py (``_K`` or ``K``:
    flip_sparse_pressure_setup.cu, ``_U``: flip_sparse_pressure_unknowns.cu, ``_B`` or ``B``:
    flip_sparse_pressure_bricks.cu, directly or through ``_widening``) names a kernel of
    that module's source (``_S``: flip_sparse_pressure_scan.cu) and passes as many arguments as the
    kernel takes (``*_ints(base)``: 3):
    a wrong module or a missing argument fails here, not on the device."""
    import ast
    from pathlib import Path

    from voxfx.kernels import backend
    from voxfx.kernels.flip import sparse_pressure_setup as setup
    from voxfx.kernels.flip import (sparse_pressure_scan, sparse_pressure_workspace, sparse_pressure_workspace_levels,
                                    sparse_pressure_workspace_views)

    params = {name: _kernel_params((backend.CUDA_DIR / k.filename).read_text())
              for name, k in (("K", setup._K), ("U", setup._U), ("B", setup._B), ("S", setup._S))}

    def module(node):  # _K, setup._K or K (the workspace's alias) → "K"
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        return name.lstrip("_") if name.lstrip("_") in params else None

    seen = {}
    workspace_files = (sparse_pressure_workspace.__file__, sparse_pressure_workspace_views.__file__,
                       sparse_pressure_workspace_levels.__file__)
    for source in (setup.__file__, sparse_pressure_scan.__file__, *workspace_files):
        seen[source] = set()
        for call in ast.walk(ast.parse(Path(source).read_text())):
            if not isinstance(call, ast.Call):
                continue
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr in ("launch", "launch_grid") and module(f.value):
                if not isinstance(call.args[0], ast.Constant):  # a computed name (_tail_groups' twins): below
                    continue
                kernels, name = module(f.value), call.args[0].value
                args = call.args[2] if f.attr == "launch" else call.args[3]
            elif isinstance(f, (ast.Name, ast.Attribute)) and getattr(f, "id", getattr(f, "attr", "")) == "_widening":
                kernels, name, args = module(call.args[0]), call.args[1].value, call.args[3]
            else:
                continue
            if not isinstance(name, str) or name not in params[kernels]:
                raise AssertionError(f"{source} launches {name!r}, not a kernel of {kernels}'s source")
            count = sum(3 if isinstance(a, ast.Starred) else 1 for a in args.elts)
            assert count == params[kernels][name], (source, name, count, params[kernels][name])
            seen[source].add(name)
    assert {"mgb_coarsen", "mgb_parents", "mgb_sorted", "mgb_segment_counts", "mgb_ranked", "mgb_prolong",
            "mgb_restrict", "mgb_unknown_span", "unk_classify", "unk_classify_block", "mgs_level_cells",
            "mgs_tail_levels"} <= seen[setup.__file__]
    scans = {"scan_tile_sums", "scan_tiles", "scan_lookback", "scan_lookback_pair", "scan_lookback_wide",
             "scan_lookback_pair_wide"}
    assert scans <= seen[sparse_pressure_scan.__file__]
    twins = {"mgs_tail_levels_fast": 5, "mgs_tail_levels_fast_scatter": 5}  # _tail_groups' computed names
    assert {name: params["K"].get(name) for name in twins} == twins
    assert {"mgb_ranked", "mgs_parents", "mgs_coarsen", "mgs_prolong_table", "mgs_restrict_table", "unk_order",
            "unk_tables_strided", "mgs_tail_levels", "mgs_level_tables_down", "mgs_prolong_restrict",
            "mgs_tail_levels_scatter", "mgb_coarsen_span", "mgb_restrict_span",
            "mgs_level_end", "mgs_level_cells_coarsen"} <= set().union(*(seen[f] for f in workspace_files))
