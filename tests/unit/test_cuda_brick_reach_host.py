"""``brick_reach`` (cuda/flip_sparse_transfer.cu) at reach radii 1–8: the runs of reached
brick offsets OR-ed into the masks word by word (at most two words a run, flushed when the
word changes) give the bits of a brute force over every occupied cell's box (cell ± its
slot's margin), in closed and open domains, with margins near each radius's limit and one
past it (counted as beyond, the caller's fall-back). Built as host code like
tests/unit/test_cuda_sparse_flip_host.py (its prelude: the same stubs and sources)."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import build_ints, kernel_defines
from voxfx.kernels.flip import sparse_gpu

# After cap (long long): per slot "used bx by bz margin", then per slot 512 occupied bytes
# (slot_lines writes them): used, occupied, coords, margins. Shared with the reach by classes
# (test_cuda_sparse_reach_host.py).
READ_SLOTS = r"""
    std::vector<unsigned char> used(cap), occupied(cap * 512);
    std::vector<int> coords(3 * cap), margins(cap);
    for (long long s = 0; s < cap; ++s) {
        int u;
        scanf("%d %d %d %d %d", &u, &coords[3 * s], &coords[3 * s + 1], &coords[3 * s + 2], &margins[s]);
        used[s] = (unsigned char)u;
    }
    for (auto& x : occupied) { int t; scanf("%d", &t); x = (unsigned char)t; }
"""

# Input: closed nx ny nz radius cap; per slot: used, bx by bz, margin; per slot 512 occupied bytes.
# Output: beyond, then the cap · reach_words(radius) mask words.
HARNESS = STUBS + '#include "flip_sparse_topology.cu"\n' + DRIVER + r"""
int main() {
    int closed, nx, ny, nz, radius;
    long long cap;
    if (scanf("%d %d %d %d %d %lld", &closed, &nx, &ny, &nz, &radius, &cap) != 6) return 1;
""" + READ_SLOTS + r"""    const int side = 2 * radius + 1, words = (side * side * side + 31) / 32;
    std::vector<unsigned int> mask(words * cap, 0u);
    unsigned long long beyond = 0;
    for (long long t = 0; t < 64 * cap; ++t) {
        at(t);
        brick_reach(occupied.data(), used.data(), coords.data(), cap, margins.data(), closed, nx, ny, nz, radius,
                    mask.data(), &beyond);
    }
    printf("%llu\n", beyond);
    for (unsigned int w : mask) printf("%u\n", w);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_ints(tmp_path_factory, HARNESS, kernel_defines(sparse_gpu.KERNELS), "brick_reach")


def slot_lines(used, bricks, margins, occupied):
    """READ_SLOTS' lines: each slot's used flag, brick coordinates and margin, then the
    occupied bytes of every slot's 512 cells."""
    return [*(f"{used[s]} {bricks[s][0]} {bricks[s][1]} {bricks[s][2]} {margins[s]}" for s in range(len(used))),
            " ".join(str(int(x)) for x in occupied.ravel())]


def brute_masks(closed, shape, radius, used, coords, margins, occupied):
    """The mask words by loops: every occupied cell's box, clipped to [−1, n] when closed,
    sets the bit of each brick offset it reaches."""
    side = 2 * radius + 1
    words = -(-side ** 3 // 32)
    out = np.zeros((len(used), words), np.uint32)
    for s in range(len(used)):
        if not used[s] or margins[s] > 8 * radius:
            continue
        m = int(margins[s])
        for local in np.flatnonzero(occupied[s]):
            c = [int(coords[s][0]) * 8 + local % 8, int(coords[s][1]) * 8 + (local // 8) % 8,
                 int(coords[s][2]) * 8 + local // 64]
            lo = [x - m for x in c]
            hi = [x + m for x in c]
            if closed:
                lo = [max(x, -1) for x in lo]
                hi = [min(hi[a], shape[a]) for a in range(3)]
            for bz in range(lo[2] >> 3, (hi[2] >> 3) + 1):
                for by in range(lo[1] >> 3, (hi[1] >> 3) + 1):
                    for bx in range(lo[0] >> 3, (hi[0] >> 3) + 1):
                        d = (bx - coords[s][0] + radius, by - coords[s][1] + radius, bz - coords[s][2] + radius)
                        o = (d[2] * side + d[1]) * side + d[0]
                        out[s, o >> 5] |= np.uint32(1 << (o & 31))
    return out


@pytest.mark.parametrize("radius", [1, 2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
def test_brick_reach_sets_the_bits_of_every_occupied_cells_box(harness, closed, radius):
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)) + radius)
    shape = (40, 33, 27)
    cap = 6
    used = np.array([1, 1, 0, 1, 1, 1], np.uint8)  # a free slot takes no part
    bricks = np.array([(0, 0, 0), (2, 1, 1), (1, 1, 1), (4, 3, 2), (-1, 2, 3), (3, 4, 0)])
    if closed:
        bricks = np.clip(bricks, -1, np.array([(n >> 3) for n in shape]))
    top = 8 * radius
    margins = np.array([top, max(0, top - 7), 1 + 8 * (radius - 1), top + 1, rng.integers(0, top + 1), top])
    occupied = (rng.random((cap, 512)) < 0.02).astype(np.uint8)
    occupied[1] = 0
    occupied[1, [0, 7, 63, 448, 511]] = 1  # the corner cells: the runs' ends
    lines = [f"{int(closed)} {shape[0]} {shape[1]} {shape[2]} {radius} {cap}"]
    lines += slot_lines(used, bricks, margins, occupied)
    out = harness(lines)
    beyond, words = out[0], np.array(out[1:], np.uint32).reshape(cap, -1)
    assert beyond == occupied[3].reshape(64, 8).any(axis=1).sum()  # slot 3's margin is past 8R: its rows
    want = brute_masks(closed, shape, radius, used, bricks, margins, occupied)
    assert (want[0] != 0).sum() >= min(radius, 2) and not want[2].any() and not want[3].any()
    assert np.array_equal(words, want)
