"""The V-cycle's launches as sparse_pressure_vcycle.VCycleLaunches makes them — the Python
sequence itself, for each of its switches (split, fused, the one-block tail from each level,
the cluster tail, mg_smooth_first2) — run on the host by the nvcc harness of
test_cuda_sparse_pressure_host.py (cuda/flip_sparse_pressure_vcycle.cu and _tail.cu as host functions,
one "thread" a block), and z = V-cycle(r) compared bit for bit with the NumPy reference
(sparse_multigrid.VCycle), r·z with its float64 dot; the launch counts of one V-cycle say
what each switch saves. The solver's launch hooks record the launches (name, its argument
buffers by name); the harness reads them back and calls the kernels in that order."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _hex, _tank, dense_mode, red_black
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure
from voxfx.kernels.flip.pressure import MG_SWEEPS
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.flip.sparse_pressure_gpu import _MGT
from voxfx.kernels.flip.sparse_pressure_vcycle import VCycleLaunches

# After READERS and the V-cycle's kernels (flip_sparse_pressure_vcycle*.cu): the levels (L, sizes, strides, the V-cycle
# state) and read_levels(fill), which reads the hierarchy hierarchy() writes up to r: L, per
# level "m_red m stride", nbr, diag; per level but the last up, down. x, b, r are stride long,
# *fill* but the sentinels (0); ptrs: mg_tail_vcycle's table, as
# sparse_pressure_vcycle._tail_table lays it out. Shared with test_cuda_sparse_tail_threads_host.py.
LEVELS = r"""
struct Level { int m_red, m, stride; std::vector<int> nbr, up, down; std::vector<float> diag, b, x, r; };
static std::vector<Level> L;
static int state[4] = {0, 0, 0, 0};
static std::vector<int> sizes, strides;
static std::vector<unsigned long long> ptrs;

static bool read_levels(float fill) {
    int nl;
    if (scanf("%d", &nl) != 1) return false;
    L.resize(nl);
    for (auto& A : L) {
        scanf("%d %d %d", &A.m_red, &A.m, &A.stride);
        read_ints(A.nbr, 6 * (size_t)A.stride);
        read_floats(A.diag, A.stride);
        A.x.assign(A.stride, fill);
        A.r.assign(A.stride, fill);
        A.b.assign(A.stride, fill);
        for (int c = A.m; c < A.stride; ++c) A.x[c] = A.r[c] = A.b[c] = 0.0f;
        sizes.push_back(A.m_red);
        sizes.push_back(A.m);
        strides.push_back(A.stride);
    }
    for (int l = 0; l + 1 < nl; ++l) {
        read_ints(L[l].up, 8 * (size_t)L[l].stride);
        read_ints(L[l].down, 64 * (size_t)L[l + 1].stride);
    }
    for (auto& A : L)
        for (void* p : {(void*)A.x.data(), (void*)A.b.data(), (void*)A.r.data(), (void*)A.nbr.data(),
                        (void*)A.diag.data(), (void*)A.up.data(), (void*)A.down.data()})
            ptrs.push_back((unsigned long long)p);
    return true;
}
"""

# Input: L, per level "m_red m stride", nbr (6 × stride), diag (stride, hex), per level but
# the last up (8 × stride) and down (64 × stride of the next); r (level 0's stride, hex);
# dense (1: the coarsest level's G "dense" and mg_dense_inverse's scratch "work", NaN, G in
# the tail table's slot 6 of the coarsest level, as sparse_pressure_vcycle._tail_table puts
# it); the launch count, then per launch "name kind nargs" and its arguments: "B buffer level
# offset" (a level's x b r nbr diag up down, or partials sizes state ptrs strides) or
# "I value". kind: 0 one thread per item over the first count ("n"), 1 the reduction grid,
# 2 one block (the one-block and cluster kernels: their passes in order, as one thread).
# Output: z (m0, hex), Σ of the r·z partials; with dense the coarsest level's G (m × m, row by row).
HARNESS = PREAMBLE + r"""
static std::vector<float> host_tail_shared(1 << 20);  // the _shared tails' "dynamic shared memory"
#define TAIL_SHARED_ARRAY(name) float* name = host_tail_shared.data()
#include "flip_sparse_pressure_vcycle.cu"
#include "flip_sparse_pressure_vcycle_tail.cu"
#include <map>
#include <string>
""" + LEVELS + r"""
static std::vector<double> partials, dense_work;
static std::vector<float> dense_g;
struct Arg { void* p; int i; };

static void* buffer(const std::string& name, int l, int offset) {
    if (name == "partials") return partials.data() + offset;
    if (name == "sizes") return sizes.data() + offset;
    if (name == "state") return state + offset;
    if (name == "ptrs") return ptrs.data() + offset;
    if (name == "strides") return strides.data() + offset;
    if (name == "dense") return dense_g.data() + offset;
    if (name == "work") return dense_work.data() + offset;
    Level& A = L[l];
    if (name == "x") return A.x.data() + offset;
    if (name == "b") return A.b.data() + offset;
    if (name == "r") return A.r.data() + offset;
    if (name == "nbr") return A.nbr.data() + offset;
    if (name == "diag") return A.diag.data() + offset;
    if (name == "up") return A.up.data() + offset;
    if (name == "down") return A.down.data() + offset;
    fprintf(stderr, "unknown buffer %s\n", name.c_str());
    exit(3);
}

#define F(k) ((float*)a[k].p)
#define CF(k) ((const float*)a[k].p)
#define I(k) ((const int*)a[k].p)
#define N(k) (a[k].i)
static void call(const std::string& k, const std::vector<Arg>& a) {
    if (k == "mg_smooth") mg_smooth(F(0), CF(1), I(2), CF(3), N(4), I(5), N(6), N(7), N(8), I(9));
    else if (k == "mg_smooth_first") mg_smooth_first(F(0), CF(1), I(2), CF(3), N(4), I(5), N(6), I(7));
    else if (k == "mg_smooth_first2") mg_smooth_first2(F(0), CF(1), I(2), CF(3), N(4), I(5), N(6), I(7));
    else if (k == "mg_smooth_red_dot") mg_smooth_red_dot(F(0), CF(1), I(2), CF(3), N(4), I(5), (double*)a[6].p, I(7));
    else if (k == "mg_smooth_black_residual")
        mg_smooth_black_residual(F(0), CF(1), I(2), CF(3), N(4), I(5), N(6), F(7), I(8));
    else if (k == "mg_residual") mg_residual(CF(0), CF(1), I(2), CF(3), N(4), I(5), N(6), N(7), F(8), I(9));
    else if (k == "mg_restrict") mg_restrict(CF(0), I(1), N(2), I(3), N(4), F(5), I(6));
    else if (k == "mg_prolong_add") mg_prolong_add(CF(0), I(1), N(2), I(3), N(4), N(5), F(6), I(7));
    else if (k == "mg_coarse_solve") mg_coarse_solve(F(0), CF(1), I(2), CF(3), N(4), I(5), N(6), I(7));
    else if (k == "mg_restrict_coarse_solve")
        mg_restrict_coarse_solve(CF(0), I(1), F(2), F(3), I(4), CF(5), N(6), I(7), N(8), I(9));
    else if (k == "mg_tail_vcycle")
        mg_tail_vcycle((const unsigned long long*)a[0].p, I(1), N(2), N(3), I(4), I(5));
    else if (k == "mg_tail_cluster")
        mg_tail_cluster((const unsigned long long*)a[0].p, I(1), N(2), N(3), N(4), I(5), I(6));
    else if (k == "mg_tail_vcycle_shared")
        mg_tail_vcycle_shared((const unsigned long long*)a[0].p, I(1), N(2), N(3), I(4), I(5));
    else if (k == "mg_tail_cluster_shared")
        mg_tail_cluster_shared((const unsigned long long*)a[0].p, I(1), N(2), N(3), N(4), I(5), I(6));
    else if (k == "mg_dense_inverse") mg_dense_inverse(I(0), CF(1), N(2), I(3), N(4), (double*)a[5].p, F(6), I(7));
    else if (k == "mg_coarse_dense") mg_coarse_dense(F(0), CF(1), CF(2), N(3), I(4), N(5), I(6));
    else if (k == "mg_restrict_coarse_dense")
        mg_restrict_coarse_dense(CF(0), I(1), F(2), F(3), CF(4), N(5), I(6), N(7), I(8));

    else { fprintf(stderr, "unknown kernel %s\n", k.c_str()); exit(4); }
}


int main() {
    if (!read_levels(__builtin_nanf(""))) return 1;  // x, b, r written before read, but the sentinels
    read_floats(L[0].b, L[0].stride);
    partials.assign(2048, 0.0);  // two reductions of up to 1024 blocks
    int dense_on, launches;
    scanf("%d", &dense_on);
    const int last = (int)L.size() - 1, S = L[last].stride;
    if (dense_on) {
        dense_g.assign((size_t)S * S, __builtin_nanf(""));
        dense_work.assign((size_t)S * S + 2 * S, __builtin_nan(""));
        ptrs[7 * last + 6] = (unsigned long long)dense_g.data();
    }
    scanf("%d", &launches);
    int blocks = 0;
    for (int i = 0; i < launches; ++i) {
        char name[64];
        int kind, nargs;
        scanf("%63s %d %d", name, &kind, &nargs);
        std::vector<Arg> a(nargs);
        for (auto& x : a) {
            char t[16];
            scanf("%15s", t);
            if (t[0] == 'I') { x.p = nullptr; scanf("%d", &x.i); }
            else { char buf[32]; int l, off; scanf("%31s %d %d", buf, &l, &off); x.p = buffer(buf, l, off); x.i = 0; }
        }
        int n = 1;
        if (kind == 0) scanf("%d", &n);
        if (kind == 1) {
            scanf("%d", &n);
            blocks = n;
        }
        h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)n;
        for (auto& v : host_tail_shared) v = __builtin_nanf("");  // nothing carried over in shared memory
        for (int blk = 0; blk < n; ++blk) { h_block.x = blk; call(name, a); }
    }
    for (int c = 0; c < L[0].m; ++c) printf("%a\n", L[0].x[c]);
    double rz = 0.0;
    for (int k = 0; k < blocks; ++k) rz += partials[blocks + k];
    printf("%a\n", rz);
    if (dense_on)
        for (int i = 0; i < L[last].m; ++i)
            for (int j = 0; j < L[last].m; ++j) printf("%a\n", dense_g[(size_t)j * S + i]);
    return 0;
}
"""


class Buffer:
    """A device buffer by name (and level, and offset: ``partials[blocks:]``)."""

    def __init__(self, name, level=0, offset=0):
        self.name, self.level, self.offset = name, level, offset

    def __getitem__(self, part):
        return Buffer(self.name, self.level, self.offset + part.start)


class _LevelBuffers:
    def __init__(self, level, stride, last):
        self.stride = stride
        for name in ("x", "b", "r", "nbr", "diag"):
            setattr(self, name, Buffer(name, level))
        self.up, self.down = (Buffer("up", level), Buffer("down", level)) if level < last else (None, None)


class Recorded(VCycleLaunches):
    """VCycleLaunches with launch hooks that record, for levels of *strides* (the harness
    gives each level's buffers that stride)."""

    def __init__(self, strides, tail=0, cluster=0, first2=0, capability=90, red_blocks=7, shared=False,
                 colour_grid=1, dense=False):
        last = len(strides) - 1
        if dense:  # MG_DENSE: the harness's G and scratch (mg_dense_inverse's work in global memory)
            self.dense, self.dense_work = Buffer("dense"), Buffer("work")
        self.levels = [_LevelBuffers(level, s, last) for level, s in enumerate(strides)]
        self.sizes, self.state, self.partials = Buffer("sizes"), Buffer("state"), Buffer("partials")
        self.red_blocks = red_blocks
        self.r, self.z = self.levels[0].b, self.levels[0].x
        first = self._tail_first(tail) if tail else None
        self.tail = None if first is None else (first, Buffer("ptrs"), Buffer("strides"))
        self.cluster_from = self._cluster_from(cluster, capability)
        self.first2 = self._first2_levels(first2)
        self.tail_shared = self._tail_shared_bytes(shared, 1 << 22)
        self.colour_grid = colour_grid
        self.launches = []

    def _launch(self, name, n, args):
        self.launches.append((name, 0, int(n), args))

    def _reduce(self, name, args):
        self.launches.append((name, 1, self.red_blocks, args))

    def _one(self, name, grid, block, args, shared_mem=0):
        assert shared_mem in (self.tail_shared, self.dense_shared) and shared_mem <= 4 << 20  # the harness's array
        self.launches.append((name, 2, 1, args))

    def lines(self):
        out = [str(int(self.dense is not None)), str(len(self.launches))]
        for name, kind, n, args in self.launches:
            words = [name, str(kind), str(len(args))]
            for a in args:
                words += (["B", a.name, str(a.level), str(a.offset)] if isinstance(a, Buffer) else ["I", str(int(a))])
            if kind < 2:
                words.append(str(n))
            out.append(" ".join(words))
        return out


@pytest.fixture(scope="module")
def plan_harness(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(HARNESS, _MGT), name="plan")


def _hierarchy(mode=0):
    """The four-level tank of test_cuda_sparse_pressure_host (MG_DENSE *mode*: "2" three
    levels), its r and NumPy z, and the harness's input up to the launches (strides a little
    over m + 1, as the solver's)."""
    g = _tank((40, 24, 36), 8)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    with dense_mode(mode), red_black():  # the harness launches the red-black sweeps
        M = VCycle(g, kind, level)
    assert len(M.levels) == (3 if mode == 2 else 4) and (M.dense is not None) == bool(mode)
    strides = [L.m + 1 + 3 for L in M.levels]
    r = np.append(np.random.default_rng(5).normal(0, 1, level.m), 0).astype(np.float32)
    lines = [str(len(M.levels))]
    for L, s in zip(M.levels, strides):
        nbr = np.full((6, s), L.m, np.int64)
        nbr[:, :L.m + 1] = L.nbr
        diag = np.ones(s, np.float32)
        diag[:L.m + 1] = L.diag
        lines += [f"{L.m_red} {L.m} {s}", *map(str, nbr.ravel()), *_hex(diag)]
    for lv, (up, down) in enumerate(zip(M.up, M.down)):
        up_s = np.full((8, strides[lv]), M.levels[lv + 1].m, np.int64)
        up_s[:, :up.shape[1]] = up
        down_s = np.full((64, strides[lv + 1]), M.levels[lv].m, np.int64)
        down_s[:, :down.shape[1]] = down
        lines += [*map(str, up_s.ravel()), *map(str, down_s.ravel())]
    lines += _hex(np.append(r, np.zeros(strides[0] - len(r), np.float32)))
    return strides, r, M(r), lines, M


@pytest.fixture(scope="module")
def hierarchy():
    return _hierarchy()[:4]


# VCYCLE and the levels whose strides bound TAIL, CLUSTER and FIRST2 (None: 0, off), and
# where given TAIL_SHARED and COLOUR_GRID
CASES = {
    "split": ("split", None, None, None),
    "fused": ("fused", None, None, None),
    "fused-tail1": ("fused", 1, None, None),
    "fused-tail2": ("fused", 2, None, None),
    "cluster1-tail2": ("fused", 2, 1, None),
    "first2-all": ("fused", None, None, 0),
    "first2-1-tail2": ("fused", 2, None, 1),
    "cluster1-tail2-first2": ("fused", 2, 1, 0),
    "fused-tail1-shared": ("fused", 1, None, None, True),
    "fused-tail2-shared": ("fused", 2, None, None, True),
    "cluster1-tail2-shared": ("fused", 2, 1, None, True),
    "fused-colour2": ("fused", None, None, None, False, 2),
    "cluster1-tail2-shared-colour4": ("fused", 2, 1, None, True, 4),
}


def _bound(strides, level):
    return 0 if level is None else int(strides[level])


@pytest.mark.parametrize("case", CASES)
def test_vcycle_launch_plan_gives_the_numpy_z_bit_for_bit(plan_harness, hierarchy, case):
    strides, r, want_z, lines = hierarchy
    vcycle, tail, cluster, first2, *more = CASES[case]
    shared, colour = (more + [False, 1][len(more):])
    plan = Recorded(strides, _bound(strides, tail), _bound(strides, cluster), _bound(strides, first2),
                    shared=shared, colour_grid=colour)
    assert (plan.tail_shared > 0) == shared
    if vcycle == "split":
        plan._vcycle()
    else:
        plan._vcycle_fused()
    if cluster is not None:
        assert plan.cluster_from == 1 and plan.tail[0] == 2
    assert any("_shared" in name for name, *_ in plan.launches) == shared
    narrow = [n for _, kind, n, _ in plan.launches if kind == 0 and strides[1] < n < strides[0]]
    assert bool(narrow) == (colour > 1)  # level 0's one-colour launches over stride / colour threads
    out = plan_harness.raw(lines + plan.lines(), check=True).split()
    m = len(r) - 1
    z = np.array([float.fromhex(x) for x in out[:m]], np.float32)
    assert np.abs(z).max() > 0 and np.array_equal(z, want_z[:m])
    if vcycle == "fused":
        assert float.fromhex(out[m]) == pytest.approx(float(np.dot(r.astype(np.float64), want_z)), rel=1e-12)


def test_vcycle_switches_launch_less(hierarchy):
    """One V-cycle's launches on the four levels: 4·MG_SWEEPS + 2 a level launched one by one
    and one for the rest; the cluster takes its levels' launches, first2 saves one a level."""
    strides = hierarchy[0]

    def count(tail=0, cluster=0, first2=0, capability=90):
        plan = Recorded(strides, tail, cluster, first2, capability)
        plan._vcycle_fused()
        return len(plan.launches)

    per_level = 4 * MG_SWEEPS + 2  # down: 2·sweeps − 1 sweeps, residual, restriction; up: prolongation, 2·sweeps
    tail2 = count(strides[2])
    assert count(strides[1]) == per_level + 1
    assert tail2 == 2 * per_level + 1
    assert count(strides[2], strides[1]) == per_level + 1  # level 1 in the cluster
    assert count(strides[2], strides[1], capability=89) == tail2  # no clusters before sm_90
    assert count(strides[2], first2=strides[0]) == tail2 - 2  # levels 0 and 1
    assert count(strides[2], first2=strides[1]) == tail2 - 1  # level 1


# MG_DENSE (the coarsest level by its dense inverse) with the launch switches: the mode, VCYCLE,
# the levels whose strides bound TAIL and CLUSTER, TAIL_SHARED
DENSE_CASES = {
    "dense-split": (1, "split", None, None, False),
    "dense-fused": (1, "fused", None, None, False),
    "dense-tail1-shared": (1, "fused", 1, None, True),
    "dense-cluster1-tail2": (1, "fused", 2, 1, False),
    "dense-cluster1-tail2-shared": (1, "fused", 2, 1, True),
    "dense2-fused": (2, "fused", None, None, False),
    "dense2-tail1": (2, "fused", 1, None, False),
    "dense2-tail1-shared": (2, "fused", 1, None, True),
}


@pytest.fixture(scope="module")
def dense_hierarchies():
    return {mode: _hierarchy(mode) for mode in (1, 2)}


@pytest.mark.parametrize("case", DENSE_CASES)
def test_dense_coarse_plan_gives_the_numpy_z_and_inverse_bit_for_bit(plan_harness, dense_hierarchies, case):
    """mg_dense_inverse then the V-cycle with the dense coarsest solve, as the solver's start and
    loop launch them: G and z the NumPy reference's (sparse_multigrid.dense_inverse, dense_solve)."""
    mode, vcycle, tail, cluster, shared = DENSE_CASES[case]
    strides, r, want_z, lines, M = dense_hierarchies[mode]
    plan = Recorded(strides, _bound(strides, tail), _bound(strides, cluster), shared=shared, dense=True)
    plan._dense_inverse()
    if vcycle == "split":
        plan._vcycle()
    else:
        plan._vcycle_fused()
    names = [name for name, *_ in plan.launches]
    assert names[0] == "mg_dense_inverse" and "mg_coarse_solve" not in names and "mg_restrict_coarse_solve" not in names
    assert ("mg_coarse_dense" in names) == (vcycle == "split")
    assert ("mg_restrict_coarse_dense" in names) == (vcycle == "fused" and tail is None)
    out = plan_harness.raw(lines + plan.lines(), check=True).split()
    m, mc = len(r) - 1, M.levels[-1].m
    z = np.array([float.fromhex(x) for x in out[:m]], np.float32)
    g = np.array([float.fromhex(x) for x in out[m + 1:m + 1 + mc * mc]], np.float32).reshape(mc, mc)
    assert np.array_equal(g.view(np.int32), M.dense.view(np.int32))
    assert np.abs(z).max() > 0 and np.array_equal(z, want_z[:m])
    # mode 2's exact solve of level 2 is another preconditioner; mode 1's of the 2-unknown coarsest
    # level gives what MG_COARSE_SWEEPS sweeps converge to here, to the bit
    assert np.array_equal(want_z, _hierarchy(0)[2]) == (mode == 1)


class _Coarse:
    """A coarsest level by hand (sparse_multigrid.CompactLevel's tables): a sealed 2×2 square
    (0 1 / 2 3, every other neighbour SOLID: singular), a chain 4–5–6 with AIR beside 4, and
    unknown 7 alone with three AIR neighbours."""

    m, m_red = 8, 4
    links = ((0, 1, 0), (2, 3, 0), (0, 2, 2), (1, 3, 2), (4, 5, 4), (5, 6, 4))  # (a, b, direction a → b)

    def __init__(self):
        m = self.m
        self.nbr = np.full((6, m + 1), m, np.int32)
        for a, b, d in self.links:
            self.nbr[d + 1, a], self.nbr[d, b] = b, a  # + and − of axis d // 2
        self.diag = np.array([2, 2, 2, 2, 2, 2, 1, 3, 1], np.float32)


def test_dense_inverse_pins_a_sealed_component_and_matches_numpy(plan_harness):
    """mg_dense_inverse on _Coarse: the sealed square's last unknown pinned (its row and column 0),
    the rest the exact inverse; the device's G the NumPy reference's bit for bit."""
    C = _Coarse()
    g = sparse_multigrid.dense_inverse(C)
    a = sparse_multigrid.dense_operator(C)
    assert np.linalg.matrix_rank(a) == C.m - 1
    assert not g[3].any() and not g[:, 3].any()
    keep = [0, 1, 2, 4, 5, 6, 7]
    assert np.allclose(g[np.ix_(keep, keep)] @ a[np.ix_(keep, keep)], np.eye(len(keep)), atol=1e-6)
    assert np.array_equal(g, g.T)
    # the harness: a two-level hierarchy whose coarsest level is _Coarse, mg_dense_inverse alone
    s0 = 3
    lines = ["2", f"0 1 {s0}", *map(str, np.full(6 * s0, 1)), *_hex(np.ones(s0)),
             f"{C.m_red} {C.m} {C.m + 1}", *map(str, C.nbr.ravel()), *_hex(C.diag),
             *map(str, np.full(8 * s0, C.m)), *map(str, np.full(64 * (C.m + 1), 1)), *_hex(np.zeros(s0))]
    plan = Recorded([s0, C.m + 1], dense=True)
    plan._dense_inverse()
    out = plan_harness.raw(lines + plan.lines(), check=True).split()
    got = np.array([float.fromhex(x) for x in out[2:2 + C.m * C.m]], np.float32).reshape(C.m, C.m)
    assert np.array_equal(got.view(np.int32), g.view(np.int32))


def test_dense_coarse_launches_one_block_where_the_sweeps_were(hierarchy):
    """The dense coarsest solve takes the sweeps' launch (and the start one mg_dense_inverse):
    as many launches a V-cycle."""
    strides = hierarchy[0]
    counts = []
    for dense in (False, True):
        plan = Recorded(strides, strides[2], dense=dense)
        plan._vcycle_fused()
        counts.append(len(plan.launches))
    assert counts[0] == counts[1]
