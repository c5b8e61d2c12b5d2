"""``SparseMacGrid.retopologize``'s fill of fresh and freed slots (cuda/sparse.cu ``fill_slots_f32``,
``fill_slots_u8``): one launch for both slot lists (a slot may be in both: a freed slot reused)
sets every cell of their slots to the value and no other cell, as the NumPy path's fill of each
list. Built as host code (tests/cuda_host.py)."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import build_ints

# Input: cap m1 m2, the first list, the second list. Output: the f32 channel's cells (as ints), then the u8's.
HARNESS = STUBS + '#include "sparse.cu"\n' + DRIVER + r"""
int main() {
    ll cap, m1, m2;
    if (scanf("%lld %lld %lld", &cap, &m1, &m2) != 3) return 1;
    std::vector<int> first(m1 ? m1 : 1), second(m2 ? m2 : 1);
    for (ll i = 0; i < m1; ++i) scanf("%d", &first[i]);
    for (ll i = 0; i < m2; ++i) scanf("%d", &second[i]);
    std::vector<float> f(cap * SPARSE_CELLS);
    std::vector<unsigned char> u(cap * SPARSE_CELLS);
    for (ll i = 0; i < cap * SPARSE_CELLS; ++i) { f[i] = (float)(i % 1000); u[i] = (unsigned char)(i % 200); }
    LAUNCH((m1 + m2) * SPARSE_CELLS, fill_slots_f32(f.data(), first.data(), m1, m2 ? second.data() : first.data(), m2,
                                                    -3.0f));
    LAUNCH((m1 + m2) * SPARSE_CELLS, fill_slots_u8(u.data(), first.data(), m1, m2 ? second.data() : first.data(), m2,
                                                   (unsigned char)255));
    for (float x : f) printf("%d\n", (int)x);
    for (unsigned char x : u) printf("%d\n", (int)x);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_ints(tmp_path_factory, HARNESS, (), "sparse_fill")


@pytest.mark.parametrize("lists", [([3, 0, 7], [5, 7]), ([2, 6], []), ([], [1])], ids=["both", "first", "second"])
def test_one_fill_for_both_slot_lists_sets_their_cells_only(harness, lists):
    cap = 9
    first, second = lists
    out = harness([f"{cap} {len(first)} {len(second)}", " ".join(map(str, first)), " ".join(map(str, second))])
    cells = np.arange(cap * 512)
    f, u = out[:cap * 512], out[cap * 512:]
    hit = np.isin(cells // 512, first + second)
    assert hit.sum() == 512 * len(set(first + second))
    assert np.array_equal(f, np.where(hit, -3, cells % 1000))
    assert np.array_equal(u, np.where(hit, 255, cells % 200))


# The joined kernels (retopologize's kept channels, ``sparse_join.join_kept``): three channels — f32 (from
# i % 1000), u8 (from i % 200), f32 (from i · 3) — grow from `old` to `cap` slots (copy_channels_joined),
# their new slots 0x55 bytes first (an uninitialised array's stand-in), then the fill of both lists with the
# backgrounds -3.0f, 255 and NaN. Input: old cap m1 m2, the lists. Output: each channel's cells as unsigned
# 32-bit words (the f32 bits) or bytes.
JOINED = STUBS + '#include "sparse.cu"\n' + DRIVER + r"""
int main() {
    ll old, cap, m1, m2;
    if (scanf("%lld %lld %lld %lld", &old, &cap, &m1, &m2) != 4) return 1;
    std::vector<int> first(m1 ? m1 : 1), second(m2 ? m2 : 1);
    for (ll i = 0; i < m1; ++i) scanf("%d", &first[i]);
    for (ll i = 0; i < m2; ++i) scanf("%d", &second[i]);
    const ll before = old * SPARSE_CELLS, cells = cap * SPARSE_CELLS;
    std::vector<float> a(before), c(before), ga(cells), gc(cells);
    std::vector<unsigned char> b(before), gb(cells, 0x55);
    std::memset(ga.data(), 0x55, 4 * cells);
    std::memset(gc.data(), 0x55, 4 * cells);
    for (ll i = 0; i < before; ++i) { a[i] = (float)(i % 1000); b[i] = (unsigned char)(i % 200); c[i] = 3.0f * i; }
    void* none = nullptr;
    LAUNCH(before, copy_channels_joined(before, 3, 2, a.data(), b.data(), c.data(), none, none, none, none, none,
                                        ga.data(), gb.data(), gc.data(), none, none, none, none, none));
    const float nan = std::nanf("");
    LAUNCH((m1 + m2) * SPARSE_CELLS, fill_slots_joined(first.data(), m1, m2 ? second.data() : first.data(), m2, 3, 2,
                                                       ga.data(), gb.data(), gc.data(), none, none, none, none, none,
                                                       host_float_as_uint(-3.0f), 255u, host_float_as_uint(nan),
                                                       0u, 0u, 0u, 0u, 0u));
    for (float x : ga) printf("%u\n", host_float_as_uint(x));
    for (unsigned char x : gb) printf("%u\n", (unsigned)x);
    for (float x : gc) printf("%u\n", host_float_as_uint(x));
    return 0;
}
"""


@pytest.fixture(scope="module")
def joined(tmp_path_factory):
    return build_ints(tmp_path_factory, JOINED, (), "sparse_fill_joined")


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32).astype(np.int64)


@pytest.mark.parametrize("old, cap, lists", [(6, 9, ([3, 7, 6, 8], [5, 7])), (9, 9, ([2, 6], [])),
                                             (5, 9, ([], [1]))], ids=["grown-both", "kept-first", "grown-second"])
def test_joined_copy_and_fill_give_each_channels_copy_and_fill(joined, old, cap, lists):
    """One copy and one fill launch for three channels set what ``_copy_into`` and ``_fill_slots``
    of each do: the old cells copied (f32 bits, bytes), the listed slots' cells their background
    (the NaN's bits), every other grown cell as it was."""
    first, second = lists
    out = joined([f"{old} {cap} {len(first)} {len(second)}", " ".join(map(str, first)), " ".join(map(str, second))])
    cells, before = cap * 512, old * 512
    i = np.arange(cells)
    hit = np.isin(i // 512, first + second)
    grown = i >= before
    want_a = np.where(hit, _bits(-3.0), np.where(grown, 0x55555555, _bits(i % 1000)))
    want_b = np.where(hit, 255, np.where(grown, 0x55, i % 200))
    want_c = np.where(hit, _bits(np.nan), np.where(grown, 0x55555555, _bits(3.0 * i)))
    assert np.array_equal(out, np.concatenate([want_a, want_b, want_c]))
