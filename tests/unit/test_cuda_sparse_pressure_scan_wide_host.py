"""VOXFX_SPARSE_SCAN_WAY "1" (sparse_pressure_scan.SCAN_WAYS; helper s22a) on the host without a
GPU: scan_lookback_wide and scan_lookback_pair_wide — the tile read once into SCAN_VECS int4
vectors a thread, the look-back SCAN_WINDOW words a lane a step — give np.cumsum's integers
on each row (16-byte aligned rows: the vector loads and stores; unaligned ones: the same items
one by one) and leave ctrl ready for the next launch; the look-back over a status row of
published aggregates and prefixes adds up to the nearest prefix, in both windows. Mutants of
the tile's column carry and of the look-back's stop fail. One-thread blocks in ticket order
(tests/cuda_host.py): the warp scans and the 32-lane windows run on the device in
tests/gpu/test_flip_sparse_pressure_scan_wide_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_scan_join_host import PAIR, _pair_run
from tests.unit.test_cuda_sparse_pressure_setup_host import SCAN
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure_setup

_HEAD = SCAN.split("static void grid_launch")[0]
_INCLUDE = '#include "flip_sparse_pressure_scan.cu"'

# Input: rows n tile epoch off, then rows × n ints, twice (two launches in turn on the same
# status words); the rows start *off* ints into their arrays (off 1: not 16-byte aligned).
# Output: per launch the rows × n scans, then ctrl (epoch, ticket, done).
WIDE = _HEAD + r"""
int main() {
    int rows, n, tile, off;
    unsigned epoch;
    if (scanf("%d %d %d %u %d", &rows, &n, &tile, &epoch, &off) != 5) return 1;
    const unsigned tiles = (unsigned)((n + tile - 1) / tile);
    std::vector<unsigned long long> status((size_t)rows * tiles, 0);
    unsigned ctrl[3] = {epoch, 0, 0};
    for (int launch = 0; launch < 2; ++launch) {
        std::vector<int4> in_store(((size_t)rows * n + off + 3) / 4 + 1), out_store(in_store.size());
        int* in = reinterpret_cast<int*>(in_store.data()) + off;
        int* out = reinterpret_cast<int*>(out_store.data()) + off;
        for (size_t i = 0; i < (size_t)rows * n; ++i) { scanf("%d", in + i); out[i] = -7; }
        h_dim.x = 1; h_thread.x = 0; h_grid.x = rows * tiles; h_grid.y = 1;
        for (unsigned b = 0; b < rows * tiles; ++b) {
            h_block.x = b;
            scan_lookback_wide(in, n, tile, (int)tiles, rows, out, in, n, tile, 0, out, status.data(), ctrl);
        }
        for (size_t i = 0; i < (size_t)rows * n; ++i) printf("%d\n", out[i]);
    }
    printf("%u %u %u\n", ctrl[0], ctrl[1], ctrl[2]);
    return 0;
}
"""

# Input: t epoch, then t status words as "value prefix" (this epoch). Output: the look-back's
# exclusive prefix of tile t with a window of SCAN_WINDOW words and of one word.
LOOK = _HEAD + r"""
int main() {
    int t;
    unsigned epoch;
    if (scanf("%d %u", &t, &epoch) != 2) return 1;
    std::vector<unsigned long long> st(t + 1, 0);
    for (int j = 0; j < t; ++j) {
        int value, prefix;
        scanf("%d %d", &value, &prefix);
        st[j] = scan_word(epoch, prefix != 0, value);
    }
    h_dim.x = 1; h_thread.x = 0; h_block.x = 0;
    printf("%d %d\n", scan_look_back<SCAN_WINDOW>(st.data(), t, epoch), scan_look_back<1>(st.data(), t, epoch));
    return 0;
}
"""


def _with(tmp_path_factory, name, harness, old=None, new=None):
    """*harness* built; with *old* → *new* (once) in flip_sparse_pressure_scan.cu: a mutant."""
    if old is not None:
        text = (backend.CUDA_DIR / "flip_sparse_pressure_scan.cu").read_text()
        assert text.count(old) == 1, old
        d = tmp_path_factory.mktemp(name)
        (d / f"{name}.cu").write_text(text.replace(old, new))
        harness = harness.replace(_INCLUDE, f'#include "{d / f"{name}.cu"}"')
    return _build(tmp_path_factory, with_defines(harness, sparse_pressure_setup._K, ["#include <algorithm>"]))


# The mutants: a column's vectors without the columns before it in the tile; the look-back
# going on past the nearest published prefix.
_COLUMN = "        x[k] += total + earlier - v[k].w;\n"
_STOP = "            if (!found) {\n"


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    return _with(tmp_path_factory, "wide", WIDE)


@pytest.fixture(scope="module")
def wide_mutant(tmp_path_factory):
    return _with(tmp_path_factory, "wide_mutant", WIDE, _COLUMN, "        x[k] += earlier - v[k].w;\n")


def _wide_run(device, rows, n, tile, epoch, off, a):
    lines = [f"{rows} {n} {tile} {epoch} {off}", *map(str, a[0].ravel()), *map(str, a[1].ravel())]
    values = np.array(device.raw(lines).split(), np.int64)
    return [values[k * rows * n:(k + 1) * rows * n].reshape(rows, n) for k in range(2)], list(values[2 * rows * n:])


_step = lambda e: 1 if e == 2 ** 31 - 1 else e + 1  # noqa: E731


# (rows, n, tile, epoch, off): tiles of a one-thread block's 16 items (SCAN_VECS int4 vectors)
# or fewer, rows of a multiple of 4 (aligned: the int4 path) and not, a partial last vector.
_CASES = [(3, 1000, 16, 1, 0), (1, 1, 16, 5, 0), (2, 4096, 16, 2 ** 31 - 1, 0), (3, 1001, 16, 9, 0),
          (1, 517, 8, 3, 1), (2, 64, 12, 4, 0), (3, 70, 5, 6, 2), (1, 16, 16, 7, 0)]


@pytest.mark.parametrize("rows, n, tile, epoch, off", _CASES)
def test_wide_scan_gives_the_cumulative_sums_and_readies_the_next_launch(wide, wide_mutant, rows, n, tile, epoch,
                                                                         off):
    """scan_lookback_wide, launched twice on fresh rows (the second on the status words the
    first left): each row equals np.cumsum, ctrl ends at ticket 0, done 0, the epoch moved on
    twice; the mutant without the earlier columns' sums differs wherever a tile has a second
    column (tiles wider than 4 items)."""
    rng = np.random.default_rng(n * 31 + tile + off)
    a = [rng.integers(0, 4, (rows, n)).astype(np.int32) for _ in range(2)]
    got, ctrl = _wide_run(wide, rows, n, tile, epoch, off, a)
    for k in range(2):
        assert np.array_equal(got[k], np.cumsum(a[k], axis=1)), k
    assert ctrl == [_step(_step(epoch)), 0, 0]
    if tile > 4 and n > 4:
        bad, _ = _wide_run(wide_mutant, rows, n, tile, epoch, off, a)
        assert not all(np.array_equal(bad[k], got[k]) for k in range(2))


@pytest.fixture(scope="module")
def pair_wide(tmp_path_factory):
    return _with(tmp_path_factory, "pair_wide", PAIR.replace("scan_lookback_pair(", "scan_lookback_pair_wide("))


# (rows_a, n_a, n_b, tile, epoch): a level's two flag rows and the next level's take; uneven sets.
_PAIRS = [(2, 5000, 5000, 16, 1), (2, 1, 1, 16, 7), (1, 70, 3000, 16, 2 ** 31 - 1), (3, 2049, 17, 8, 9),
          (2, 4096, 4093, 16, 3)]


@pytest.mark.parametrize("rows_a, n_a, n_b, tile, epoch", _PAIRS)
def test_wide_paired_scan_is_each_sets_cumulative_sums(pair_wide, rows_a, n_a, n_b, tile, epoch):
    """scan_lookback_pair_wide (two launches in turn, as scan_lookback_pair's host test): A's rows
    and B's row each equal np.cumsum; ctrl ready for the next launch."""
    rng = np.random.default_rng(n_a * 7 + n_b + tile)
    a = [rng.integers(0, 2, (rows_a, n_a)).astype(np.int32) for _ in range(2)]
    b = [rng.integers(0, 2, n_b).astype(np.int32) for _ in range(2)]
    got, ctrl = _pair_run(pair_wide, rows_a, n_a, tile, n_b, tile, epoch, a, b)
    assert ctrl == [_step(_step(epoch)), 0, 0]
    for k in range(2):
        assert np.array_equal(got[k][0], np.cumsum(a[k], axis=1)), k
        assert np.array_equal(got[k][1], np.cumsum(b[k])), k


@pytest.fixture(scope="module")
def look(tmp_path_factory):
    return _with(tmp_path_factory, "look", LOOK)


@pytest.fixture(scope="module")
def look_mutant(tmp_path_factory):
    return _with(tmp_path_factory, "look_mutant", LOOK, _STOP, "            if (true) {\n")


def _look_run(device, t, epoch, values, prefix):
    lines = [f"{t} {epoch}", *(f"{v} {int(p)}" for v, p in zip(values, prefix))]
    return [int(x) for x in device.raw(lines).split()]


@pytest.mark.parametrize("t, share, seed", [(1, 0.0, 1), (9, 0.0, 2), (40, 0.1, 3), (40, 0.5, 4), (200, 0.02, 5),
                                            (7, 1.0, 6)])
def test_look_back_adds_the_aggregates_up_to_the_nearest_prefix(look, look_mutant, t, share, seed):
    """A status row of published words (aggregates, and prefixes at random with *share*): the
    look-back of tile t, with a window of SCAN_WINDOW words a lane and of one, is the sum of the
    words from t − 1 down to the nearest prefix (that one included; all of them where none);
    the mutant that reads on past that prefix does not (where a prefix has words before it)."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 5000, t)
    prefix = rng.random(t) < share
    nearest = max((j for j in range(t) if prefix[j]), default=0)
    want = int(values[nearest:].sum())
    assert _look_run(look, t, 12, values, prefix) == [want, want]
    if prefix.any() and values[:nearest].sum() > 0 and nearest > 0:
        assert _look_run(look_mutant, t, 12, values, prefix)[0] != want
