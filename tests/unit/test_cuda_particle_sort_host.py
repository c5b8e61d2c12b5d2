"""The particle sort's kernels (cuda/flip_particle_sort.cu) give particle_sort.py's NumPy keys and
disorder: ``particle_brick_keys`` over particles in and around the key frame (outside it,
clamped; non-finite, last), closed and open; ``key_jumps`` the particles whose cell is not
beside the one before them. Built as host code like tests/unit/test_cuda_push_out_host.py."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import _build
from voxfx.kernels.flip import particle_sort
from voxfx.kernels.grid import GridSpec

# Input: n, origin (3), h, lo (3 floats), bricks (3), local, last, then the positions (3n).
# Output: each particle's key, then the count key_jumps adds.
HARNESS = STUBS + '#include "flip_particle_sort.cu"\n' + DRIVER + r"""
int main() {
    long long n;
    if (scanf("%lld", &n) != 1) return 1;
    const float ox = rf(), oy = rf(), oz = rf(), h = rf(), lx = rf(), ly = rf(), lz = rf();
    int bx, by, bz, local, last;
    if (scanf("%d %d %d %d %d", &bx, &by, &bz, &local, &last) != 5) return 1;
    std::vector<float> pos(3 * n);
    for (auto& x : pos) x = rf();
    std::vector<int> key(n);
    LAUNCH(n, particle_brick_keys(pos.data(), n, ox, oy, oz, h, lx, ly, lz, bx, by, bz, local, last, key.data()));
    unsigned long long jumps = 0;
    LAUNCH(n + 1, key_jumps(key.data(), n, bx, by, &jumps));
    pr(key);
    printf("%llu\n", jumps);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    build = _build(tmp_path_factory, HARNESS, [], "particle_sort")
    return lambda lines: np.array(build(lines), np.int64)


def keys_by_kernel(harness, pos, spec, closed, reach, local=True):
    lo, (bx, by, bz) = particle_sort.key_frame(spec, closed, reach)
    last = bx * by * bz * (512 if local else 1)
    lines = [str(len(pos))] + [float(np.float32(v)).hex() for v in (*spec.origin, spec.voxel_size, *lo)]
    lines += [f"{bx} {by} {bz} {int(local)} {last}"] + [float(v).hex() for v in pos.reshape(-1)]
    out = harness(lines)
    return out[:-1], int(out[-1])


@pytest.mark.parametrize("closed", [True, False])
def test_the_kernels_give_the_numpy_keys_and_runs(harness, closed):
    rng = np.random.default_rng(9)
    spec = GridSpec((0.35, -1.1, 0.02), 0.07, (37, 20, 29))
    extent = np.asarray(spec.shape) * np.float32(spec.voxel_size)
    pos = (np.asarray(spec.origin) + rng.uniform(-0.3, 1.3, (5000, 3)) * extent).astype(np.float32)
    pos[::7] = pos[::7][:, :] * 0 + pos[0]  # repeated cells: runs
    cells = np.floor((pos - np.float32(spec.origin)) / np.float32(spec.voxel_size))
    edge = (cells + rng.integers(0, 2, cells.shape)) * np.float32(spec.voxel_size) + np.float32(spec.origin)
    pos[1::5] = edge[1::5].astype(np.float32)  # on cell borders
    pos[::97, 1] = np.nan
    pos[::101, 2] = -np.inf
    pos[3000:] = pos[3000:][np.argsort(particle_sort.brick_keys(pos[3000:], spec, closed, 0.3, np), kind="stable")]
    pos[3500:3700] += np.float32(spec.voxel_size) * rng.integers(-1, 2, (200, 3)).astype(np.float32)  # beside
    got, jumps = keys_by_kernel(harness, pos, spec, closed, 0.3)
    want = particle_sort.brick_keys(pos, spec, closed, 0.3, np)
    assert want.dtype == np.int32 and np.array_equal(got, want)
    assert len(np.unique(want)) > 500 and (want == want.max()).sum() >= 50  # many cells; non-finite last
    share = particle_sort.disorder(want, spec, closed, 0.3, np)
    assert jumps / (len(pos) - 1) == share and 0.05 < share < 0.95  # random, then sorted and moved a cell
