"""The device set-up of the sparse pressure solve's multigrid (cuda/flip_sparse_pressure.cu's
mg_coarsen … mg_restrict_table as sparse_pressure_gpu.TableKernels launches them, and
cuda/flip_sparse_pressure_setup.cu's mgs_* kernels and scans and flip_sparse_pressure_unknowns.cu's
unk_* kernels as sparse_pressure_setup launches them) against the NumPy reference
(sparse_multigrid.VCycle's levels and transfer tables, sparse_pressure.Unknowns), checked on
the host without a GPU as test_cuda_sparse_pressure_host.py builds the solve's kernels (its
PREAMBLE): the same integers and values exactly."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _tank
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure
from voxfx.kernels.flip.grid import FLUID
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.flip.sparse_pressure_gpu import _K

# Input: MG_MIN_SIDE MAX_LEVELS MARGIN; level 0's set: bx by bz n, n keys, n fluid flags, n
# positions; m0 and the m0 keys of its unknowns. The driver builds the coarser levels as
# sparse_pressure_gpu.TableKernels launches the kernels. Output per coarse level: m m_red,
# nbr (6 × (m + 1)), diag (m + 1, hex), then up (8 × (m_fine + 1)) and down (64 × (m + 1)).
# The level-0 set and the unknowns' keys, as the TABLES and SETUP drivers read them (after
# their ``struct Set``): min_side max_levels margin, the set's base and its n cells (keys,
# fluid flags, positions), then the m unknowns' keys.
READ_SET = r"""
static bool read_set(int& min_side, int& max_levels, int& margin, Set& f, std::vector<ll>& ukeys) {
    int n, m;
    if (scanf("%d %d %d %d %d %d %d", &min_side, &max_levels, &margin, &f.bx, &f.by, &f.bz, &n) != 7) return false;
    f.keys.resize(n); f.fluid.resize(n); f.position.resize(n);
    for (auto& k : f.keys) scanf("%lld", &k);
    for (auto& x : f.fluid) { int t; scanf("%d", &t); x = (unsigned char)t; }
    for (auto& p : f.position) scanf("%d", &p);
    if (scanf("%d", &m) != 1) return false;
    ukeys.resize(m);
    for (auto& k : ukeys) scanf("%lld", &k);
    return true;
}
"""

TABLES = PREAMBLE + r"""
typedef long long ll;
#define ONE_PER_ITEM(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
struct Set { int bx, by, bz; std::vector<ll> keys; std::vector<unsigned char> fluid; std::vector<int> position; };
static int extent(const std::vector<ll>& keys) {
    if (keys.empty()) return 0;
    int span[6];
    for (int& v : span) v = -2147483647;
    ONE_PER_ITEM(keys.size(), mg_key_span(keys.data(), (int)keys.size(), span));
    int e = 0;
    for (int a = 0; a < 3; ++a) e = std::max(e, span[a] + span[a + 3]);
    return e + 1;
}
""" + READ_SET + r"""
int main() {
    int min_side, max_levels, margin;
    Set f;
    std::vector<ll> ukeys;
    if (!read_set(min_side, max_levels, margin, f, ukeys)) return 1;
    int ubx = f.bx, uby = f.by, ubz = f.bz, levels = 1;
    while (levels < max_levels && extent(ukeys) >= min_side) {
        Set c;
        c.bx = ((f.bx + margin) >> 1) - margin;  // sparse_multigrid._CellSet.coarser_base
        c.by = ((f.by + margin) >> 1) - margin;
        c.bz = ((f.bz + margin) >> 1) - margin;
        const int nf = (int)f.keys.size();
        std::vector<unsigned char> flag(nf);
        ONE_PER_ITEM(nf, mg_coarsen(f.keys.data(), f.fluid.data(), nf, f.bx, f.by, f.bz, flag.data()));
        std::vector<ll> picked;
        for (int i = 0; i < nf; ++i) if (flag[i]) picked.push_back(i);
        const int nc = (int)picked.size();
        c.keys.resize(nc);
        ONE_PER_ITEM(nc, mg_parent_keys(f.keys.data(), picked.data(), nc, f.bx, f.by, f.bz, c.bx, c.by, c.bz,
                                        c.keys.data()));
        for (ll p : picked) c.fluid.push_back(flag[p] == 2);
        std::vector<int> around(6 * (size_t)nc);
        std::vector<unsigned char> diag8(nc, 0), cls(nc, 0);
        ONE_PER_ITEM(nc, mg_level_cells(c.keys.data(), c.fluid.data(), nc, c.bx, c.by, c.bz, around.data(),
                                        diag8.data(), cls.data()));
        std::vector<ll> order;
        for (int i = 0; i < nc; ++i) if (cls[i] == 1) order.push_back(i);
        const int m_red = (int)order.size();
        for (int i = 0; i < nc; ++i) if (cls[i] == 2) order.push_back(i);
        const int mc = (int)order.size();
        c.position.assign(nc, mc);
        for (int u = 0; u < mc; ++u) c.position[order[u]] = u;
        std::vector<int> nbr(6 * (size_t)(mc + 1));
        std::vector<float> diag(mc + 1);
        ONE_PER_ITEM(mc + 1, mg_level_tables(order.data(), mc, around.data(), nc, c.position.data(), diag8.data(),
                                             nbr.data(), diag.data()));
        std::vector<ll> cukeys(mc);
        for (int u = 0; u < mc; ++u) cukeys[u] = c.keys[order[u]];
        const int mf = (int)ukeys.size();
        std::vector<int> up(8 * (size_t)(mf + 1)), down(64 * (size_t)(mc + 1));
        ONE_PER_ITEM(mf + 1, mg_prolong_table(ukeys.data(), mf, ubx, uby, ubz, c.keys.data(), nc, c.position.data(),
                                              c.bx, c.by, c.bz, mc, up.data()));
        ONE_PER_ITEM(mc + 1, mg_restrict_table(cukeys.data(), mc, c.bx, c.by, c.bz, f.keys.data(), nf,
                                               f.position.data(), f.bx, f.by, f.bz, mf, down.data()));
        printf("%d %d\n", mc, m_red);
        for (int v : nbr) printf("%d\n", v);
        for (float v : diag) printf("%a\n", v);
        for (int v : up) printf("%d\n", v);
        for (int v : down) printf("%d\n", v);
        f = c;
        ukeys = cukeys;
        ubx = c.bx; uby = c.by; ubz = c.bz;
        ++levels;
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(TABLES, _K, ["#include <algorithm>"]))


# The set-up drivers' shared part (this file's SETUP, test_cuda_sparse_pressure_bricks_host's
# BRICKS): the launch loop, the level tables of one level, the sorted-key levels and the kept
# levels' output.
SETUP_LEVELS = r"""
#include <algorithm>
typedef long long ll;
#define ONE_PER_ITEM(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
struct Set { int bx, by, bz; std::vector<ll> keys; std::vector<unsigned char> fluid; std::vector<int> position; };
struct Built { int stride_f, stride; std::vector<int> nbr, up, down; std::vector<float> diag; };
static void scan_rows(const std::vector<int>& a, std::vector<int>& out, int rows, int n) {
    out.assign(a.size(), 0);
    for (int r = 0; r < rows; ++r) {
        int s = 0;
        for (int i = 0; i < n; ++i) out[(size_t)r * n + i] = (s += a[(size_t)r * n + i]);
    }
}
static int coarser(int b, int margin) { return ((b + margin) >> 1) - margin; }
// sparse_pressure_setup.level_bounds: n0, then an eighth of the previous while it is not 0,
// at most max_levels; and the level sizes cnt (4 a level) and unknown spans span (6 a level)
static std::vector<int> level_bounds(int n0, int max_levels) {
    std::vector<int> bounds{n0};
    while ((int)bounds.size() < max_levels && bounds.back() > 0) bounds.push_back(bounds.back() / 8);
    return bounds;
}
static void level_sizes(int count, std::vector<int>& cnt, std::vector<int>& span) {
    cnt.assign(4 * (size_t)count, 0);
    span.assign(6 * (size_t)count, -2147483647);
}
// mgs_level_cells, scans, mgs_order, mgs_level_tables (sparse_pressure_setup._level_tables)
static void level_tables(Set& c, int* cc, int nb, Built& B, std::vector<ll>& cukeys, std::vector<int>& order) {
    std::vector<int> around(6 * (size_t)nb, -7), flags(2 * (size_t)nb), scans;
    std::vector<unsigned char> diag8(nb, 99), cls(nb);
    ONE_PER_ITEM(nb, mgs_level_cells(c.keys.data(), c.fluid.data(), cc, nb, c.bx, c.by, c.bz, around.data(),
                                     diag8.data(), cls.data(), flags.data()));
    scan_rows(flags, scans, 2, nb);
    c.position.assign(std::max(nb, 1), -7);
    order.assign(std::max(nb, 1), -7);
    ONE_PER_ITEM(std::max(nb, 1), mgs_order(cls.data(), scans.data(), cc, nb, c.position.data(), order.data()));
    B.stride = nb + 1;
    B.nbr.assign(6 * (size_t)(nb + 1), -7); B.diag.assign(nb + 1, -7.0f);
    cukeys.assign(std::max(nb, 1), -1);
    ONE_PER_ITEM(nb + 1, mgs_level_tables(order.data(), cc, nb, around.data(), c.position.data(), diag8.data(),
                                          c.keys.data(), B.nbr.data(), B.diag.data(), cukeys.data()));
}
// Levels first … count − 1 from level first − 1 (f, its unique keys, its stride) by the
// sorted-key kernels, as sparse_pressure_setup.build's loop; from level `tail` (> 0) on, in
// mgs_tail_levels' one launch (one "thread"), as sparse_pressure_setup._tail_levels.
static void build_levels(int first, int count, const std::vector<int>& bounds, int margin, int tail, Set f,
                         std::vector<ll> ukeys, int stride, std::vector<int>& cnt, std::vector<int>& span,
                         std::vector<Built>& built) {
    struct TailLevel {
        std::vector<ll> keys, ukeys;
        std::vector<unsigned char> fluid, flag, diag8, cls;
        std::vector<int> position, take, scan, around, flags, scans, order;
    };
    std::vector<TailLevel> T(count);
    for (int l = first; l < count; ++l) {
        if (tail > 0 && l >= tail) {  // the rest in mgs_tail_levels' one launch
            std::vector<long long> rec(22 * (size_t)count, 0);
            auto put = [&](int lv, int k, const void* p) { rec[(size_t)lv * 22 + k] = (long long)(size_t)p; };
            auto ints = [&](int lv, int b, int x, int y, int z, int s) {
                long long* r = &rec[(size_t)lv * 22 + 17];
                r[0] = b; r[1] = x; r[2] = y; r[3] = z; r[4] = s;
            };
            put(l - 1, 0, f.keys.data()); put(l - 1, 1, f.fluid.data()); put(l - 1, 2, f.position.data());
            put(l - 1, 3, ukeys.data());
            ints(l - 1, bounds[l - 1], f.bx, f.by, f.bz, stride);
            int bx = f.bx, by = f.by, bz = f.bz, fs = stride;
            for (int lv = l; lv < count; ++lv) {
                const int fb = bounds[lv - 1], nb = bounds[lv];
                TailLevel& t = T[lv];
                Built& B = built[lv];
                bx = coarser(bx, margin); by = coarser(by, margin); bz = coarser(bz, margin);
                t.keys.assign(nb, -1); t.ukeys.assign(nb, -1); t.fluid.assign(nb, 7); t.position.assign(nb, -7);
                t.flag.assign(fb, 9); t.take.assign(fb, -7); t.scan.assign(fb, -7); t.around.assign(6 * (size_t)nb, -7);
                t.diag8.assign(nb, 99); t.cls.assign(nb, 9); t.flags.assign(2 * (size_t)nb, -7);
                t.scans.assign(2 * (size_t)nb, -7); t.order.assign(nb, -7);
                B.stride_f = fs; B.stride = nb + 1;
                B.nbr.assign(6 * (size_t)(nb + 1), -7); B.diag.assign(nb + 1, -7.0f);
                B.up.assign(8 * (size_t)fs, -7); B.down.assign(64 * (size_t)(nb + 1), -7);
                const void* ptrs[17] = {t.keys.data(), t.fluid.data(), t.position.data(), t.ukeys.data(), t.flag.data(),
                                        t.take.data(), t.scan.data(), t.around.data(), t.diag8.data(), t.cls.data(),
                                        t.flags.data(), t.scans.data(), t.order.data(), B.nbr.data(), B.diag.data(),
                                        B.up.data(), B.down.data()};
                for (int k = 0; k < 17; ++k) put(lv, k, ptrs[k]);
                ints(lv, nb, bx, by, bz, nb + 1);
                fs = nb + 1;
            }
            h_dim.x = 1; h_thread.x = 0; h_grid.x = 1; h_block.x = 0;
            mgs_tail_levels(rec.data(), l, count, cnt.data(), span.data());
            break;
        }
        const int fb = bounds[l - 1], nb = bounds[l];
        int* fc = &cnt[4 * (l - 1)]; int* cc = &cnt[4 * l];
        Set c;
        c.bx = coarser(f.bx, margin); c.by = coarser(f.by, margin); c.bz = coarser(f.bz, margin);
        std::vector<unsigned char> cflag(fb);
        std::vector<int> ctake(fb), cscan;
        ONE_PER_ITEM(fb, mgs_coarsen(f.keys.data(), f.fluid.data(), fc, fb, f.bx, f.by, f.bz, cflag.data(),
                                     ctake.data()));
        scan_rows(ctake, cscan, 1, fb);
        c.keys.assign(std::max(nb, 1), -1); c.fluid.assign(std::max(nb, 1), 7);
        ONE_PER_ITEM(std::max(fb, 1), mgs_parents(f.keys.data(), cflag.data(), cscan.data(), fc, fb, f.bx, f.by, f.bz,
                                                  c.bx, c.by, c.bz, nb, c.keys.data(), c.fluid.data(), cc));
        Built& B = built[l];
        std::vector<ll> cukeys;
        std::vector<int> corder;
        level_tables(c, cc, nb, B, cukeys, corder);
        B.stride_f = stride;
        B.up.assign(8 * (size_t)stride, -7);
        ONE_PER_ITEM(stride, mgs_prolong_table(ukeys.data(), fc, stride, f.bx, f.by, f.bz, c.keys.data(), cc,
                                               c.position.data(), c.bx, c.by, c.bz, B.up.data()));
        B.down.assign(64 * (size_t)(nb + 1), -7);
        ONE_PER_ITEM(nb + 1, mgs_restrict_table(cukeys.data(), cc, nb + 1, c.bx, c.by, c.bz, f.keys.data(), fc,
                                                f.position.data(), f.bx, f.by, f.bz, B.down.data()));
        ONE_PER_ITEM(nb, mgs_key_span(cukeys.data(), cc, &span[6 * l]));
        f = c;
        ukeys = cukeys;
        stride = nb + 1;
    }
}
// The levels sparse_pressure_setup.levels_kept keeps; per kept coarse level: m m_red, nbr, diag
// (hex), up (8 × (m_fine + 1)), down (64 × (m + 1)).
static void print_kept(int min_side, int count, const std::vector<int>& cnt, const std::vector<int>& span,
                       const std::vector<Built>& built) {
    int kept = 1;  // sparse_pressure_setup.levels_kept
    while (kept < count) {
        const int* s = &span[6 * (kept - 1)];
        int e = 0;
        for (int a = 0; a < 3; ++a) e = std::max(e, s[a] + s[a + 3]);
        if (cnt[4 * (kept - 1) + 2] == 0 || e + 1 < min_side) break;
        ++kept;
    }
    for (int l = 1; l < kept; ++l) {
        const Built& B = built[l];
        const int mc = cnt[4 * l + 2], mf = cnt[4 * (l - 1) + 2];
        printf("%d %d\n", mc, cnt[4 * l + 1]);
        for (int d = 0; d < 6; ++d) for (int u = 0; u <= mc; ++u) printf("%d\n", B.nbr[(size_t)d * B.stride + u]);
        for (int u = 0; u <= mc; ++u) printf("%a\n", B.diag[u]);
        for (int r = 0; r < 8; ++r) for (int u = 0; u <= mf; ++u) printf("%d\n", B.up[(size_t)r * B.stride_f + u]);
        for (int r = 0; r < 64; ++r) for (int u = 0; u <= mc; ++u) printf("%d\n", B.down[(size_t)r * B.stride + u]);
    }
}
"""
# The same input and output as TABLES; the driver builds the levels as
# sparse_pressure_setup.build launches the kernels of flip_sparse_pressure_setup.cu (sizes
# in the cnt array, arrays of the bound's size, compactions by inclusive scans), then keeps
# the levels as sparse_pressure_setup.levels_kept and prints their tables' leading columns.
SETUP = PREAMBLE.replace('#include "flip_sparse_pressure.cu"',
                         '#include "flip_sparse_pressure_setup.cu"\n'
                         '#include "flip_sparse_pressure_unknowns.cu"') + SETUP_LEVELS + READ_SET + r"""
int main() {
    int min_side, max_levels, margin;
    Set f;
    std::vector<ll> ukeys;
    if (!read_set(min_side, max_levels, margin, f, ukeys)) return 1;
    const int n = (int)f.keys.size(), m = (int)ukeys.size();
    int tail = 0;  // > 0: levels from this one by mgs_tail_levels
    if (scanf("%d", &tail) != 1) tail = 0;
    const std::vector<int> bounds = level_bounds(n, max_levels);
    const int count = (int)bounds.size();
    std::vector<int> cnt, span;
    level_sizes(count, cnt, span);
    cnt[0] = n; cnt[2] = m;
    ONE_PER_ITEM(m, mgs_key_span(ukeys.data(), &cnt[0], &span[0]));
    int stride = m + 1;
    std::vector<Built> built(count);
    build_levels(1, count, bounds, margin, tail, f, ukeys, stride, cnt, span, built);
    print_kept(min_side, count, cnt, span, built);
    return 0;
}
"""


@pytest.fixture(scope="module")
def tables_device(tmp_path_factory):
    from voxfx.kernels.flip.sparse_pressure_setup import _K as setup_kernels

    return _build(tmp_path_factory, with_defines(SETUP, setup_kernels))


def scatter_driver(text):
    """A set-up driver (SETUP's text) with the restriction as the prolongation's transpose
    (sparse_pressure_setup.RESTRICT "scatter", as sparse_pressure_workspace_levels launches
    it): mgs_level_tables_down fills down with the level's tables, mgs_prolong_restrict
    writes it with up, mgs_tail_levels_scatter in the tail."""
    import re

    swaps = (  # (a launch's pattern, up to its ");"), its replacement
        (r"ONE_PER_ITEM\(nb \+ 1, mgs_level_tables\(.*?\)\);",
         "B.down.assign(64 * (size_t)(nb + 1), -7);  // cc − 4: the finer level's sizes (cnt rows in turn)\n"
         "    ONE_PER_ITEM(nb + 1, mgs_level_tables_down(order.data(), cc, nb, around.data(), c.position.data(), "
         "diag8.data(), c.keys.data(), B.nbr.data(), B.diag.data(), cukeys.data(), cc - 4, B.down.data()));"),
        (r"ONE_PER_ITEM\(stride, mgs_prolong_table\(.*?\)\);\s*B\.down\.assign\(.*?\);\s*"
         r"ONE_PER_ITEM\(nb \+ 1, mgs_restrict_table\(.*?\)\);",
         "ONE_PER_ITEM(stride, mgs_prolong_restrict(ukeys.data(), fc, stride, f.bx, f.by, f.bz, c.keys.data(), cc, "
         "c.position.data(), c.bx, c.by, c.bz, B.up.data(), nb + 1, B.down.data()));"),
        (r"mgs_tail_levels\(rec\.data\(\)", "mgs_tail_levels_scatter(rec.data()"))
    for pattern, new in swaps:
        text, count = re.subn(pattern, lambda _, new=new: new, text, flags=re.S)
        assert count == 1, pattern
    return text


@pytest.fixture(scope="module")
def tables_scatter(tmp_path_factory):
    from voxfx.kernels.flip.sparse_pressure_setup import _K as setup_kernels

    return _build(tmp_path_factory, with_defines(scatter_driver(SETUP), setup_kernels))


# Input: size, kind (size), nbr (6 × size), the size / 512 bricks' active flags, their brick
# coordinates (3 each: grid.slot_coords). Output: m_red m n_set, the set's box (min i j k, max i j k), the m
# cells, the size positions, nbr (6 × (m + 1)), diag (m + 1, hex), the n_set set cells:
# sparse_pressure_setup.unknowns.
UNKNOWNS = SETUP.split("typedef long long ll;")[0] + r"""
#define ONE_PER_ITEM(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
int main() {
    int size;
    if (scanf("%d", &size) != 1) return 1;
    std::vector<unsigned char> kind(size), diag8(size, 99);
    for (auto& k : kind) { int t; scanf("%d", &t); k = (unsigned char)t; }
    std::vector<int> nbr(6 * (size_t)size), flags(3 * (size_t)size, -7), scans(3 * (size_t)size), sizes(3, -7);
    for (auto& v : nbr) scanf("%d", &v);
    std::vector<char> active_bytes(size / 512);
    for (auto& a : active_bytes) { int t; scanf("%d", &t); a = (char)t; }
    bool* active = reinterpret_cast<bool*>(active_bytes.data());
    std::vector<int> slot_coords(3 * (size_t)(size / 512));
    for (auto& x : slot_coords) scanf("%d", &x);
    int box[6] = {2147483647, 2147483647, 2147483647, -2147483647 - 1, -2147483647 - 1, -2147483647 - 1};
    ONE_PER_ITEM(size, unk_classify(kind.data(), nbr.data(), size, active, slot_coords.data(), diag8.data(),
                                    flags.data(), box));
    int same = 1;  // unk_classify_block (one item a block, then 3 blocks striding): unk_classify's outputs
    for (unsigned grid : {(unsigned)size, 3u}) {
        std::vector<unsigned char> bdiag8(size, 99);
        std::vector<int> bflags(3 * (size_t)size, -7);
        int bbox[6] = {2147483647, 2147483647, 2147483647, -2147483647 - 1, -2147483647 - 1, -2147483647 - 1};
        h_dim.x = 1; h_thread.x = 0; h_grid.x = grid;
        for (unsigned blk = 0; blk < grid; ++blk) {
            h_block.x = blk;
            unk_classify_block(kind.data(), nbr.data(), size, active, slot_coords.data(), bdiag8.data(), bflags.data(),
                               bbox);
        }
        same = same && bdiag8 == diag8 && bflags == flags && std::equal(bbox, bbox + 6, box);
    }
    for (int r = 0; r < 3; ++r) {
        int s = 0;
        for (int c = 0; c < size; ++c) scans[(size_t)r * size + c] = (s += flags[(size_t)r * size + c]);
    }
    std::vector<int> position(size, -7);
    std::vector<long long> cells(size, -7), set(size, -7);
    ONE_PER_ITEM(std::max(size, 1), unk_order(flags.data(), scans.data(), size, sizes.data(), position.data(),
                                              cells.data(), set.data()));
    const int m = sizes[1];
    std::vector<int> unbr(6 * (size_t)(m + 1), -7);
    std::vector<float> udiag(m + 1, -7.0f);
    ONE_PER_ITEM(m + 1, unk_tables(cells.data(), sizes.data(), nbr.data(), size, position.data(), diag8.data(),
                                   unbr.data(), udiag.data()));
    printf("%d %d %d\n", sizes[0], m, sizes[2]);
    for (int v : box) printf("%d\n", v);
    for (int u = 0; u < m; ++u) printf("%lld\n", cells[u]);
    for (int v : position) printf("%d\n", v);
    for (int v : unbr) printf("%d\n", v);
    for (float v : udiag) printf("%a\n", v);
    for (int u = 0; u < sizes[2]; ++u) printf("%lld\n", set[u]);
    const int stride = m + 6;  // unk_tables_strided: rows 5 entries longer, the rest left alone
    std::vector<int> snbr(6 * (size_t)stride, -7);
    std::vector<float> sdiag(stride, -7.0f);
    ONE_PER_ITEM(m + 1, unk_tables_strided(cells.data(), sizes.data(), stride, nbr.data(), size, position.data(),
                                           diag8.data(), snbr.data(), sdiag.data()));
    for (int v : snbr) printf("%d\n", v);
    for (float v : sdiag) printf("%a\n", v);
    std::vector<float> ddiag(stride, -7.0f);  // unk_diag_strided: the diag alone, nothing past column m
    ONE_PER_ITEM(stride, unk_diag_strided(cells.data(), sizes.data(), diag8.data(), ddiag.data()));
    for (float v : ddiag) printf("%a\n", v);
    printf("%d\n", same);
    return 0;
}
"""


@pytest.fixture(scope="module")
def unknowns_device(tmp_path_factory):
    from voxfx.kernels.flip.sparse_pressure_setup import _K as setup_kernels

    return _build(tmp_path_factory, with_defines(UNKNOWNS, setup_kernels, ["#include <algorithm>"]))


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("setup", ["host", "device", "tail1", "tail2", "scatter", "scatter-tail1", "scatter-tail2"])
@pytest.mark.parametrize("scene", ["tank", "sealed", "sheet"])
def test_multigrid_table_kernels_build_the_numpy_tables(request, scene, setup):
    """mg_coarsen … mg_restrict_table, launched as TableKernels launches them ("host"),
    and mgs_coarsen … mgs_key_span with the sizes on the device as sparse_pressure_setup
    launches them ("device"; "tailL": levels from L on in mgs_tail_levels' one launch;
    "scatter…": the restriction as the prolongation's transpose, RESTRICT "scatter") give
    every level's m, m_red, nbr, diag, up and down of TableBuilder exactly, and the same
    number of levels."""
    fixture = {"host": "tables", "scatter": "tables_scatter"}.get(setup.split("-")[0], "tables_device")
    tables = request.getfixturevalue(fixture)
    setup = setup.split("-")[-1]
    lines, M = scene_lines(scene)
    if setup.startswith("tail"):
        lines.append(setup[4:])
    assert_levels(tables.raw(lines).split(), M)


def scene_lines(scene):
    """The set-up drivers' input for *scene* ("tank", "sealed", "sheet": level 0's set and its
    unknowns' keys) and the NumPy VCycle of it (the oracle)."""
    g = _tank()
    if scene == "sealed":  # fluid up to the lid: one pinned cell, deep hierarchy
        g["cell"] = np.where(g.active() & (g["cell"] != 2), np.uint8(FLUID), g["cell"]).astype(np.uint8)
    if scene == "sheet":  # one layer of fluid in air, no walls: the next level is empty
        k = g.lattice()[2]
        g["cell"] = np.where(g.active() & (k == 0), np.uint8(FLUID), np.uint8(0)).astype(np.uint8)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    M = VCycle(g, kind, level)
    assert len(M.levels) >= 3 or (scene == "sheet" and len(M.levels) == 2 and M.levels[1].m == 0)
    cells = sparse_multigrid._level0_cells(g, kind, level, np)
    keys0 = sparse_multigrid._pack(*level.lattice, cells.base)
    lines = [f"{sparse_multigrid.MG_MIN_SIDE} {sparse_multigrid.MAX_LEVELS} {sparse_multigrid._MARGIN}",
             " ".join(map(str, cells.base)), str(len(cells.keys)), *map(str, cells.keys),
             *map(str, cells.fluid.astype(int)), *map(str, cells.position), str(level.m), *map(str, keys0)]
    return lines, M


def assert_levels(out, M):
    """The set-up drivers' output (*out*, split: per kept coarse level m m_red, nbr, diag,
    up, down) is VCycle *M*'s coarse levels and transfer tables, level for level."""
    at = 0
    for L, up, down in zip(M.levels[1:], M.up, M.down):
        m, m_red = int(out[at]), int(out[at + 1])
        at += 2
        assert (m, m_red) == (L.m, L.m_red)
        for want, count, parse in ((L.nbr, 6 * (m + 1), int), (L.diag, m + 1, float.fromhex), (up, up.size, int),
                                   (down, 64 * (m + 1), int)):
            got = np.array([parse(x) for x in out[at:at + count]], dtype=want.dtype).reshape(want.shape)
            at += count
            assert np.array_equal(got, want)
    assert at == len(out)  # the same number of levels


def test_device_setup_bounds_and_kept_levels():
    """sparse_pressure_setup's host side: each level's bound an eighth of the last down to
    an empty level (at most MAX_LEVELS); the levels kept as VCycle's loop keeps them."""
    from voxfx.kernels.flip import sparse_pressure_setup as setup

    assert setup.level_bounds(100) == [100, 12, 1, 0]
    assert setup.level_bounds(0) == [0]
    assert len(setup.level_bounds(2 ** 62)) == sparse_multigrid.MAX_LEVELS
    side = sparse_multigrid.MG_MIN_SIDE
    assert setup.levels_kept([side + 6, side, side - 1, 0], 4) == 3
    assert setup.levels_kept([side - 1, 9], 2) == 1
    assert setup.levels_kept([side, side], 2) == 2  # as many as were built


@pytest.mark.parametrize("scene", ["tank", "full"])
def test_device_unknowns_are_the_numpy_unknowns(unknowns_device, scene):
    """unk_classify, a scan, unk_order and unk_tables (sparse_pressure_setup.unknowns) give
    Unknowns' m_red, m, cells, position, nbr and diag exactly, and the multigrid's level-0
    set (its flat cells and lattice box); unk_tables_strided (sparse_pressure_workspace) the
    same nbr and diag in rows of a longer stride, nothing written past column m; unk_diag_strided
    (level 0 without its nbr rows, NBR_TABLE "skip") the same diag, launched over the stride,
    nothing written past column m either; unk_classify_block (``WIDEN`` "block", one thread a
    block here) unk_classify's diag, flags and box."""
    g = _tank()
    if scene == "full":  # every active cell but the obstacle's water
        g["cell"] = np.where(g.active() & (g["cell"] != 2), np.uint8(FLUID), g["cell"]).astype(np.uint8)
    kind, _, _ = sparse_pressure.solver_cells(g)
    want = sparse_pressure.Unknowns(g, kind)
    assert g.nbr.dtype == np.int32 and 0 < want.m_red < want.m
    lattice = g.lattice()
    slot_coords = np.zeros((g.capacity, 3), np.int64)
    slot_coords[g.topology.slots] = g.topology.coords()
    out = unknowns_device.raw([str(g.size), *map(str, kind.astype(int)), *map(str, g.nbr.ravel()),
                               *map(str, g.brick_slot.astype(int)), *map(str, slot_coords.ravel())]).split()
    in_set = np.flatnonzero(g.active() & (kind != 0))  # sparse_multigrid._level0_cells' set
    box = [int(f(a[in_set])) for f in (np.min, np.max) for a in lattice]
    m_red, m, n_set = int(out[0]), int(out[1]), int(out[2])
    assert (m_red, m, n_set) == (want.m_red, want.m, len(in_set)) and n_set > m
    assert [int(v) for v in out[3:9]] == box
    at = 9
    for expect, count, parse in ((want.cells, m, int), (want.position, g.size, int),
                                 (want.nbr.ravel(), 6 * (m + 1), int), (want.diag, m + 1, float.fromhex),
                                 (in_set, n_set, int)):
        got = np.array([parse(x) for x in out[at:at + count]])
        at += count
        assert np.array_equal(got, np.asarray(expect))
    stride = m + 6
    wide_nbr = np.full((6, stride), -7)
    wide_nbr[:, :m + 1] = want.nbr
    wide_diag = np.full(stride, -7.0, np.float32)
    wide_diag[:m + 1] = want.diag
    for expect, count, parse in ((wide_nbr.ravel(), 6 * stride, int), (wide_diag, stride, float.fromhex),
                                 (wide_diag, stride, float.fromhex)):
        got = np.array([parse(x) for x in out[at:at + count]])
        at += count
        assert np.array_equal(got, np.asarray(expect))
    assert out[at:] == ["1"]  # unk_classify_block: unk_classify's diag, flags and box (one item a block, 3 blocks)


# Input: rows n tile, then rows × n ints. Output: their inclusive scans along each row by
# scan_tile_sums + scan_tiles (sparse_pressure_setup.inclusive_scan), rows × n.
SCAN = SETUP.split("typedef long long ll;")[0].replace("_setup.cu", "_scan.cu") + r"""
static void grid_launch(unsigned tiles, unsigned rows, void (*call)(void)) {
    h_dim.x = 1; h_thread.x = 0; h_grid.x = tiles; h_grid.y = rows;
    for (unsigned r = 0; r < rows; ++r) for (unsigned t = 0; t < tiles; ++t) { h_block.x = t; h_block.y = r; call(); }
}
static std::vector<int> in, sums, out;
static int n, tile;
static void tile_sums() { scan_tile_sums(in.data(), n, tile, sums.data()); }
static void tiles_scan() { scan_tiles(in.data(), n, tile, sums.data(), out.data()); }
int main() {
    int rows;
    if (scanf("%d %d %d", &rows, &n, &tile) != 3) return 1;
    in.resize((size_t)rows * n);
    for (auto& v : in) scanf("%d", &v);
    const unsigned tiles = (unsigned)((n + tile - 1) / tile);
    sums.assign((size_t)rows * tiles, -7);
    out.assign((size_t)rows * n, -7);
    grid_launch(tiles, rows, tile_sums);
    grid_launch(tiles, rows, tiles_scan);
    for (int v : out) printf("%d\n", v);
    return 0;
}
"""


@pytest.fixture(scope="module")
def scan_device(tmp_path_factory):
    from voxfx.kernels.flip.sparse_pressure_setup import _K as setup_kernels

    return _build(tmp_path_factory, with_defines(SCAN, setup_kernels, ["#include <algorithm>"]))


@pytest.mark.parametrize("rows, n, tile", [(1, 1, 4), (3, 1000, 7), (2, 4096, 2048), (1, 517, 1000)])
def test_scan_kernels_give_the_cumulative_sums_of_each_row(scan_device, rows, n, tile):
    """scan_tile_sums + scan_tiles (one "thread" a block here: the tiles and their carries;
    the block-wide scan itself runs on the device in tests/gpu) equal np.cumsum per row."""
    rng = np.random.default_rng(n)
    a = rng.integers(0, 3, (rows, n)).astype(np.int32)
    got = np.array(scan_device.raw([f"{rows} {n} {tile}", *map(str, a.ravel())]).split(), np.int64).reshape(rows, n)
    assert np.array_equal(got, np.cumsum(a, axis=1))
    assert got[:, -1].max() > 0 or n == 1


def test_scan_tiles_are_wide_enough_for_every_row():
    from voxfx.kernels.flip import sparse_pressure_setup as setup
    from voxfx.kernels.grid.launch import THREADS

    for n in (1, 2048, 10 ** 6, 2 ** 31 - 1):
        tile = setup.scan_tile(n)
        assert tile % THREADS == 0 and tile >= 8 * THREADS and -(-n // tile) <= setup._SCAN_TILES


# Input: rows n tile epoch, then rows × n ints, twice (two launches in turn). Output: per launch
# the rows × n inclusive scans by scan_lookback (sparse_pressure_setup.SCAN "lookback"), then
# ctrl after both (epoch, ticket, done). One-thread blocks run in ticket order here, so each
# tile finds its predecessor's prefix; the look-back over aggregates runs in tests/gpu.
SCAN_LOOKBACK = SCAN.split("static void grid_launch")[0] + r"""
int main() {
    int rows, n, tile;
    unsigned epoch;
    if (scanf("%d %d %d %u", &rows, &n, &tile, &epoch) != 4) return 1;
    const unsigned tiles = (unsigned)((n + tile - 1) / tile);
    std::vector<unsigned long long> status((size_t)rows * tiles, 0);
    unsigned ctrl[3] = {epoch, 0, 0};
    for (int launch = 0; launch < 2; ++launch) {
        std::vector<int> in((size_t)rows * n), out((size_t)rows * n, -7);
        for (auto& v : in) scanf("%d", &v);
        h_dim.x = 1; h_thread.x = 0; h_grid.x = rows * tiles; h_grid.y = 1;
        for (unsigned b = 0; b < rows * tiles; ++b) {
            h_block.x = b;
            scan_lookback(in.data(), n, tile, (int)tiles, status.data(), ctrl, out.data());
        }
        for (int v : out) printf("%d\n", v);
    }
    printf("%u %u %u\n", ctrl[0], ctrl[1], ctrl[2]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def lookback_device(tmp_path_factory):
    from voxfx.kernels.flip.sparse_pressure_setup import _K as setup_kernels

    return _build(tmp_path_factory, with_defines(SCAN_LOOKBACK, setup_kernels, ["#include <algorithm>"]))


@pytest.mark.parametrize("rows, n, tile, epoch", [(1, 1, 4, 1), (3, 1000, 7, 5), (2, 4096, 2048, 1),
                                                  (1, 517, 1000, 2 ** 31 - 1), (3, 70, 8, 9)])
def test_lookback_scan_gives_the_cumulative_sums_and_readies_the_next_launch(lookback_device, rows, n, tile, epoch):
    """scan_lookback, launched twice on fresh rows (the second on the status words the first
    left): each launch equals np.cumsum per row, and ctrl ends with the ticket and done count
    back at 0 and the epoch moved on twice (past 2^31 − 1 it wraps to 1, never 0)."""
    rng = np.random.default_rng(n + rows)
    a = [rng.integers(0, 4, (rows, n)).astype(np.int32) for _ in range(2)]
    text = lookback_device.raw([f"{rows} {n} {tile} {epoch}", *map(str, a[0].ravel()), *map(str, a[1].ravel())])
    values = np.array(text.split(), np.int64)
    for k in range(2):
        got = values[k * rows * n:(k + 1) * rows * n].reshape(rows, n)
        assert np.array_equal(got, np.cumsum(a[k], axis=1)), k
    step = lambda e: 1 if e == 2 ** 31 - 1 else e + 1  # noqa: E731
    assert list(values[2 * rows * n:]) == [step(step(epoch)), 0, 0]


# A mutant of scan_lookback that drops the carry from one chunk of its tile to the next: the
# wide tiles' check below must catch it.
_CARRY = "            carry += part[k];\n"


@pytest.fixture(scope="module")
def lookback_mutant(tmp_path_factory):
    from voxfx.kernels import backend
    from voxfx.kernels.flip.sparse_pressure_setup import _K as setup_kernels

    text = (backend.CUDA_DIR / "flip_sparse_pressure_scan.cu").read_text()
    assert text.count(_CARRY) == 1  # scan_tile_chunks, the one body of scan_lookback and its pair (s22a)
    d = tmp_path_factory.mktemp("scan_mutant")
    (d / "scan_mutant.cu").write_text(text.replace(_CARRY, ""))
    source = SCAN_LOOKBACK.replace('#include "flip_sparse_pressure_scan.cu"', f'#include "{d / "scan_mutant.cu"}"')
    assert source != SCAN_LOOKBACK
    return _build(tmp_path_factory, with_defines(source, setup_kernels, ["#include <algorithm>"]))


@pytest.mark.parametrize("rows, n", [(3, 20_000), (1, 8_193), (2, 4_095)])
def test_lookback_scan_is_the_same_at_every_tile_width(lookback_device, lookback_mutant, rows, n):
    """scan_lookback over tiles of each SCAN_TILE_WIDTHS floor (2,048, 4,096 and 8,192 items:
    sparse_pressure_setup.scan_tile(n, width)) gives the same integers, np.cumsum per row, in two
    launches; the mutant without the chunks' carry does not (the check can fail)."""
    from voxfx.kernels.flip import sparse_pressure_setup as setup

    rng = np.random.default_rng(n)
    a = [rng.integers(0, 4, (rows, n)).astype(np.int32) for _ in range(2)]
    want = np.concatenate([np.cumsum(x, axis=1).ravel() for x in a])
    tiles = [setup.scan_tile(n, int(w)) for w in setup.SCAN_TILE_WIDTHS]
    assert tiles == [2048, 4096, 8192]
    for tile in tiles:
        lines = [f"{rows} {n} {tile} 3", *map(str, a[0].ravel()), *map(str, a[1].ravel())]
        values = np.array(lookback_device.raw(lines).split(), np.int64)
        assert np.array_equal(values[:2 * rows * n], want), tile
        assert list(values[2 * rows * n:]) == [5, 0, 0]
        bad = np.array(lookback_mutant.raw(lines).split(), np.int64)
        assert not np.array_equal(bad[:2 * rows * n], want), tile


def test_the_scan_tile_width_is_read_at_each_scan(monkeypatch):
    from voxfx.kernels.flip import sparse_pressure_setup as setup

    for width in setup.SCAN_TILE_WIDTHS:
        monkeypatch.setenv("VOXFX_SPARSE_SCAN_TILE", width)
        assert setup.scan_tile_floor() == width
        for n in (1, 2048, 10 ** 6, 2 ** 31 - 1):
            tile = setup.scan_tile(n, int(setup.scan_tile_floor()))
            assert tile % 256 == 0 and tile >= int(width) * 256 and -(-n // tile) <= setup._SCAN_TILES
    monkeypatch.delenv("VOXFX_SPARSE_SCAN_TILE")
    assert setup.scan_tile_floor() == "8"
    assert setup.scan_tile(10 ** 6, int(setup.scan_tile_floor())) == setup.scan_tile(10 ** 6)
