"""The block G2P kernel's marks of the moved particles (kernels/cuda/flip_sparse_g2p_block.cu ``G2P_MARKS``,
``VOXFX_SPARSE_G2P_MARKS``, helper s23j), on the host: for every corners way (select, pairs, table, tablew), both
ends of the substep (end, time-centred), with and without APIC, closed and open, whole bricks and a checkerboard
of them (many particles whose new cell has no brick: the missed count), and each speed code (0: no per-brick
speeds, 1 plain, 2 warp-grouped, 3 uniform), the G2P's occupied flags, speed2 and missed are the bits of
flip_sparse_topology.cu's mark_occupied run over the positions and velocities the G2P wrote, in the same topology;
its largest |v|² bits are max_speed_squared's (the NumPy |v|²'s maximum); and the positions and velocities are the
kernel built without marks' (the marks write nothing else)."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit import test_cuda_sparse_flip_host as flip_host
from tests.unit.test_cuda_exact import build_words, kernel_defines
from tests.unit.test_cuda_g2p_table_host import G2P_CASE, fast_faces_scene, g2p_case_lines
from voxfx.kernels.flip import sparse_gpu

CORNERS = {"select": (0, 0), "pairs": (1, 0), "table": (0, 1), "tablew": (0, 2)}  # BLOCK_PAIRS, BLOCK_TABLE

# Input: closed nx ny nz apic speeds; ox oy oz h inv_h flip pic dt half_dt (%a); n_keys cap, keys, slots; N, pos,
# vel (, C); u v w old_u old_v old_w (%a), solid (int), per pool cell. Output, for end of substep then time-centred
# (u_n = the faces halved): positions, velocities (, C) (%a); then the G2P's missed, most, its set occupied cells
# (count, then each), speed2 (cap); then mark_occupied's missed, set cells and speed2 over those particles.
HARNESS = STUBS + r"""
#include "sparse.cu"
#include "flip_sparse_transfer.cu"
#include "flip_sparse_topology.cu"  // mark_occupied
#include "flip_sparse_g2p_block.cu"
""" + DRIVER + G2P_CASE + r"""
static void marks(const std::vector<u8>& occ, const std::vector<unsigned>& speed2, unsigned long long missed) {
    printf("%llu\n", missed);
    ll set = 0;
    for (u8 x : occ) set += x != 0;
    printf("%lld\n", set);
    for (size_t i = 0; i < occ.size(); ++i) if (occ[i]) printf("%zu %d\n", i, (int)occ[i]);
    for (unsigned s : speed2) printf("%u\n", s);
}
int main() {
    int closed, nx, ny, nz, apic, speeds;
    if (scanf("%d %d %d %d %d %d", &closed, &nx, &ny, &nz, &apic, &speeds) != 6) return 1;
    G2P_CASE_READ(closed, nx, ny, nz, apic);
    for (int centred : {0, 1}) {
        std::vector<float> p = pos, q = vel, r = c;
        std::vector<u8> occ(cells, 0);
        std::vector<unsigned> speed2(cap, 0u);
        unsigned long long missed = 0;
        unsigned most = 0;
        auto* k = centred ? (apic ? g2p_advect_block_centred_apic : g2p_advect_block_centred)
                          : (apic ? g2p_advect_block_end_apic : g2p_advect_block_end);
        LAUNCH(n, k(p.data(), q.data(), r.data(), n, apic, u.data(), v.data(), w.data(), ou.data(), ov.data(),
                    ow.data(), solid.data(), keys.data(), slots.data(), nk, nbr27.data(), index.data(), -1, -1, -1,
                    d[0], d[1], d[2], closed, nx, ny, nz, ox, oy, oz, h, inv_h, flip, pic, dt, half_dt,
                    nullptr, 0, centred, bu.data(), bv.data(), bw.data(), occ.data(), &missed, speed2.data(), speeds,
                    &most));
        pf(p); pf(q);
        if (apic) pf(r);
        printf("%u\n", most);
        marks(occ, speed2, missed);
        std::vector<u8> occ2(cells, 0);
        std::vector<unsigned> speed22(cap, 0u);
        unsigned long long missed2 = 0;
        LAUNCH(n, mark_occupied(p.data(), n, ox, oy, oz, inv_h, closed, nx, ny, nz, keys.data(), slots.data(), nk,
                                index.data(), -1, -1, -1, d[0], d[1], d[2], occ2.data(), &missed2, q.data(),
                                speed22.data(), speeds));
        marks(occ2, speed22, missed2);
    }
    return 0;
}
"""


@pytest.fixture(scope="module", params=list(CORNERS), ids=list(CORNERS))
def harness(tmp_path_factory, request):
    pairs, table = CORNERS[request.param]
    defines = [*kernel_defines(sparse_gpu.KERNELS), f"-DBLOCK_PAIRS={pairs}", f"-DBLOCK_TABLE={table}",
               "-DG2P_MARKS=1"]
    return build_words(tmp_path_factory, HARNESS, defines, f"g2p_marks_{request.param}")


def _marks(out, cap):
    missed = int(out.ints(1)[0])
    set_ = int(out.ints(1)[0])
    cells = out.ints(2 * set_).reshape(set_, 2)
    return missed, cells, out.ints(cap)


def _speed_bits(vel):
    """max_speed_squared's |v|² (float32, (x·x + y·y) + z·z) largest bits (0 for none)."""
    s = (vel[:, 0] * vel[:, 0] + vel[:, 1] * vel[:, 1]) + vel[:, 2] * vel[:, 2]
    return int(s.view(np.uint32).max()) if s.size else 0


@pytest.mark.parametrize("speeds", [0, 1, 2, 3])
@pytest.mark.parametrize("holes", [False, True], ids=["bricks", "holes"])
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_g2p_marks_are_mark_occupied_of_the_moved_particles(harness, closed, apic, holes, speeds):
    """Fast faces (~±6 cells a step): particles cross bricks, some into cells without a brick (holes, open domains:
    missed > 0), a few not finite (NaN, ∞: no mark) and three below the box (closed: cell clamped); the G2P's marks
    equal mark_occupied's bit for bit, its most is the NumPy |v|²'s largest bits, and the positions and velocities
    are the reference's (the unmarked kernels' bits, test_cuda_g2p_*_host.py)."""
    spec, grid, pos, vel, c, old = fast_faces_scene(closed, apic, holes, 41 + 2 * closed + apic,
                                                    7 + 2 * closed + apic + 4 * speeds)
    pos[5] = (np.nan, 0.0, 0.0)
    pos[9] = (np.inf, 0.1, 0.1)
    vel[11] = (3e19, 0.0, 0.0)  # |v|² overflows to +inf: the largest bits
    pos[13:16] = np.asarray(spec.origin, np.float32) - np.float32(3 * grid.h)  # outside the box: clamped when closed
    dt = np.float32(0.01)
    flip = np.float32(0.0 if apic else 0.5)
    out = flip_host.Reader(harness(g2p_case_lines(closed, apic, spec, grid, pos, vel, c, old, flip, dt, (speeds,))))
    cap = int(grid.capacity)
    from voxfx.kernels.flip import sparse_transfer

    half = tuple(f * np.float32(0.5) for f in grid.faces())
    for before in (None, half):
        want_pos, want_vel, want_c = pos.copy(), vel.copy(), None if c is None else c.copy()
        sparse_transfer.g2p_advect(grid, old, want_pos, want_vel, flip, dt, want_c, before=before)
        for want in (want_pos, want_vel, want_c) if apic else (want_pos, want_vel):
            got = out.floats(want.size).reshape(want.shape)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
        most = int(out.ints(1)[0])
        assert most == _speed_bits(want_vel)
        g_missed, g_cells, g_speed2 = _marks(out, cap)
        m_missed, m_cells, m_speed2 = _marks(out, cap)
        assert g_missed == m_missed
        assert np.array_equal(g_cells, m_cells) and np.array_equal(g_speed2, m_speed2)
        assert len(m_cells) > 100 and (m_cells[:, 1] == 1).all()
        if speeds:
            assert (m_speed2 > 0).sum() > 2
        else:
            assert not m_speed2.any()
        if holes or not closed:
            assert m_missed > 0
    assert out.at == len(out.tokens)
