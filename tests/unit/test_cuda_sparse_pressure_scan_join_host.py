"""VOXFX_SPARSE_SCAN_JOIN "1" (sparse_pressure_scan.inclusive_scans,
sparse_pressure_workspace_levels._pairing) on the host without a GPU: scan_lookback_pair
gives each of its two row sets the integers of np.cumsum (and of scan_lookback's own launch)
and leaves ctrl ready for the next launch, and mgs_level_cells_coarsen — its blocks in
reverse order — writes what mgs_level_cells and mgs_coarsen write launched apart. Mutants of
both fail. The device run: tests/gpu/test_flip_sparse_pressure_scan_join_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_setup_host import SCAN, SCAN_LOOKBACK, SETUP
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure_scan, sparse_pressure_setup
from voxfx.kernels.flip.sparse_multigrid import _pack

# Input: rows_a n_a tile_a, n_b tile_b, epoch; then rows_a × n_a and n_b ints, twice (two
# launches in turn on the same status words). Output: per launch A's scans then B's; then
# ctrl (epoch, ticket, done). One-thread blocks in ticket order (as SCAN_LOOKBACK's).
PAIR = SCAN.split("static void grid_launch")[0] + r"""
int main() {
    int rows_a, n_a, tile_a, n_b, tile_b;
    unsigned epoch;
    if (scanf("%d %d %d %d %d %u", &rows_a, &n_a, &tile_a, &n_b, &tile_b, &epoch) != 6) return 1;
    const int tiles_a = (n_a + tile_a - 1) / tile_a, tiles_b = (n_b + tile_b - 1) / tile_b;
    const unsigned blocks = (unsigned)(rows_a * tiles_a + tiles_b);
    std::vector<unsigned long long> status(blocks, 0);
    unsigned ctrl[3] = {epoch, 0, 0};
    for (int launch = 0; launch < 2; ++launch) {
        std::vector<int> a((size_t)rows_a * n_a), b(n_b), oa(a.size(), -7), ob(n_b, -7);
        for (auto& v : a) scanf("%d", &v);
        for (auto& v : b) scanf("%d", &v);
        h_dim.x = 1; h_thread.x = 0; h_grid.x = blocks; h_grid.y = 1;
        for (unsigned k = 0; k < blocks; ++k) {
            h_block.x = k;
            scan_lookback_pair(a.data(), n_a, tile_a, tiles_a, rows_a, oa.data(), b.data(), n_b, tile_b, tiles_b,
                               ob.data(), status.data(), ctrl);
        }
        for (int v : oa) printf("%d\n", v);
        for (int v : ob) printf("%d\n", v);
    }
    printf("%u %u %u\n", ctrl[0], ctrl[1], ctrl[2]);
    return 0;
}
"""

# The mutant reads A's rows for B's tiles (in bounds where B's row is no longer than A's rows).
_B_INPUT = "    const int* a = (in_first ? in_a : in_b) + (size_t)row * n;\n"


def _mutated(tmp_path_factory, name, old, new):
    """flip_sparse_pressure_scan.cu with *old* (once) replaced by *new*, as an include path."""
    text = (backend.CUDA_DIR / "flip_sparse_pressure_scan.cu").read_text()
    assert text.count(old) == 1
    d = tmp_path_factory.mktemp(name)
    (d / f"{name}.cu").write_text(text.replace(old, new))
    return str(d / f"{name}.cu")


@pytest.fixture(scope="module")
def pair_device(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(PAIR, sparse_pressure_setup._K, ["#include <algorithm>"]))


@pytest.fixture(scope="module")
def pair_mutant(tmp_path_factory):
    path = _mutated(tmp_path_factory, "pair_mutant", _B_INPUT, "    const int* a = in_a + (size_t)row * n;\n")
    source = PAIR.replace('#include "flip_sparse_pressure_scan.cu"', f'#include "{path}"')
    assert source != PAIR
    return _build(tmp_path_factory, with_defines(source, sparse_pressure_setup._K, ["#include <algorithm>"]))


@pytest.fixture(scope="module")
def pair_carry_mutant(tmp_path_factory):
    """scan_lookback_pair without the carry from one chunk of its tile to the next (the one
    body every entry calls: scan_tile_chunks')."""
    text = (backend.CUDA_DIR / "flip_sparse_pressure_scan.cu").read_text()
    carry = "            carry += part[k];\n"
    assert text.count(carry) == 1
    d = tmp_path_factory.mktemp("pair_carry_mutant")
    (d / "pair_carry_mutant.cu").write_text(text.replace(carry, ""))
    source = PAIR.replace('#include "flip_sparse_pressure_scan.cu"', f'#include "{d / "pair_carry_mutant.cu"}"')
    return _build(tmp_path_factory, with_defines(source, sparse_pressure_setup._K, ["#include <algorithm>"]))


@pytest.fixture(scope="module")
def lookback_device(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(SCAN_LOOKBACK, sparse_pressure_setup._K, ["#include <algorithm>"]))


def _pair_run(device, rows_a, n_a, tile_a, n_b, tile_b, epoch, a, b):
    lines = [f"{rows_a} {n_a} {tile_a} {n_b} {tile_b} {epoch}"]
    for k in range(2):
        lines += [*map(str, a[k].ravel()), *map(str, b[k].ravel())]
    values = np.array(device.raw(lines).split(), np.int64)
    out, at = [], 0
    for _ in range(2):
        mid = at + rows_a * n_a
        out.append((values[at:mid].reshape(rows_a, n_a), values[mid:mid + n_b]))
        at = mid + n_b
    return out, list(values[at:])


# (rows_a, n_a, n_b, epoch): the coarse levels' shapes (a level's 2 flag rows and the next
# level's take, as long) at the default tile floor, and uneven ones on small tiles.
_CASES = [(2, 5000, 5000, 1), (2, 1, 1, 7), (2, 4096, 4096, 2 ** 31 - 1), (1, 70, 3000, 3), (3, 2049, 17, 9)]


@pytest.mark.parametrize("rows_a, n_a, n_b, epoch", _CASES)
@pytest.mark.parametrize("floor", ["8", "1"])
def test_the_paired_scan_is_each_sets_cumulative_sums(pair_device, pair_mutant, pair_carry_mutant, lookback_device,
                                                     rows_a, n_a, n_b, epoch, floor):
    """scan_lookback_pair, launched twice on fresh rows (the second on the status words the
    first left), on the tiles inclusive_scans picks (floor "8": sparse_pressure_scan.scan_tile;
    "1": 256-item tiles, many tiles a row): A's rows and B's row each equal np.cumsum — and
    scan_lookback's own launch of the same rows —, ctrl ends at ticket 0, done 0, the epoch
    moved on twice; the mutants that read A's rows for B's tiles or drop the carry between a
    tile's chunks do not."""
    rng = np.random.default_rng(n_a * 7 + n_b)
    a = [rng.integers(0, 2, (rows_a, n_a)).astype(np.int32) for _ in range(2)]
    b = [rng.integers(0, 2, n_b).astype(np.int32) for _ in range(2)]
    tile_a, tile_b = (sparse_pressure_scan.scan_tile(n, int(floor)) for n in (n_a, n_b))
    got, ctrl = _pair_run(pair_device, rows_a, n_a, tile_a, n_b, tile_b, epoch, a, b)
    step = lambda e: 1 if e == 2 ** 31 - 1 else e + 1  # noqa: E731
    assert ctrl == [step(step(epoch)), 0, 0]
    for k in range(2):
        assert np.array_equal(got[k][0], np.cumsum(a[k], axis=1)), k
        assert np.array_equal(got[k][1], np.cumsum(b[k])), k
        alone = lookback_device.raw([f"{rows_a} {n_a} {tile_a} 1", *map(str, a[k].ravel()), *map(str, a[k].ravel())])
        assert np.array_equal(np.array(alone.split()[:rows_a * n_a], np.int64), got[k][0].ravel()), k
    if max(n_a, n_b) > 8:  # more than one chunk of 8 items (one-thread blocks) in a tile
        bad, _ = _pair_run(pair_carry_mutant, rows_a, n_a, tile_a, n_b, tile_b, epoch, a, b)
        assert not all(np.array_equal(bad[k][0], got[k][0]) and np.array_equal(bad[k][1], got[k][1])
                       for k in range(2))
    if n_b > rows_a * n_a or n_b == 1:
        return  # the mutant would read past A's rows (or B's one item may match)
    bad, _ = _pair_run(pair_mutant, rows_a, n_a, tile_a, n_b, tile_b, epoch, a, b)
    assert not all(np.array_equal(bad[k][1], got[k][1]) for k in range(2))


# Input: bound bx by bz n, n keys, n fluid flags. Output: mgs_level_cells' around, diag, cls,
# flags and mgs_coarsen's flag and take (the next level's, over the same bound), launched apart
# in block order, then the same by mgs_level_cells_coarsen, its blocks in reverse order.
JOINED = SETUP.split("typedef long long ll;")[0] + r"""
#include <algorithm>
typedef long long ll;
static void print_all(const std::vector<int>& around, const std::vector<unsigned char>& diag,
                      const std::vector<unsigned char>& cls, const std::vector<int>& flags,
                      const std::vector<unsigned char>& flag, const std::vector<int>& take) {
    for (int v : around) printf("%d\n", v);
    for (int v : diag) printf("%d\n", v);
    for (int v : cls) printf("%d\n", v);
    for (int v : flags) printf("%d\n", v);
    for (int v : flag) printf("%d\n", v);
    for (int v : take) printf("%d\n", v);
}
int main() {
    int bound, bx, by, bz, n;
    if (scanf("%d %d %d %d %d", &bound, &bx, &by, &bz, &n) != 5) return 1;
    std::vector<ll> keys(std::max(bound, 1), -1);
    std::vector<unsigned char> fluid(std::max(bound, 1), 7);
    for (int c = 0; c < n; ++c) scanf("%lld", &keys[c]);
    for (int c = 0; c < n; ++c) { int t; scanf("%d", &t); fluid[c] = (unsigned char)t; }
    int cnt[4] = {n, 0, 0, 0};
    for (int way = 0; way < 2; ++way) {
        std::vector<int> around(6 * (size_t)bound, -7), flags(2 * (size_t)bound, -7), take(bound, -7);
        std::vector<unsigned char> diag(bound, 99), cls(bound, 9), flag(bound, 9);
        h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)bound;
        if (way == 0) {
            for (int k = 0; k < bound; ++k) {
                h_block.x = k;
                mgs_level_cells(keys.data(), fluid.data(), cnt, bound, bx, by, bz, around.data(), diag.data(),
                                cls.data(), flags.data());
            }
            for (int k = 0; k < bound; ++k) {
                h_block.x = k;
                mgs_coarsen(keys.data(), fluid.data(), cnt, bound, bx, by, bz, flag.data(), take.data());
            }
        } else {
            for (int k = bound; k-- > 0;) {
                h_block.x = k;
                mgs_level_cells_coarsen(keys.data(), fluid.data(), cnt, bound, bx, by, bz, around.data(),
                                        diag.data(), cls.data(), flags.data(), bound, flag.data(), take.data());
            }
        }
        print_all(around, diag, cls, flags, flag, take);
    }
    return 0;
}
"""

_COARSEN_CALL = "    mgs_coarsen_body(keys, fluid, cnt, nbound, bx, by, bz, nflag, ntake);\n}\n"


@pytest.fixture(scope="module")
def joined_device(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(JOINED, sparse_pressure_setup._K))


@pytest.fixture(scope="module")
def joined_mutant(tmp_path_factory):
    text = (backend.CUDA_DIR / "flip_sparse_pressure_setup.cu").read_text()
    at = text.index("mgs_level_cells_coarsen(")
    assert text.count(_COARSEN_CALL, at) == 1 or text[at:].count(_COARSEN_CALL) >= 1
    body = text[at:].replace(_COARSEN_CALL, "    mgs_coarsen_body(keys, fluid, cnt, nbound / 2, bx, by, bz, nflag, "
                                            "ntake);\n}\n", 1)
    d = tmp_path_factory.mktemp("joined_mutant")
    (d / "setup_mutant.cu").write_text(text[:at] + body)
    source = JOINED.replace('#include "flip_sparse_pressure_setup.cu"', f'#include "{d / "setup_mutant.cu"}"')
    assert source != JOINED
    return _build(tmp_path_factory, with_defines(source, sparse_pressure_setup._K))


def _level_set(seed, side, fill, fluid_share, pad):
    """A sorted key set of a random share *fill* of a side³ box (base (−2, −2, −2)), its FLUID
    flags, and the launch bound (the set's size + *pad*)."""
    rng = np.random.default_rng(seed)
    ijk = np.argwhere(rng.random((side, side, side)) < fill)
    base = (-2, -2, -2)
    keys = np.sort(np.array([_pack(i, j, k, base) for k, j, i in ijk], np.int64))
    fluid = (rng.random(len(keys)) < fluid_share).astype(np.int32)
    return base, keys, fluid, len(keys) + pad


def _joined_run(device, base, keys, fluid, bound):
    lines = [f"{bound} {base[0]} {base[1]} {base[2]} {len(keys)}", *map(str, keys), *map(str, fluid)]
    values = np.array(device.raw(lines).split(), np.int64)
    half = len(values) // 2
    return values[:half], values[half:]


@pytest.mark.parametrize("seed, side, fill, fluid_share, pad", [(1, 8, 0.9, 0.9, 0), (2, 10, 0.7, 0.8, 5),
                                                                (3, 6, 1.0, 1.0, 3), (4, 10, 0.85, 0.5, 1)])
def test_level_cells_with_the_next_coarsen_is_both_kernels_apart(joined_device, joined_mutant, seed, side, fill,
                                                                 fluid_share, pad):
    """mgs_level_cells_coarsen (blocks in reverse order) writes the level's around, diag, cls
    and flags and the next level's flag and take exactly as mgs_level_cells and mgs_coarsen
    launched apart; the scene has unknowns and coarse cells (the check sees both parts); the
    mutant coarsening half the bound differs."""
    base, keys, fluid, bound = _level_set(seed, side, fill, fluid_share, pad)
    apart, joined = _joined_run(joined_device, base, keys, fluid, bound)
    assert np.array_equal(apart, joined)
    take = apart[-bound:]
    flags = apart[-(2 * bound + 2 * bound):-2 * bound]
    assert take.sum() > 0 and flags.sum() > 0
    _, bad = _joined_run(joined_mutant, base, keys, fluid, bound)
    assert not np.array_equal(apart, bad)


def test_the_scan_join_switch_reads_the_environment(monkeypatch):
    from voxfx.kernels.flip import sparse_pressure_workspace_levels as levels

    monkeypatch.delenv("VOXFX_SPARSE_SCAN_JOIN", raising=False)
    assert sparse_pressure_scan.scan_join() == "1"  # the default since session 22
    assert levels._pairing()
    monkeypatch.setenv("VOXFX_SPARSE_SCAN_JOIN", "1")
    assert levels._pairing()
    monkeypatch.setenv("VOXFX_SPARSE_SCAN_JOIN", "0")
    assert not levels._pairing()
