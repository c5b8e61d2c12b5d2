"""The particle sort's kernels (cuda/flip_particle_sort.cu) give particle_sort.py's NumPy keys and
disorder: ``particle_brick_keys`` over particles in and around the key frame (outside it,
clamped; non-finite, last), closed and open; ``key_jumps`` the particles whose cell is not
beside the one before them; ``gather_particles`` every array's ``x[order]`` in one launch,
through argsort's int64 order (helper i24o2). Built as host code like tests/unit/test_cuda_push_out_host.py."""

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


# Input: n, apic, argsort's order (n), then pos (3n), vel (3n), C (9n, with apic) as floats.
# Output: the arrays gather_particles moves through argsort's order (pos, vel[, C]; %a floats).
GATHER = STUBS + '#include "flip_particle_sort.cu"\n' + DRIVER + r"""
int main() {
    long long n;
    int apic;
    if (scanf("%lld %d", &n, &apic) != 2) return 1;
    std::vector<long long> order(n);
    for (auto& o : order) if (scanf("%lld", &o) != 1) return 1;
    std::vector<float> pos(3 * n), vel(3 * n), c(apic ? 9 * n : 1, 0.0f);
    for (auto& x : pos) x = rf();
    for (auto& x : vel) x = rf();
    if (apic) for (auto& x : c) x = rf();
    std::vector<float> spos(3 * n), svel(3 * n), sc(apic ? 9 * n : 1, 0.0f);
    LAUNCH(n, gather_particles(order.data(), n, pos.data(), vel.data(), c.data(), apic, spos.data(), svel.data(),
                               sc.data()));
    pf(spos);
    pf(svel);
    if (apic) pf(sc);
    return 0;
}
"""


@pytest.fixture(scope="module")
def gather_harness(tmp_path_factory):
    return _build(tmp_path_factory, GATHER, [], "particle_gather")


@pytest.mark.parametrize("apic", [False, True])
def test_gather_particles_moves_every_array_as_numpy_indexing_does(gather_harness, apic):
    """Keys with many ties (and ``last``): ``gather_particles`` through their stable int64
    argsort order gives pos[order], vel[order], C[order] bit for bit (NaN and −0 too)."""
    rng = np.random.default_rng(11 + apic)
    n = 3000
    key = rng.integers(0, 40, n).astype(np.int32)
    key[::113] = (1 << 31) - 1
    order = np.argsort(key, kind="stable")
    arrays = [rng.standard_normal((n, 3)).astype(np.float32) for _ in range(2)]
    if apic:
        arrays.append(rng.standard_normal((n, 3, 3)).astype(np.float32))
    arrays[0][::50, 1] = np.nan
    arrays[1][::70, 2] = -0.0
    lines = [f"{n} {int(apic)}"] + [str(o) for o in order]
    lines += [float(v).hex() for a in arrays for v in a.reshape(-1)]
    out = gather_harness.raw(lines, check=True).split()
    floats = np.array([float.fromhex(v) for v in out], np.float32)
    want = np.concatenate([a[order].reshape(-1) for a in arrays])
    assert floats.size == want.size
    assert np.array_equal(floats.view(np.uint32), want.view(np.uint32))
