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
