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
    d = [(n >> 3) + 2 for n in shape]
    index = np.full(d[0] * d[1] * d[2], -1, np.int64)
    entry = [((b[2] + 1) * d[1] + b[1] + 1) * d[0] + b[0] + 1 for b in bricks]
    for s in range(cap):
        if used[s]:
            index[entry[s]] = s
    others = rng.choice(index.size, 300, replace=False)  # bricks in use whose slots hold no particle
    index[others[index[others] < 0]] = cap  # slot cap: no kept byte (the harness's kept is cap long)
    index[index == cap] = -1 if top % 2 else cap - 3  # or slot 5's
    lines = [f"{shape[0]} {shape[1]} {shape[2]} {cap}"]
    lines += slot_lines(used, bricks, margins, occupied)
    lines.append(" ".join(str(int(x)) for x in index))
    out = harness(lines)
    beyond, added = out[0], out[1]
    kept = np.array(out[2:2 + cap], np.uint8)
    claimed = np.array(out[2 + cap:], np.uint32)
    assert beyond == occupied[3].reshape(64, 8).any(axis=1).sum()  # slot 3's margin is past the limit: its rows
    reached = brute_reached(shape, used, bricks, margins, occupied, limit)
    want_claimed = reached & (index < 0)
    want_kept = np.zeros(cap, np.uint8)
    want_kept[np.unique(index[reached & (index >= 0)])] = 1
    assert reached.sum() > 27 and want_claimed.any()
    assert np.array_equal(claimed != 0, want_claimed)
    assert added == want_claimed.sum()
    assert np.array_equal(kept, want_kept)
