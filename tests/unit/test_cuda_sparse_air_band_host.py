"""The air band's particle kernels (cuda/flip_sparse_air_band.cu: band_update_velocity and
band_advect, launched by kernels/flip/sparse_air_band_gpu.py) give the NumPy reference's bits
(``sparse_transfer.update_velocity``, ``sparse_air_band.advect`` on NumPy), checked on the host
without a GPU (tests/cuda_host.py: nvcc builds the kernels as host functions, --fmad=false's
rounding by -ffp-contract=off): closed and open, whole topologies and a checkerboard of bricks,
FLIP and APIC, with u_n blended in time and without, faces fast enough for many sub-steps, and
particles inside an obstacle (the push-out). The device comparison is
tests/gpu/test_flip_sparse_air_band_gpu.py."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import build_words, hex32 as _hex, kernel_defines
from tests.unit.test_cuda_sparse_flip_host import Reader, scene
from voxfx.kernels.flip import sparse_air_band, sparse_air_band_gpu, sparse_transfer
from voxfx.kernels.grid.sparse import brick_coords

# Input: closed nx ny nz apic centred steps; ox oy oz h inv_h flip pic step half_step (%a);
# n_keys cap, keys, slots; N, pos, vel (, C); per pool cell solid (int); u v w, old u v w,
# before u v w (%a). Output: velocities (, C) after band_update_velocity, then positions after
# band_advect.
HARNESS = STUBS + r"""
#include "sparse.cu"
#include "flip_sparse_air_band.cu"
""" + DRIVER + r"""
int main() {
    int closed, nx, ny, nz, apic, centred, steps;
    if (scanf("%d %d %d %d %d %d %d", &closed, &nx, &ny, &nz, &apic, &centred, &steps) != 7) return 1;
    float ox = rf(), oy = rf(), oz = rf(), h = rf(), inv_h = rf(), flip = rf(), pic = rf(), step = rf(), half = rf();
    ll nk, cap;
    std::vector<ll> keys;
    std::vector<int> slots;
    read_bricks(nk, cap, keys, slots);
    ll n;
    scanf("%lld", &n);
    std::vector<float> pos(3 * n), vel(3 * n), c(apic ? 9 * n : 1, 0.0f);
    for (auto& x : pos) x = rf();
    for (auto& x : vel) x = rf();
    if (apic) for (auto& x : c) x = rf();
    const ll cells = cap * 512;
    std::vector<u8> solid(cells);
    for (auto& x : solid) { int t; scanf("%d", &t); x = (u8)t; }
    std::vector<std::vector<float>> f(9, std::vector<float>(cells));
    for (auto& a : f) for (auto& x : a) x = rf();
    std::vector<int> coords(3 * cap, 0), nbr27(27 * cap, -1);
    LAUNCH(27 * nk, brick_tables(keys.data(), slots.data(), nk, coords.data(), nbr27.data()));
    LAUNCH(n, band_update_velocity(pos.data(), vel.data(), c.data(), n, apic, f[0].data(), f[1].data(), f[2].data(),
                                   f[3].data(), f[4].data(), f[5].data(), keys.data(), slots.data(), nk, nbr27.data(),
                                   closed, nx, ny, nz, ox, oy, oz, inv_h, flip, pic));
    pf(vel);
    if (apic) pf(c);
    LAUNCH(n, band_advect(pos.data(), n, f[0].data(), f[1].data(), f[2].data(), centred, f[6].data(), f[7].data(),
                          f[8].data(), solid.data(), keys.data(), slots.data(), nk, nbr27.data(), closed, nx, ny, nz,
                          ox, oy, oz, h, inv_h, steps, step, half));
    pf(pos);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_words(tmp_path_factory, HARNESS, kernel_defines(sparse_air_band_gpu._K), "sparse_air_band")


@pytest.mark.parametrize("centred", [False, True], ids=["end", "centred"])
@pytest.mark.parametrize("holes", [False, True], ids=["bricks", "holes"])
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_band_kernels_match_the_numpy_reference(harness, closed, apic, holes, centred):
    spec, grid, pos, vel, c = scene(closed, apic, 31 + 2 * closed + apic)
    if holes:
        keys = grid.topology.keys
        grid.retopologize(keys[brick_coords(keys).sum(axis=1) % 2 == 0])
    rng = np.random.default_rng(7 + holes + 2 * centred)
    size = grid.size
    fast = (np.arange(size) % 5 == 0).astype(np.float32) * 6.0  # some faces a few cells a sub-step
    for name in grid.FACES:
        grid[name] = (rng.normal(0, 1, size) * (1 + fast)).astype(np.float32)
    old = tuple(rng.normal(0, 1, size).astype(np.float32) for _ in range(3))
    before = tuple(rng.normal(0, 1, size).astype(np.float32) for _ in range(3)) if centred else None
    flip = np.float32(0.0 if apic else 0.95)
    pic = np.float32(1) - flip
    dt = 0.05
    want_vel, want_c = vel.copy(), None if c is None else c.copy()
    sparse_transfer.update_velocity(grid, old, grid.cell_coords(pos), want_vel, flip, pic, want_c)
    want_pos = pos.copy()
    steps = sparse_air_band.advect(grid, want_pos, dt, before)
    assert steps >= 3  # several sub-steps
    step = np.float32(dt / steps)
    nx, ny, nz = spec.shape
    t = grid.topology
    zero = np.zeros(size, np.float32)
    lines = [f"{int(closed)} {nx} {ny} {nz} {int(apic)} {int(centred)} {steps}",
             _hex([*spec.origin, grid.h, 1.0 / grid.h, flip, pic, step, np.float32(0.5) * step]),
             f"{t.count} {grid.capacity}", " ".join(str(int(k)) for k in t.keys),
             " ".join(str(int(s)) for s in t.slots), str(len(pos)), _hex(pos), _hex(vel)]
    if apic:
        lines.append(_hex(c))
    lines += [" ".join(str(int(x)) for x in grid["solid"]), *(_hex(f) for f in grid.faces()),
              *(_hex(f) for f in old), *(_hex(f) for f in (before or (zero,) * 3))]
    out = Reader(harness(lines))
    n = len(pos)
    got_vel = out.floats(3 * n).reshape(n, 3)
    assert np.array_equal(got_vel.view(np.uint32), want_vel.view(np.uint32))
    if apic:
        assert np.array_equal(out.floats(9 * n).reshape(n, 3, 3).view(np.uint32), want_c.view(np.uint32))
    got_pos = out.floats(3 * n).reshape(n, 3)
    assert np.array_equal(got_pos.view(np.uint32), want_pos.view(np.uint32))
    assert np.abs(want_pos - pos).max() > grid.h  # some moved across cells
