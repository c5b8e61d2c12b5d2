"""The GPU level set's "bricks" and "lean" ways against its "legacy" way
(surface_gpu.LEVEL_SET_MODES) on the device: the same particles in the same order in every
binning cell and the same node sum, so φ is equal to the bit — closed against the walls and
open, with per-particle radii, in crowded cells (sorted apart), lean's gather after the
64-bit-tag binning too — and the bricks a particle cannot reach are +band; lean's
three-operation quotient (flip_surface_lean.cu) rounds as the division over whole binades; with
the sums fused (VOXFX_LEVEL_SET_SUMS) every way still the same bits. The
CPU comparisons are test_flip_surface_gpu.py and test_flip_closed_surface_gpu.py (they run
the default way)."""

import numpy as np
import pytest

from tests.meshes import box
from tests.unit.test_flip_surface import seeded_ball
from voxfx.kernels.errors import InputError
from voxfx.kernels.flip import surface_gpu, surface_host_copy
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import closed_level_set, particle_level_set, surface_radii
from voxfx.kernels.grid import GridSpec


def both_ways(monkeypatch, call, modes=("legacy", "bricks", "lean")):
    """φ of *call* in each way (legacy first), after checking that every way gives legacy's
    bits: (legacy, bricks) — the later ways were checked against it already."""
    out = []
    for mode in modes:
        monkeypatch.setenv("VOXFX_LEVEL_SET", mode)
        out.append(call().get())
    for mode, phi in zip(modes[2:], out[2:]):
        assert phi.tobytes() == out[0].tobytes(), mode
    return out[:2]


def liquid_in_a_box(rng):
    h = float(rng.uniform(0.02, 0.06))
    spec = GridSpec(tuple(rng.uniform(-2, 2, 3)), h, tuple(int(a) for a in rng.integers(16, 48, 3)))
    lo, hi = np.asarray(spec.origin), np.asarray(spec.upper)
    parts = [seeded_ball(rng.uniform(lo, hi), float(rng.uniform(3, 8)) * h, h / 2, rng) for _ in range(3)]
    parts.append(seeded_ball(hi - 2 * h, 5 * h, h / 2, rng))  # a corner: 7 images a particle there
    parts.append(rng.uniform(lo, hi, (300, 3)))
    return spec, np.clip(np.concatenate(parts), lo + 1e-3 * h, hi - 1e-3 * h).astype(np.float32)


@pytest.mark.parametrize("smooth_iterations", [0, 1, 2, 9])
def test_closed_level_set_bricks_equals_legacy(monkeypatch, smooth_iterations):
    import cupy

    rng = np.random.default_rng()
    spec, pos = liquid_in_a_box(rng)
    r, R = surface_radii(spec.voxel_size, 8)
    legacy, bricks = both_ways(monkeypatch, lambda: closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy,
                                                                     smooth_iterations=smooth_iterations))
    np.testing.assert_array_equal(bricks, legacy)
    assert (bricks < 0).any()


def test_fused_sums_every_way_the_same_bits_within_rounding_of_plain(monkeypatch):
    """VOXFX_LEVEL_SET_SUMS (surface_gpu.level_set_sums): with the sums fused every way gives
    legacy's bits too; the same nodes at ±band as plain's (the same particles a node), some
    nodes' last bits moved (the switch switches) and none by 2e-6·R (the CPU tolerance
    2e-5·R; the host harness on a fixed scene: 1.9e-7·R)."""
    import cupy

    rng = np.random.default_rng()
    spec, pos = liquid_in_a_box(rng)
    r, R = surface_radii(spec.voxel_size, 8)
    phis = []
    for sums in ("plain", "fused"):
        monkeypatch.setenv("VOXFX_LEVEL_SET_SUMS", sums)
        phis.append(both_ways(monkeypatch, lambda: closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy,
                                                                    smooth_iterations=0))[0])
    plain, fused = phis
    band = np.abs(plain).max()
    np.testing.assert_array_equal(np.abs(plain) == band, np.abs(fused) == band)
    assert (plain != fused).any() and np.abs(plain - fused).max() < 2e-6 * R


def test_open_level_set_with_radii_bricks_equals_legacy_and_far_bricks_are_band(monkeypatch):
    import cupy

    rng = np.random.default_rng()
    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (40, 33, 50))
    pos = np.concatenate([seeded_ball(np.array([0.4, 0.4, 0.4]), 6 * h, h / 2, rng),
                          rng.uniform(-0.1, 0.8, (200, 3)), rng.uniform(20, 30, (10, 3))]).astype(np.float32)
    radii = cupy.asarray((rng.uniform(0.3, 0.7, len(pos)) * h).astype(np.float32))
    legacy, bricks = both_ways(monkeypatch, lambda: particle_level_set(cupy.asarray(pos), spec, radii, xp=cupy))
    np.testing.assert_array_equal(bricks, legacy)
    band = np.float32(3 * h)
    assert (bricks[-10:, -10:, -10:] == band).all() and (bricks < 0).any()


@pytest.mark.parametrize("limit", [2, 40])
def test_crowded_cells_sorted_apart_give_the_same_bits(monkeypatch, limit):
    import cupy

    rng = np.random.default_rng()
    spec, pos = liquid_in_a_box(rng)
    r, R = surface_radii(spec.voxel_size, 8)
    monkeypatch.setattr(surface_gpu, "SORT_CELL_MAX", limit)  # 2: nearly every cell; 40: some
    legacy, bricks = both_ways(monkeypatch, lambda: closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy))
    np.testing.assert_array_equal(bricks, legacy)


@pytest.mark.parametrize("limit", ["1024", "default", "2048"])
def test_cells_over_a_thousand_points_give_the_same_bits_ranked_in_place_or_sorted_apart(monkeypatch, limit):
    """VOXFX_LEVEL_SET_SORT_CELL_MAX (surface_gpu.sort_cell_max; "default" SORT_CELL_MAX, 8192):
    a pile of 1,500 particles in a corner's binning cell ranked in place by surface_order_cells
    up to the limit, sorted apart (_order_crowded) above it: the bits of legacy (one sort of
    every point) either way."""
    import cupy

    rng = np.random.default_rng()
    spec, pos = liquid_in_a_box(rng)
    lo, h = np.asarray(spec.origin), spec.voxel_size
    pile = (lo + rng.uniform(0.05, 0.3, (1500, 3)) * h).astype(np.float32)
    pos = np.concatenate([pos, pile])
    r, R = surface_radii(h, 8)
    monkeypatch.setenv("VOXFX_LEVEL_SET_SORT_CELL_MAX", limit)
    legacy, bricks = both_ways(monkeypatch, lambda: closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy))
    np.testing.assert_array_equal(bricks, legacy)
    monkeypatch.setattr(surface_gpu, "STATS", {})  # lean once more, its crowded sort's kernels made before
    closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy)
    assert surface_gpu.STATS["fullest"] > 1024
    assert ("crowded_cells" in surface_gpu.STATS) == (surface_gpu.STATS["fullest"] > surface_gpu.sort_cell_max())


def test_lean_gather_after_the_wide_tag_binning_gives_the_same_bits(monkeypatch):
    """Lean's 32-bit tags hold combo·n + p up to COMBOS·n ≤ 2³²; past it lean bins as bricks
    (64-bit tags) and keeps its gather: made to here by a larger COMBOS."""
    import cupy

    rng = np.random.default_rng()
    spec, pos = liquid_in_a_box(rng)
    r, R = surface_radii(spec.voxel_size, 8)
    monkeypatch.setattr(surface_gpu, "COMBOS", 2 ** 32)
    both_ways(monkeypatch, lambda: closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy))


@pytest.mark.parametrize("blocks", [2, 3])
def test_lean_gather_built_for_two_or_three_blocks_gives_the_same_bits(monkeypatch, blocks):
    import cupy

    rng = np.random.default_rng()
    spec, pos = liquid_in_a_box(rng)
    r, R = surface_radii(spec.voxel_size, 8)
    monkeypatch.setattr(surface_gpu, "LEAN_BLOCKS", blocks)
    both_ways(monkeypatch, lambda: closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy, smooth_iterations=0),
              modes=("legacy", "bricks", "lean"))


@pytest.mark.parametrize("split", ["2", "4", "8"])
def test_lean_gather_split_over_blocks_gives_the_same_bits(monkeypatch, split):
    """VOXFX_LEVEL_SET_GATHER_SPLIT: each node tile over 2, 4 or 8 blocks
    (particle_level_set_lean_split), closed with the interior skip and smoothing, and open with
    per-particle radii: lean's φ (one block a tile) bit for bit, and legacy's."""
    import cupy

    rng = np.random.default_rng()
    spec, pos = liquid_in_a_box(rng)
    r, R = surface_radii(spec.voxel_size, 8)
    radii = rng.uniform(0.5, 1.0, len(pos)).astype(np.float32) * np.float32(r)
    calls = (lambda: closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy),
             lambda: particle_level_set(cupy.asarray(pos), spec, cupy.asarray(radii), R, xp=cupy))
    for call in calls:
        monkeypatch.setenv("VOXFX_LEVEL_SET_GATHER_SPLIT", "1")
        whole = both_ways(monkeypatch, call)[0]
        monkeypatch.setenv("VOXFX_LEVEL_SET_GATHER_SPLIT", split)
        monkeypatch.setenv("VOXFX_LEVEL_SET", "lean")
        assert call().get().tobytes() == whole.tobytes()


@pytest.mark.parametrize("mode", ["lean", "bricks"])
def test_smoothing_buffer_is_taken_after_the_gathers_points_are_let_go(monkeypatch, mode):
    """When the smoothing takes φ's second buffer, the level set holds only its inputs, φ and the
    bricks' flags: the gather's packed points (16 bytes a particle and image) and cell starts are
    gone. A tuple of the gather's arguments kept them through the smoothing (session 25: +9.2 MiB
    at the 1M spreading liquid's frames 0–3, which the memory check's peak then met)."""
    import cupy
    from cupy.cuda import memory_hook

    monkeypatch.setenv("VOXFX_LEVEL_SET", mode)
    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / 40, (40, 40, 40))
    pos = cupy.asarray(rng.uniform(0.2, 0.8, (400_000, 3)).astype(np.float32))  # packed: 6.4 MB, φ: 0.28 MB
    r, R = surface_radii(spec.voxel_size, 8)
    pool = cupy.get_default_memory_pool()
    phi_bytes = closed_level_set(pos, spec, r, R, xp=cupy, smooth_iterations=1).nbytes  # kernels compiled

    class AtTwin(memory_hook.MemoryHook):
        name = "VoxFXTestSmoothingTwin"
        seen, used = 0, None

        def malloc_postprocess(self, **kw):
            if kw["size"] == phi_bytes:
                self.seen += 1
                if self.seen == 2:  # φ, then the smoothing's other buffer
                    self.used = pool.used_bytes()

    base = pool.used_bytes()
    with AtTwin() as hook:
        phi = closed_level_set(pos, spec, r, R, xp=cupy, smooth_iterations=1)
    assert hook.seen == 2 and (phi.get() < 0).any()
    held = hook.used - base - 2 * phi_bytes  # beyond the inputs and φ's two buffers
    assert 0 <= held < 16 * len(pos) // 2, (held, 16 * len(pos))


def test_gather_work_counts_the_nodes_and_points_the_gather_tests(monkeypatch):
    """VOXFX_LEVEL_SET_GATHER_WORK=1 (benches): the gather's work counters in STATS — gathered and
    interior nodes within the grid's, the warps' slots at least the points tested (a warp's row
    costs its fullest lane), a tile's block slots at least its quarter blocks', a node's most
    tests within the total, the nodes of at least 255, 1023, 4095 tests nested — and φ unchanged."""
    import cupy

    rng = np.random.default_rng(3)
    spec, pos = liquid_in_a_box(rng)
    r, R = surface_radii(spec.voxel_size, 8)
    monkeypatch.setenv("VOXFX_LEVEL_SET", "lean")
    plain = closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy).get()
    monkeypatch.setenv("VOXFX_LEVEL_SET_GATHER_WORK", "1")
    monkeypatch.setattr(surface_gpu, "STATS", {})
    assert closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy).get().tobytes() == plain.tobytes()
    w = surface_gpu.STATS
    assert 0 < w["gathered"] and w["gathered"] + w["interior"] <= w["nodes"]
    assert w["tests"] <= w["lane_slots"] <= w["quarter_slots"] <= w["tile_slots"]
    assert 0 < w["most_tests"] <= w["tests"] and w["tests_4095"] <= w["tests_1023"] <= w["tests_255"] <= w["gathered"]


def test_lean_quotient_step_rounds_as_division_over_whole_binades():
    """quotient_mismatches (flip_surface_lean.cu) with the device's y (rcp.approx and a Newton
    step): every d2 mantissa in the binade below R2 and one 2³⁰ below, at R2 of the level
    set's sizes (the dam breaks' too) and random ones: no bit differs from d2 / R2."""
    import cupy

    rng = np.random.default_rng()
    sizes = [surface_radii(1.0 / n, 8)[1] for n in (64, 128, 256, 512, 2048)]
    R2s = [np.float32(R) * np.float32(R) for R in sizes]
    R2s += list(np.float32(2.0) ** rng.uniform(-50, 50, 12).astype(np.float32) * rng.uniform(1, 2, 12).astype(
        np.float32))
    mismatches = cupy.zeros(1, cupy.uint64)
    n = 1 << 23
    for R2 in R2s:
        e = int(np.frexp(R2)[1]) - 1
        for below in (1, 30):
            surface_gpu._K_LEAN.launch("quotient_mismatches", n, (np.float32(R2), np.int32(e - below), np.int32(0),
                                                                  np.int64(n), mismatches))
    assert int(mismatches.get()[0]) == 0


@pytest.mark.parametrize("mode", ["bricks", "lean"])
def test_bricks_refuse_non_finite_particles_of_a_closed_box(monkeypatch, mode):
    import cupy

    monkeypatch.setenv("VOXFX_LEVEL_SET", mode)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    pos = cupy.full((5, 3), 0.4, cupy.float32)
    pos[1, 2] = cupy.nan
    pos[3, 0] = -cupy.inf
    with pytest.raises(InputError, match="2 particles have non-finite"):
        closed_level_set(pos, spec, 0.05, 0.2, xp=cupy)


def test_level_set_on_device_is_what_the_host_copy_holds():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.5 / 24, (24, 24, 24))
    sim = FlipSimulation(spec, FlipSettings(), *box((0, 0, 0), (0.25, 0.5, 0.4)), xp=cupy)
    sim.step(1 / 24)
    on_device = sim.level_set(on_device=True)
    host = sim.level_set()
    assert isinstance(on_device, cupy.ndarray) and isinstance(host, np.ndarray) and host.dtype == np.float32
    np.testing.assert_array_equal(on_device.get(), host)
    assert (host < 0).any()


def test_region_bounds_are_the_cell_coordinates_extremes(monkeypatch):
    """particle_bounds on the device (one pass, NaN skipped) against nanmin / nanmax, and an
    open liquid's region (sparse_output.liquid_region) the same grid with and without it
    (VOXFX_LEVEL_SET_BOUNDS)."""
    import cupy

    from voxfx.kernels.flip import sparse_output

    rng = np.random.default_rng()
    pos = cupy.asarray(rng.uniform(-3, 7, (100_003, 3)).astype(np.float32))
    pos[cupy.asarray(rng.integers(0, len(pos), 50)), 1] = cupy.nan
    want = np.stack([cupy.nanmin(pos, axis=0).get(), cupy.nanmax(pos, axis=0).get()])
    np.testing.assert_array_equal(surface_gpu.particle_bounds(pos), want)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.2, 0.2, 0.2), (0.6, 0.6, 0.6))
    sim = FlipSimulation(spec, FlipSettings(gravity=(0.0, 0.0, 0.0)), v, t, xp=cupy, sparse=True, boundary="open",
                         kill_distance=50.0, initial_velocity=(6.0, 0.0, 0.0))
    start = sparse_output.liquid_region(sim)
    sim.step(1 / 24)
    regions = []
    for bounds in (False, True):
        monkeypatch.setattr(surface_gpu, "REGION_BOUNDS", bounds)
        regions.append(sparse_output.liquid_region(sim))
    # the same grid both ways, and it followed the liquid (0.25 m along x: two 0.1 m cells, floored)
    assert regions[0] == regions[1] and regions[0].origin[0] >= start.origin[0] + 0.2 - 1e-9


@pytest.mark.parametrize("pinned", ["class", "domain"])
def test_pinned_class_copy_holds_the_bytes_in_page_locked_blocks(monkeypatch, pinned):
    """surface_host_copy.host_copy: "pinned" gives ``.get()``'s bytes (shape, dtype) in page-locked
    memory (cudaMemoryTypeHost), for sizes within one class and across two, by CuPy's pinned pool
    ("class") or this module's blocks with no domain size given ("domain", the default); whether a
    dropped block of CuPy's pool comes back for the next copy is that pool's business (on an H100
    with CuPy 14.2 once yes, once not: a block an async copy used returns when its event is seen
    done), so it is not asserted."""
    import cupy

    monkeypatch.setenv("VOXFX_LEVEL_SET_PINNED", pinned)
    monkeypatch.setattr(surface_host_copy, "_FREE", [])
    rng = np.random.default_rng()
    shapes = [(37, 61, 300), (40, 61, 310), (40, 61, 350)]  # 2.6 and 2.9 MiB (the 3 MiB class), 3.3 MiB (4 MiB)
    classes = [surface_host_copy.pinned_class_bytes(4 * int(np.prod(s))) for s in shapes]
    assert classes[0] == classes[1] < classes[2]
    for shape in shapes:
        phi = cupy.asarray(rng.standard_normal(shape).astype(np.float32))
        host = surface_host_copy.host_copy(phi, "pinned")
        assert host.shape == phi.shape and host.dtype == np.float32
        assert host.tobytes() == phi.get().tobytes() == surface_host_copy.host_copy(phi, "pageable").tobytes()
        where = cupy.cuda.runtime.pointerGetAttributes(host.__array_interface__["data"][0])
        assert where.type == 1  # cudaMemoryTypeHost: page-locked
        del host


def test_domain_blocks_are_lent_smallest_first_and_come_back(monkeypatch):
    """VOXFX_LEVEL_SET_PINNED=domain (surface_host_copy._lend): the first copy page-locks a block of
    the class of *most* (the domain's largest φ: 40 MiB, the 48 MiB class) and gives
    ``.get()``'s bytes; a later, larger φ within it gets the same block back once the first
    array is dropped; while an array holds it, another block is page-locked; the smallest
    free block that holds a φ is lent."""
    import cupy

    monkeypatch.setenv("VOXFX_LEVEL_SET_PINNED", "domain")
    monkeypatch.setattr(surface_host_copy, "_FREE", [])
    rng = np.random.default_rng()
    small = cupy.asarray(rng.standard_normal((2, 1024, 1024)).astype(np.float32))  # 8 MiB
    large = cupy.asarray(rng.standard_normal((9, 1024, 1024)).astype(np.float32))  # 36 MiB
    most = 40 << 20
    host = surface_host_copy.host_copy(small, most=most)
    first = host.__array_interface__["data"][0]
    assert host.tobytes() == small.get().tobytes() and surface_host_copy._FREE == []
    assert cupy.cuda.runtime.pointerGetAttributes(first).type == 1  # cudaMemoryTypeHost: page-locked
    del host
    assert [size for size, _ in surface_host_copy._FREE] == [3 << 24]
    host = surface_host_copy.host_copy(large, most=most)
    assert host.__array_interface__["data"][0] == first and host.tobytes() == large.get().tobytes()
    held = surface_host_copy.host_copy(small)  # the block is held: another, of small's own class (8 MiB)
    assert held.__array_interface__["data"][0] != first and held.tobytes() == small.get().tobytes()
    del host, held
    assert sorted(size for size, _ in surface_host_copy._FREE) == [8 << 20, 3 << 24]
    host = surface_host_copy.host_copy(small, most=most)  # the smallest free block that holds it
    assert host.__array_interface__["data"][0] != first and [size for size, _ in surface_host_copy._FREE] == [3 << 24]


def test_domain_block_past_its_cap_is_sized_by_class_and_released_with_the_pool(monkeypatch):
    """The default "domain" way (surface_host_copy): a domain's largest φ over ``DOMAIN_BLOCK_MAX``
    counts as unknown, so the block is of the copy's own class, not the domain's; a *most* within
    it sizes the block by the domain's class; ``memory.release_gpu_pool`` lets go of the blocks
    no array holds (their bytes, and ``_FREE`` empty after)."""
    import cupy

    from voxfx.kernels import memory

    monkeypatch.delenv("VOXFX_LEVEL_SET_PINNED", raising=False)
    monkeypatch.setattr(surface_host_copy, "_FREE", [])
    monkeypatch.setattr(surface_host_copy, "DOMAIN_BLOCK_MAX", 16 << 20)
    phi = cupy.asarray(np.random.default_rng().standard_normal((2, 512, 1024)).astype(np.float32))  # 4 MiB
    host = surface_host_copy.host_copy(phi, most=64 << 20)  # past the cap: phi's own class (4 MiB)
    assert host.tobytes() == phi.get().tobytes()
    del host
    assert [size for size, _ in surface_host_copy._FREE] == [4 << 20]
    held = surface_host_copy.host_copy(phi)  # the free block again
    big = surface_host_copy.host_copy(phi, most=12 << 20)  # within the cap: the domain's class (12 MiB)
    assert big.tobytes() == held.tobytes() == phi.get().tobytes()
    del held, big
    assert sorted(size for size, _ in surface_host_copy._FREE) == [4 << 20, 12 << 20]
    memory.release_gpu_pool()
    assert surface_host_copy._FREE == []
