"""The block G2P kernel with its corners from the particle's brick table (kernels/cuda/flip_sparse_g2p_block.cu
``BLOCK_TABLE``, ``VOXFX_SPARSE_G2P_CORNERS=table``, helper h21g), on the host: the scenes and checks of
tests/unit/test_cuda_sparse_flip_host.py (the NumPy reference's bits) with the kernel built that way; and a
G2P-only harness on fast faces, whose midpoints leave the table (the samples' slow path: g2p_advect_bricks'
corners), on whole bricks and a checkerboard of them (inactive bricks in the table), closed and open; and the
table's per-axis code of a corner (``table_axis_code``, helper h21i) for every coordinate it takes."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit import test_cuda_sparse_flip_host as flip_host
from tests.unit.test_cuda_exact import build_ints, build_words, hex32 as _hex, kernel_defines
from voxfx.kernels.flip import sparse_g2p_gpu, sparse_gpu, sparse_transfer
from voxfx.kernels.grid.sparse import brick_coords

TABLE = ["-DBLOCK_PAIRS=0", "-DBLOCK_TABLE=1"]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_words(tmp_path_factory, flip_host.HARNESS, [*kernel_defines(sparse_gpu.KERNELS), *TABLE],
                       "sparse_flip_table")


# the same scenes and checks (NumPy reference bits), the block kernels built with the table
test_table_corners_match_the_numpy_reference = flip_host.test_sparse_flip_kernels_match_the_numpy_reference

# Input: closed nx ny nz apic; ox oy oz h inv_h flip pic dt half_dt (%a); n_keys cap, keys, slots; N, pos, vel
# (, C); u v w old_u old_v old_w (%a), solid (int), per pool cell. Output: g2p_advect_block_end(_apic)'s
# positions, velocities (, C), then g2p_advect_block_centred(_apic)'s with u_n = the faces halved.
# A block-G2P harness's case after its header ints (closed nx ny nz apic, then its own): the scalars, bricks,
# particles, the faces u v w and the old ou ov ow, the solids; the brick tables (coords, nbr27) and the closed box's
# brick index (d, index); u_n (bu bv bw) the faces halved. G2P_CASE_READ declares them all by these names (here and
# in test_cuda_g2p_marks_host), after DRIVER and the kernel files that define brick_tables and brick_index_fill.
G2P_CASE = r"""
struct G2pCase {
    float ox, oy, oz, h, inv_h, flip, pic, dt, half_dt;
    ll nk, cap, n, cells;
    std::vector<ll> keys;
    std::vector<int> slots;
    std::vector<float> pos, vel, c, u, v, w, ou, ov, ow, bu, bv, bw;
    std::vector<u8> solid;
    std::vector<int> coords, nbr27, index;
    int d[3];
};
static G2pCase read_g2p_case(int closed, int nx, int ny, int nz, int apic) {
    G2pCase g;
    for (float* x : {&g.ox, &g.oy, &g.oz, &g.h, &g.inv_h, &g.flip, &g.pic, &g.dt, &g.half_dt}) *x = rf();
    read_bricks(g.nk, g.cap, g.keys, g.slots);
    g.n = read_particles(apic, g.pos, g.vel, g.c);
    g.cells = g.cap * 512;
    for (auto* a : {&g.u, &g.v, &g.w, &g.ou, &g.ov, &g.ow}) {
        a->resize(g.cells);
        for (auto& x : *a) x = rf();
    }
    g.solid.resize(g.cells);
    for (auto& x : g.solid) { int t; scanf("%d", &t); x = (u8)t; }
    g.coords.assign(3 * g.cap, 0);
    g.nbr27.assign(27 * g.cap, -1);
    LAUNCH(27 * g.nk, brick_tables(g.keys.data(), g.slots.data(), g.nk, g.coords.data(), g.nbr27.data()));
    g.d[0] = closed ? (nx >> 3) + 2 : 0;
    g.d[1] = closed ? (ny >> 3) + 2 : 0;
    g.d[2] = closed ? (nz >> 3) + 2 : 0;
    g.index.assign(std::max(1, g.d[0] * g.d[1] * g.d[2]), -1);
    LAUNCH(g.nk, brick_index_fill(g.keys.data(), g.slots.data(), g.nk, g.index.data(), -1, -1, -1, g.d[0], g.d[1],
                                  g.d[2]));
    g.bu = g.u; g.bv = g.v; g.bw = g.w;
    for (auto* b : {&g.bu, &g.bv, &g.bw}) for (auto& x : *b) x *= 0.5f;
    return g;
}
#define G2P_CASE_READ(closed, nx, ny, nz, apic)                                                                     \
    G2pCase g2p_case_ = read_g2p_case(closed, nx, ny, nz, apic);                                                   \
    auto& [ox, oy, oz, h, inv_h, flip, pic, dt, half_dt, nk, cap, n, cells, keys, slots, pos, vel, c, u, v, w, ou, ov, \
           ow, bu, bv, bw, solid, coords, nbr27, index, d] = g2p_case_
"""

G2P_HARNESS = STUBS + r"""
#include "sparse.cu"
#include "flip_sparse_transfer.cu"
#include "flip_sparse_g2p_block.cu"
""" + DRIVER + G2P_CASE + r"""
int main() {
    int closed, nx, ny, nz, apic;
    if (scanf("%d %d %d %d %d", &closed, &nx, &ny, &nz, &apic) != 5) return 1;
    G2P_CASE_READ(closed, nx, ny, nz, apic);
    for (int centred : {0, 1}) {
        std::vector<float> p = pos, q = vel, r = c;
        auto* k = centred ? (apic ? g2p_advect_block_centred_apic : g2p_advect_block_centred)
                          : (apic ? g2p_advect_block_end_apic : g2p_advect_block_end);
        LAUNCH(n, k(p.data(), q.data(), r.data(), n, apic, u.data(), v.data(), w.data(), ou.data(), ov.data(),
                    ow.data(), solid.data(), keys.data(), slots.data(), nk, nbr27.data(), index.data(), -1, -1, -1,
                    d[0], d[1], d[2], closed, nx, ny, nz, ox, oy, oz, h, inv_h, flip, pic, dt, half_dt,
                    nullptr, 0, centred, bu.data(), bv.data(), bw.data()));
        pf(p); pf(q);
        if (apic) pf(r);
    }
    return 0;
}
"""


@pytest.fixture(scope="module", params=[0, 15], ids=["shift", "or"])
def g2p_harness(tmp_path_factory, request):
    """The entries with h21i's per-axis code (BLOCK_TABLE_OR 0, the default) or h21g's in all four (15; helper
    h21n's VOXFX_SPARSE_G2P_TABLE_CODE takes it in the time-centred two): the same NumPy reference bits."""
    return build_words(tmp_path_factory, G2P_HARNESS,
                       [*kernel_defines(sparse_gpu.KERNELS), *TABLE, f"-DBLOCK_TABLE_OR={request.param}"],
                       f"g2p_table_or{request.param}")


def fast_faces_scene(closed, apic, holes, scene_seed, faces_seed):
    """``flip_host.scene`` (a checkerboard of its bricks where *holes*) with fast faces (normal, σ 30 m/s) and
    old faces: (spec, grid, pos, vel, c, old)."""
    spec, grid, pos, vel, c = flip_host.scene(closed, apic, scene_seed)
    if holes:
        keys = grid.topology.keys
        grid.retopologize(keys[brick_coords(keys).sum(axis=1) % 2 == 0])
    rng = np.random.default_rng(faces_seed)
    for name in grid.FACES:
        grid[name] = rng.normal(0.0, 30.0, grid.size).astype(np.float32)
    old = tuple(rng.normal(0.0, 30.0, grid.size).astype(np.float32) for _ in grid.FACES)
    return spec, grid, pos, vel, c, old


def g2p_case_lines(closed, apic, spec, grid, pos, vel, c, old, flip, dt, extra=()):
    """A G2P_CASE harness's input: the header ints (closed nx ny nz apic, then *extra*), the scalars (ratio *flip*,
    *dt*), bricks, particles, faces and old faces, solids."""
    nx, ny, nz = spec.shape
    t = grid.topology
    lines = [" ".join(str(int(v)) for v in (closed, nx, ny, nz, apic, *extra)),
             _hex([*spec.origin, grid.h, 1.0 / grid.h, flip, np.float32(1) - flip, dt, np.float32(0.5) * dt]),
             f"{t.count} {grid.capacity}", " ".join(str(int(k)) for k in t.keys),
             " ".join(str(int(s)) for s in t.slots), str(len(pos)), _hex(pos), _hex(vel)]
    if apic:
        lines.append(_hex(c))
    return lines + [*(_hex(f) for f in (*grid.faces(), *old)), " ".join(str(int(x)) for x in grid["solid"])]


@pytest.mark.parametrize("holes", [False, True], ids=["bricks", "holes"])
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_table_corners_match_the_reference_where_midpoints_leave_the_table(g2p_harness, closed, apic, holes):
    """Faces of ~±6 cells a step (dt 0.01 s, h 0.05 m, |u| ~30 m/s): many midpoints lie more than 3 cells
    from x (beyond the particle's table: the slow path), the rest in it; positions, velocities (and C) the
    NumPy reference's bits at the end of the substep and time-centred (u_n the faces halved)."""
    spec, grid, pos, vel, c, old = fast_faces_scene(closed, apic, holes, 31 + 2 * closed + apic,
                                                    5 + 2 * closed + apic)
    dt = np.float32(0.01)
    flip = np.float32(0.0 if apic else 0.5)
    out = flip_host.Reader(g2p_harness(g2p_case_lines(closed, apic, spec, grid, pos, vel, c, old, flip, dt)))
    # the midpoints: x + ½Δt·u(x) (PIC alone: u(x) = the new velocity without APIC's C)
    probe_pos, probe_vel = pos.copy(), vel.copy()
    sparse_transfer.g2p_advect(grid, old, probe_pos, probe_vel, np.float32(0), dt)
    far = (np.abs(np.float32(0.5) * dt * probe_vel) / grid.h > 3).any(axis=1)
    assert 50 < far.sum() < len(pos) - 50  # both paths taken
    half = tuple(f * np.float32(0.5) for f in grid.faces())
    for before in (None, half):
        want_pos, want_vel, want_c = pos.copy(), vel.copy(), None if c is None else c.copy()
        sparse_transfer.g2p_advect(grid, old, want_pos, want_vel, flip, dt, want_c, before=before)
        for want in (want_pos, want_vel, want_c) if apic else (want_pos, want_vel):
            got = out.floats(want.size).reshape(want.shape)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert out.at == len(out.tokens)


def test_table_corners_build_the_table_module(monkeypatch):
    """VOXFX_SPARSE_G2P_CORNERS=table: every variant's module built with BLOCK_TABLE=1 (and no pairs)."""
    monkeypatch.setenv("VOXFX_SPARSE_G2P_CORNERS", "table")
    for centred in (False, True):
        for apic in (False, True):
            assert sparse_g2p_gpu.block_corners(centred, apic) == "table"
            module, entry = sparse_g2p_gpu.g2p_block_entry(centred, apic)
            assert "-DBLOCK_TABLE=1" in module.options and "-DBLOCK_PAIRS=0" in module.options
            assert entry == sparse_g2p_gpu.G2P_BLOCK_ENTRIES[(centred, apic)]


# table_axis_code<false>(k, d) for d in 0..2 and k in [0, 16), one a line (helper h21i), then table_axis_code<true>'s
AXIS_CODE_HARNESS = STUBS + r"""
#include "sparse.cu"
#include "flip_sparse_transfer.cu"
#include "flip_sparse_g2p_block.cu"
""" + DRIVER + r"""
int main() {
    for (int d = 0; d < 3; ++d)
        for (int k = 0; k < 16; ++k) printf("%u\n", table_axis_code<false>(k, d));
    for (int d = 0; d < 3; ++d)  // h21g's form (BLOCK_TABLE_OR's entries; helper h21n)
        for (int k = 0; k < 16; ++k) printf("%u\n", table_axis_code<true>(k, d));
    return 0;
}
"""


@pytest.fixture(scope="module")
def axis_code_harness(tmp_path_factory):
    return build_ints(tmp_path_factory, AXIS_CODE_HARNESS, [*kernel_defines(sparse_gpu.KERNELS), *TABLE],
                      "g2p_table_axis_code")


def test_table_axis_code_is_the_brick_bit_and_the_local_coordinate(axis_code_harness):
    """table_axis_code (k << 3d plus (k & 8) · (2^(6 + d) − 2^(3d)), helper h21i) against h21g's fields for every k
    in [0, 16) and d in 0..2 (all 48): the brick bit k >> 3 at 9 + d, the local coordinate k & 7 at 3d; and the three
    axes' codes disjoint, so that the kernel's v = Σ_d code_d is their OR (a brick r = v >> 9, a cell v & 511).
    table_axis_code<true> (h21g's form, BLOCK_TABLE_OR's entries, helper h21n) gives the same 48 values."""
    both = axis_code_harness([]).reshape(2, 3, 16)
    got = both[0]
    want = np.array([[((k & 8) << (6 + d)) | ((k & 7) << (3 * d)) for k in range(16)] for d in range(3)])
    assert np.array_equal(got, want)
    assert np.array_equal(both[1], want)
    x, y, z = np.meshgrid(*got, indexing="ij")
    assert np.array_equal(x + y + z, x | y | z)
    k = np.arange(16)
    kx, ky, kz = np.meshgrid(k, k, k, indexing="ij")
    assert np.array_equal(x + y + z >> 9, kx >> 3 | (ky >> 3) << 1 | (kz >> 3) << 2)
    assert np.array_equal(x + y + z & 511, kx & 7 | (ky & 7) << 3 | (kz & 7) << 6)


def test_table_code_centred_builds_h21g_code_into_the_time_centred_entries(monkeypatch):
    """VOXFX_SPARSE_G2P_TABLE_CODE (helper h21n): "shift" builds no BLOCK_TABLE_OR (its kernels session 21's
    defaults); "centred" (the default since session 22) builds BLOCK_TABLE_OR=12 for every variant's table
    module (bits 4 and 8: the time-centred entries take h21g's code, the end entries keep h21i's); pairs and
    select modules untouched."""
    monkeypatch.setenv("VOXFX_SPARSE_G2P_CORNERS", "table")
    monkeypatch.delenv("VOXFX_SPARSE_G2P_TABLE_CODE", raising=False)
    assert sparse_g2p_gpu.g2p_table_code() == "centred"
    assert sparse_g2p_gpu.g2p_block_entry(True, False)[0] is sparse_g2p_gpu.G2P_BLOCK_TABLE_CENTRED
    monkeypatch.setenv("VOXFX_SPARSE_G2P_TABLE_CODE", "shift")
    module, _ = sparse_g2p_gpu.g2p_block_entry(True, False)
    assert module is sparse_g2p_gpu.G2P_BLOCK_TABLE
    assert not any("BLOCK_TABLE_OR" in o for o in module.options)
    monkeypatch.setenv("VOXFX_SPARSE_G2P_TABLE_CODE", "centred")
    for centred in (False, True):
        for apic in (False, True):
            module, entry = sparse_g2p_gpu.g2p_block_entry(centred, apic)
            assert module is sparse_g2p_gpu.G2P_BLOCK_TABLE_CENTRED
            assert "-DBLOCK_TABLE_OR=12" in module.options and "-DBLOCK_TABLE=1" in module.options
            assert entry == sparse_g2p_gpu.G2P_BLOCK_ENTRIES[(centred, apic)]
    monkeypatch.setenv("VOXFX_SPARSE_G2P_CORNERS", "pairs")
    module, _ = sparse_g2p_gpu.g2p_block_entry(True, False)
    assert module is sparse_g2p_gpu.G2P_BLOCK_PAIRS
    monkeypatch.setenv("VOXFX_SPARSE_G2P_TABLE_CODE", "linear")
    with pytest.raises(ValueError):
        sparse_g2p_gpu.g2p_table_code()
