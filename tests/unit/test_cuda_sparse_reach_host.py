"""The topology's reach by classes (cuda/flip_sparse_reach.cu): ``reach_classes`` then
``reach_compare_classes`` over a closed domain's brick index mark kept exactly the slots of
the reached bricks that have one and claim exactly the index entries of those that have
none (``added`` each once), the bricks of a brute force over every occupied cell's box
(cell ± its slot's margin, clipped to [−1, n]: ``SparseFlipGrid.topology_keys``), at
margins from 0 to ``CLASS_MAX_MARGIN`` (the masks of ``brick_reach`` stop at 64); a margin
past it counts its occupied rows as beyond and reaches nothing. Built as host code like
tests/unit/test_cuda_brick_reach_host.py."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_brick_reach_host import READ_SLOTS, slot_lines
from tests.unit.test_cuda_exact import build_ints
from voxfx.kernels.flip import sparse_reach

# Input: nx ny nz cap; per slot: used, bx by bz, margin; per slot 512 occupied bytes; then the index
# (lo = −1, d = n/8 + 2 a side) as slots or −1. Output: beyond, added, cap kept bytes, the claimed words.
HARNESS = STUBS + '#include "flip_sparse_reach.cu"\n' + DRIVER + r"""
int main() {
    int nx, ny, nz;
    long long cap;
    if (scanf("%d %d %d %lld", &nx, &ny, &nz, &cap) != 4) return 1;
""" + READ_SLOTS + r"""
    std::vector<unsigned char> kept(cap, 0);
    const int dx = (nx >> 3) + 2, dy = (ny >> 3) + 2, dz = (nz >> 3) + 2;
    std::vector<int> index((long long)dx * dy * dz);
    for (auto& x : index) scanf("%d", &x);
    std::vector<unsigned int> classes(cap, 0u), claimed(index.size(), 0u);
    unsigned long long beyond = 0, added = 0;
    LAUNCH(64 * cap, reach_classes(occupied.data(), used.data(), cap, margins.data(), LIMIT, classes.data(), &beyond));
    LAUNCH(REACH_LANES * cap, reach_compare_classes(classes.data(), used.data(), coords.data(), cap, margins.data(),
                                                    1, nx, ny, nz, index.data(), -1, -1, -1, dx, dy, dz, kept.data(),
                                                    claimed.data(), &added, &beyond));
    printf("%llu\n%llu\n", beyond, added);
    for (auto k : kept) printf("%d\n", (int)k);
    for (auto c : claimed) printf("%u\n", c);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    defines = [f"-DREACH_LANES={sparse_reach.REACH_LANES}", f"-DLIMIT={sparse_reach.CLASS_MAX_MARGIN}"]
    return build_ints(tmp_path_factory, HARNESS, defines, "sparse_reach")


def slots_index(shape, used, bricks):
    """The closed box's brick index (lo = −1, n/8 + 2 a side): each used slot at its brick, −1 elsewhere."""
    d = [(n >> 3) + 2 for n in shape]
    index = np.full(d[0] * d[1] * d[2], -1, np.int64)
    for s in range(len(used)):
        if used[s]:
            b = bricks[s]
            index[((b[2] + 1) * d[1] + b[1] + 1) * d[0] + b[0] + 1] = s
    return index


def run_classes(run, shape, used, bricks, margins, occupied, index):
    """The classes harness *run* on these slots and *index*: (beyond, added, kept, claimed)."""
    cap = len(used)
    lines = [f"{shape[0]} {shape[1]} {shape[2]} {cap}"]
    lines += slot_lines(used, bricks, margins, occupied)
    lines.append(" ".join(str(int(x)) for x in index))
    out = run(lines)
    return out[0], out[1], np.array(out[2:2 + cap], np.uint8), np.array(out[2 + cap:], np.uint32)


def brute_reached(shape, used, coords, margins, occupied, limit):
    """The index entries (lo = −1) that some occupied cell's box reaches, by slicing a box per cell."""
    d = [(n >> 3) + 2 for n in shape]
    reached = np.zeros(d[::-1], bool)  # (z, y, x)
    for s in range(len(used)):
        if not used[s] or margins[s] > limit:
            continue
        m = int(margins[s])
        for local in np.flatnonzero(occupied[s]):
            c = [int(coords[s][0]) * 8 + local % 8, int(coords[s][1]) * 8 + (local // 8) % 8,
                 int(coords[s][2]) * 8 + local // 64]
            lo = [max(c[a] - m, -1) >> 3 for a in range(3)]
            hi = [min(c[a] + m, shape[a]) >> 3 for a in range(3)]
            reached[lo[2] + 1:hi[2] + 2, lo[1] + 1:hi[1] + 2, lo[0] + 1:hi[0] + 2] = True
    return reached.ravel()


@pytest.mark.parametrize("top", [8, 64, 65, 120, 200, 256])
def test_reach_by_classes_is_the_bricks_of_every_occupied_cells_box(harness, top):
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)) + top)
    shape = (300, 221, 157)
    limit = sparse_reach.CLASS_MAX_MARGIN
    cap = 8
    used = np.array([1, 1, 0, 1, 1, 1, 1, 1], np.uint8)  # a free slot takes no part
    bricks = np.array([(0, 0, 0), (10, 7, 5), (1, 1, 1), (20, 12, 9), (-1, 2, 3), (37, 27, 19), (5, 26, 0),
                       (30, 3, 18)])
    margins = np.array([top, max(0, top - 7), top, limit + 1, rng.integers(0, top + 1), min(8 * (top // 8) + 7, limit),
                        rng.integers(0, 9), top])
    occupied = (rng.random((cap, 512)) < 0.01).astype(np.uint8)
    occupied[1] = 0
    occupied[1, [0, 7, 63, 448, 511]] = 1  # the corner cells: the runs' ends
    occupied[7] = 0
    occupied[7, 9 * 8 + 3] = 1  # one cell
    index = slots_index(shape, used, bricks)
    others = rng.choice(index.size, 300, replace=False)  # bricks in use whose slots hold no particle
    index[others[index[others] < 0]] = cap  # slot cap: no kept byte (the harness's kept is cap long)
    index[index == cap] = -1 if top % 2 else cap - 3  # or slot 5's
    beyond, added, kept, claimed = run_classes(harness, shape, used, bricks, margins, occupied, index)
    assert beyond == occupied[3].reshape(64, 8).any(axis=1).sum()  # slot 3's margin is past the limit: its rows
    reached = brute_reached(shape, used, bricks, margins, occupied, limit)
    want_claimed = reached & (index < 0)
    want_kept = np.zeros(cap, np.uint8)
    want_kept[np.unique(index[reached & (index >= 0)])] = 1
    assert reached.sum() > 27 and want_claimed.any()
    assert np.array_equal(claimed != 0, want_claimed)
    assert added == want_claimed.sum()
    assert np.array_equal(kept, want_kept)


# The merged pipeline (reach_slots, VOXFX_SPARSE_TOPOLOGY_PIPELINE=merged) against the separate launches:
# slot_margins (or one margin), reach_classes, reach_compare_classes. Input: nx ny nz cap fixed; the slots as
# READ_SLOTS (margins unread); the index; per slot its speed2 bits and 27 neighbours; dt gdt h (%la) base.
# Output, each way: the margins, most, the class words, kept, the claimed words, added, beyond.
MERGED_HARNESS = STUBS + '#include "flip_sparse_topology.cu"\n#include "flip_sparse_reach.cu"\n' + DRIVER + r"""
int main() {
    int nx, ny, nz, fixed;
    long long cap;
    if (scanf("%d %d %d %lld %d", &nx, &ny, &nz, &cap, &fixed) != 5) return 1;
""" + READ_SLOTS + r"""
    const int dx = (nx >> 3) + 2, dy = (ny >> 3) + 2, dz = (nz >> 3) + 2;
    std::vector<int> index((long long)dx * dy * dz), nbr27(27 * cap);
    for (auto& x : index) scanf("%d", &x);
    std::vector<unsigned int> speed2(cap);
    for (auto& x : speed2) scanf("%u", &x);
    for (auto& x : nbr27) scanf("%d", &x);
    double dt, gdt, h;
    int base;
    scanf("%la %la %la %d", &dt, &gdt, &h, &base);
    for (int way = 0; way < 2; ++way) {
        std::vector<int> m(cap, -7);
        std::vector<unsigned int> classes(cap, 0u), claimed(index.size(), 0u);
        std::vector<unsigned char> kept(cap, 0);
        unsigned long long beyond = 0, added = 0, most = 0;
        if (way == 0) {
            if (fixed >= 0) std::fill(m.begin(), m.end(), fixed);
            else LAUNCH(cap, slot_margins(speed2.data(), used.data(), nbr27.data(), cap, dt, gdt, h, base, m.data(),
                                          &most));
            LAUNCH(64 * cap, reach_classes(occupied.data(), used.data(), cap, m.data(), LIMIT, classes.data(),
                                           &beyond));
            LAUNCH(REACH_LANES * cap, reach_compare_classes(classes.data(), used.data(), coords.data(), cap, m.data(),
                                                            1, nx, ny, nz, index.data(), -1, -1, -1, dx, dy, dz,
                                                            kept.data(), claimed.data(), &added, &beyond));
        } else {
            LAUNCH(REACH_LANES * cap, reach_slots(occupied.data(), used.data(), coords.data(), cap, speed2.data(),
                                                  nbr27.data(), fixed, dt, gdt, h, base, LIMIT, 1, nx, ny, nz,
                                                  index.data(), -1, -1, -1, dx, dy, dz, m.data(), classes.data(),
                                                  kept.data(), claimed.data(), &added, &beyond, &most));
        }
        for (auto x : m) printf("%d\n", x);
        printf("%llu\n", most);
        for (auto x : classes) printf("%u\n", x);
        for (auto k : kept) printf("%d\n", (int)k);
        for (auto c : claimed) printf("%u\n", c);
        printf("%llu\n%llu\n", added, beyond);
    }
    return 0;
}
"""


def run_merged(run, shape, fixed, used, bricks, occupied, v2, nbr, steps):
    """The merged-launch harness *run* on the slots (*used*, *bricks*, *occupied*, *v2*, *nbr*) of a
    *shape* box at margin *fixed* (< 0: per brick), *steps* (dt, g·dt, h, base): the separate launches'
    outputs (asserted equal to the merged launch's) as (all, margins, added, beyond, kept)."""
    cap = len(used)
    dt, gdt, h, base = steps
    index = slots_index(shape, used, bricks)
    lines = [f"{shape[0]} {shape[1]} {shape[2]} {cap} {fixed}"]
    lines += slot_lines(used, bricks, np.zeros(cap, np.int64), occupied)
    lines.append(" ".join(str(int(x)) for x in index))
    lines.append(" ".join(str(int(x)) for x in v2.view(np.uint32)))
    lines.append(" ".join(str(int(x)) for x in nbr.ravel()))
    lines.append(f"{float(dt).hex()} {float(gdt).hex()} {float(h).hex()} {base}")
    out = run(lines)
    half = out.size // 2
    separate, merged = out[:half], out[half:]
    assert np.array_equal(merged, separate)
    added, beyond = separate[-2:]
    return separate, separate[:cap], added, beyond, separate[2 * cap + 1:3 * cap + 1]


@pytest.fixture(scope="module")
def merged_harness(tmp_path_factory):
    defines = [f"-DREACH_LANES={sparse_reach.REACH_LANES}", f"-DLIMIT={sparse_reach.CLASS_MAX_MARGIN}"]
    return build_ints(tmp_path_factory, MERGED_HARNESS, defines, "sparse_reach_merged")


@pytest.mark.parametrize("fixed", [-1, 0, 13, 70, 256, 257], ids=lambda m: "per brick" if m < 0 else f"margin {m}")
def test_merged_reach_slots_is_the_separate_launches(merged_harness, fixed):
    """``reach_slots`` (one launch a substep) writes the margins, largest |v|² bits, class words,
    kept marks and claimed entries and counts the added and beyond of ``slot_margins`` (or one
    margin), ``reach_classes`` and ``reach_compare_classes``: per-brick margins from speeds
    reaching 0–300 cells (past ``CLASS_MAX_MARGIN``: beyond), a NaN speed, free slots."""
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)) + fixed)
    shape = (300, 221, 157)
    cap = 12
    used = np.array([1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1], np.uint8)
    bricks = np.array([(0, 0, 0), (10, 7, 5), (1, 1, 1), (20, 12, 9), (-1, 2, 3), (37, 27, 19), (5, 26, 0),
                       (30, 3, 18), (18, 13, 9), (2, 2, 2), (19, 12, 9), (36, 26, 18)])
    occupied = (rng.random((cap, 512)) < 0.01).astype(np.uint8)
    occupied[1] = 0
    occupied[1, [0, 7, 63, 448, 511]] = 1
    dt, gdt, h, base = 0.04, 9.81 * 0.04, 0.01, 1  # margin = base + ⌈(|v| + g·dt)·dt/h⌉: |v| 10 → 42 cells
    speeds = rng.uniform(0.0, 60.0, cap).astype(np.float32)  # up to ~242 cells
    speeds[5] = 80.0  # past the limit: its 27 neighbours' margins too
    v2 = (speeds * speeds).astype(np.float32)
    v2[9] = np.nan  # a free slot: no margin reads it
    nbr = rng.choice([-1, 0, 1, 2, 3, 4, 6, 7, 8, 10, 11], (cap, 27))  # slots 5 and 9 where placed:
    nbr[:, 13] = np.arange(cap)  # itself
    nbr[3, 0] = 5  # past the limit (slots 3 and 5)
    nbr[7, 26] = 9  # a NaN: 2^30 (slot 7)
    separate, margins, added, beyond, kept = run_merged(merged_harness, shape, fixed, used, bricks, occupied, v2,
                                                        nbr, (dt, gdt, h, base))
    most = int(separate[cap])
    assert kept.any() == (fixed <= sparse_reach.CLASS_MAX_MARGIN)  # each brick reaches itself
    assert (added > 0) == (fixed < 0 or 0 < fixed <= sparse_reach.CLASS_MAX_MARGIN)
    if fixed < 0:
        rows = nbr[used.astype(bool)]
        assert most == int(v2.view(np.uint32)[rows[rows >= 0]].max())  # NaN's bits: the largest
        assert margins[7] == 1 << 30 and margins[3] > sparse_reach.CLASS_MAX_MARGIN and beyond > 0
        assert margins.min() < 200
    else:
        assert most == 0 and (margins == fixed).all() and (beyond > 0) == (fixed > sparse_reach.CLASS_MAX_MARGIN)


@pytest.fixture(scope="module")
def any_harness(tmp_path_factory):
    """The harness with ``class_limit``'s limit for a closed box whose index a walk at
    ``CLASS_MAX_MARGIN`` covers (``CLASS_ANY_MARGIN``)."""
    limit = sparse_reach.class_limit((300, 221, 157), True)
    defines = [f"-DREACH_LANES={sparse_reach.REACH_LANES}", f"-DLIMIT={limit}"]
    return build_ints(tmp_path_factory, HARNESS, defines, "sparse_reach_any")


@pytest.mark.parametrize("top", [257, 300, 520, 4096, (1 << 30) - 1])
def test_reach_by_classes_past_256_in_a_closed_box_is_the_brute_force(any_harness, top):
    """Past ``CLASS_MAX_MARGIN`` (h20g: the 65M Fast frames' spray at ~300 cells a substep built on the
    array path) the walks, clipped to the closed box's index, give the brute force's bricks exactly;
    a margin of 2^30 (a NaN speed's) still counts as beyond and reaches nothing."""
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)) + top % 1000)
    shape = (300, 221, 157)
    limit = sparse_reach.class_limit(shape, True)
    assert limit == sparse_reach.CLASS_ANY_MARGIN > top - 1
    cap = 6
    used = np.array([1, 1, 0, 1, 1, 1], np.uint8)
    bricks = np.array([(0, 0, 0), (10, 7, 5), (1, 1, 1), (20, 12, 9), (37, 27, 19), (5, 26, 0)])
    margins = np.array([top, rng.integers(200, 300), top, 1 << 30, rng.integers(0, 9), min(top, 260)])
    occupied = (rng.random((cap, 512)) < 0.01).astype(np.uint8)
    occupied[1] = 0
    occupied[1, [0, 7, 63, 448, 511]] = 1
    occupied[3, 5] = 1  # the beyond slot holds a row
    index = slots_index(shape, used, bricks)
    others = rng.choice(index.size, 300, replace=False)
    index[others[index[others] < 0]] = cap - 2  # bricks of slot 4's (kept where reached)
    beyond, added, kept, claimed = run_classes(any_harness, shape, used, bricks, margins, occupied, index)
    assert beyond == occupied[3].reshape(64, 8).any(axis=1).sum()  # 2^30: past every limit
    reached = brute_reached(shape, used, bricks, margins, occupied, limit)
    want_kept = np.zeros(cap, np.uint8)
    want_kept[np.unique(index[reached & (index >= 0)])] = 1
    assert reached.mean() > 0.9  # slot 0's box covers most of the index
    assert np.array_equal(claimed != 0, reached & (index < 0))
    assert added == (reached & (index < 0)).sum()
    assert np.array_equal(kept, want_kept)


def test_class_limit_serves_any_margin_where_the_closed_index_is_no_larger_than_a_walk_at_256():
    """``class_limit``: the 65M dam break's 512³ closed box (66³ index entries ≤ 67³) takes every margin
    below 2^30 by classes — its Fast frames 10–11 asked ~300 cells a substep, which went to the array path
    (30.8 s of topology on an H100, session 20); an open box, or a closed one whose index is larger
    (1024³), keeps ``CLASS_MAX_MARGIN``."""
    assert sparse_reach.class_limit((512, 512, 512), True) == sparse_reach.CLASS_ANY_MARGIN
    assert sparse_reach.class_limit((520, 520, 520), True) == sparse_reach.CLASS_ANY_MARGIN
    assert sparse_reach.class_limit((528, 528, 528), True) == sparse_reach.CLASS_MAX_MARGIN
    assert sparse_reach.class_limit((512, 512, 512), False) == sparse_reach.CLASS_MAX_MARGIN
    assert sparse_reach.class_limit((1024, 1024, 1024), True) == sparse_reach.CLASS_MAX_MARGIN
    limit = sparse_reach.class_limit((512, 512, 512), True)
    assert sparse_reach.by_classes(300, True, limit) and sparse_reach.by_classes(1 << 20, True, limit)
    assert not sparse_reach.by_classes(1 << 30, True, limit) and not sparse_reach.by_classes(300, False, limit)
    assert not sparse_reach.by_classes(300, True)  # the old bound


@pytest.fixture(scope="module")
def merged_any_harness(tmp_path_factory):
    limit = sparse_reach.class_limit((300, 221, 157), True)
    defines = [f"-DREACH_LANES={sparse_reach.REACH_LANES}", f"-DLIMIT={limit}"]
    return build_ints(tmp_path_factory, MERGED_HARNESS, defines, "sparse_reach_merged_any")


@pytest.mark.parametrize("fixed", [-1, 300, 1000], ids=lambda m: "per brick" if m < 0 else f"margin {m}")
def test_merged_reach_slots_past_256_is_the_separate_launches(merged_any_harness, fixed):
    """``reach_slots`` against the separate launches at ``class_limit``'s limit of a closed box whose
    index a walk at 256 covers: per-brick margins up to ~650 cells (and one margin past 256) reach
    bricks, only the NaN speed's 2^30 counts as beyond."""
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)) + fixed)
    shape = (300, 221, 157)
    cap = 8
    used = np.array([1, 1, 0, 1, 1, 1, 1, 1], np.uint8)
    bricks = np.array([(0, 0, 0), (10, 7, 5), (1, 1, 1), (20, 12, 9), (-1, 2, 3), (37, 27, 19), (5, 26, 0),
                       (30, 3, 18)])
    occupied = (rng.random((cap, 512)) < 0.01).astype(np.uint8)
    occupied[1, [0, 7, 63, 448, 511]] = 1
    dt, gdt, h, base = 0.04, 9.81 * 0.04, 0.01, 1  # |v| 10 m/s → 42 cells
    speeds = rng.uniform(60.0, 160.0, cap).astype(np.float32)  # ~240–650 cells
    v2 = (speeds * speeds).astype(np.float32)
    v2[2] = np.nan  # a free slot's NaN: its used neighbours' margins 2^30
    nbr = rng.choice([-1, 0, 1, 3, 4, 5, 6, 7], (cap, 27))
    nbr[:, 13] = np.arange(cap)
    nbr[6, 0] = 2
    separate, margins, added, beyond, kept = run_merged(merged_any_harness, shape, fixed, used, bricks, occupied, v2,
                                                        nbr, (dt, gdt, h, base))
    assert added > 0 and kept[[0, 1, 3, 4, 5, 7]].all()  # every live slot but 6 reaches itself (6 reached by others)
    if fixed < 0:
        assert margins[6] == 1 << 30 and beyond == occupied[6].reshape(64, 8).any(axis=1).sum()
        assert margins[used.astype(bool)].max() == 1 << 30 and sorted(margins)[-3] > 256
    else:
        assert beyond == 0 and kept[6]
