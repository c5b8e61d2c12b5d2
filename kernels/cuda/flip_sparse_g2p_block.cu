// G2P and advection of the sparse FLIP solver, one brick block a sample (seed 003 Alg. 1;
// issue 24, helper i24g; kernels/flip/sparse_g2p_gpu.py g2p_advect launches it for
// VOXFX_SPARSE_G2P_KERNEL=block; kernels/flip/sparse_transfer.py g2p_advect is the NumPy
// reference; compiled with --fmad=false). The arithmetic of flip_sparse_g2p.cu's
// g2p_advect_bricks operation for operation (the same corners, fractions, blends and
// push-out: the same bits); what differs is how a sample finds its corner cells:
//   * the three face lattices of a sample share their axes: along axis d component d reads
//     the lattice at g_d (box n_d + 1), the other two at g_d − ½ (box n_d), so 6 axis
//     look-ups a sample, not 9;
//   * per axis the 12 corners' cells of the three components lie in one brick or two
//     neighbours (⌊g_d⌋ and ⌊g_d − ½⌋ differ by at most 1), so the whole sample's corners lie
//     in one block of 1–8 bricks: those are read from the home brick's table once a sample
//     (one range test, loads at constant offsets of one row) instead of 1–8 look-ups, each
//     with its own range test and binary search, a component; within a warp some lane
//     nearly always crosses a brick, so g2p_advect_bricks pays for all 8 look-ups a
//     component;
//   * where every brick of the block is active (nearly always: the topology's margins), the
//     walk's test of each corner (four brick picks a corner) is skipped: every corner is
//     in an active brick, read without a test;
//   * the push-out's cell look-up in 32-bit integers (closed domains).
// Everything else (a block beyond the home brick's 27 or with an inactive brick, a point
// beyond the key range, a non-finite position, an open domain's push-out, a point in a
// SOLID cell) takes g2p_advect_bricks' own code (corner_cells_fast, push_out_brick), out of
// line where it is long.
//
// Measured (H100 80GB HBM3, driver 580.159.04, one call; 8M dam break after 4 substeps,
// 8,000,033 particles, 3,258 bricks, bins' order; bench/flip_sparse_g2p_block.py, medians of
// 7 on copies of the same particles, the same bits as bricks every time), ms:
//
//   case                     bricks   block 2×512 (64 reg.)   block 4×256 (64 reg.)   block 1×512 (96 reg.)   lean
//   end of substep           0.896          0.651                   0.606                   0.961             1.319
//   time-centred             1.678          0.754                   0.718                   1.027             1.348
//   APIC, end of substep     1.442          1.268                   1.155                   1.359             2.129
//
// Whole substeps alternating in one process (bench/flip_sparse.py --row 8m --ab, 8 a way,
// block 2×512): G2P + advection 0.955 → 0.718 ms, substep 7.61 → 7.45 ms. ncu, one launch each
// (end of substep, 2×512): bricks 629.5M warp instructions (~2,520 a particle), IPC 2.82,
// 1.07 ms under ncu; block 393.5M (~1,570 a particle, −37%), IPC 2.52, 0.75 ms, its 64
// registers with 92 B of spills (5.75M local spill requests: long-scoreboard stalls 4.2 a
// warp instruction against 2.4); built for one block (96 registers, no spills) it loses
// half the warps and is slower. sparse_g2p_gpu builds it for 4 blocks of 256 (G2P_BLOCK_*).
//
// Registers (helper i24s2; nvcc 13.0 -Xptxas -v, sm_90, 4×256 and 2×512, 64 registers): the one
// entry of all four variants spilled 92 B (176 B stack: x0, o and x' kept in local memory for
// the slow paths' pointers). Now one entry a variant (block_advect<CENTRED, APIC>), the slow
// paths' arguments and results by value, and each axis's corner coordinates packed in one word
// (block_sample): end of substep 0 B of spills (APIC 0 B), time-centred 8 B, time-centred APIC
// 36 B. The same bits (host harness, GPU tests). H100 80GB HBM3, driver 580.159.04, one call,
// the same particles as above, main's one entry → these entries (4×256), ms:
//
//   case                     one entry   per variant   (2×512: one entry → per variant)
//   end of substep             0.604        0.498         0.649 → 0.538
//   time-centred               0.716        0.591         0.751 → 0.639
//   APIC, end of substep       1.157        1.056         1.265 → 1.171
//
// Whole substeps alternating (6 a way): G2P + advection 0.671 → 0.560 ms.
//
// Corner pairs (BLOCK_PAIRS = 1, helper i24g3; sparse_g2p_gpu.G2P_CORNERS): where no active lane of
// the warp crosses a brick along y and z for a component (its lattices' lower corners not on a
// brick's last layer), its 8 corners are the lower and upper cell along x (either brick: 2 brick
// picks) and their +8, +64, +72 neighbours, loaded at constant offsets from 2 addresses a field
// instead of 8 picked and 8 addressed corners; the home brick's index entry in 32-bit integers
// (block_home_slot). The same cells, hence the same bits (host harness: both ways; GPU tests). sm_90,
// 4×256, 64 registers: spills 0, 0, 0, 40 B (end, end APIC, centred, centred APIC). H100 80GB HBM3,
// driver 580.159.04, one call, the 8M dam break after 4 substeps (3,258 bricks), select → pairs, ms:
//
//   case                     select   pairs
//   end of substep            0.501   0.499   (ncu: 364.3M → 344.0M warp instructions, 598 → 577 µs)
//   time-centred              0.593   0.597
//   APIC, end of substep      1.055   1.002
//
// ncu of the end of substep (select): 1,457 warp-instruction slots a particle, 72% of issue slots
// busy (26.9% with no eligible warp, 10.4 cycles between a warp's instructions at 8 warps a
// scheduler: 50% occupancy, 64 registers), DRAM 251 MB read + 173 MB written (53 B a particle:
// at the floor), L1 hit 84%, L1 46% and L2 43% of peak: bound by instruction issue at half
// occupancy, not bytes. Pairs cut only 5.6% of the instructions (about a third of the warps'
// components take them: a warp's ~4–6 cells often straddle a row, and rows 0 and 7 of a brick
// cross along y or z); whole substeps alternating: G2P + advection 0.543 → 0.554 and 0.522 →
// 0.528 ms. So select stays the default but for APIC at the end of the substep
// (sparse_g2p_gpu.block_corners).
//
// Launch shapes (helper h21d; sparse_g2p_gpu.G2P_BLOCK_SHAPES, VOXFX_SPARSE_G2P_BLOCK_SHAPE; 8 × 128 the default
// since helper h21i): BLOCK_MIN_BLOCKS × BLOCK_THREADS = 8 × 128, 16 × 64 or 32 × 32 instead of 4 × 256 — the
// same 64 registers and spills (ptxas, sm_90),
// the same SASS but for the bounds, 1,024 threads an SM: H100 80GB HBM3, driver 580.159.04, the 8M dam break
// after 4 substeps, the kernel alone, the shapes in turn (bench/flip_sparse_g2p_project.py, medians of 7), select:
//
//   case                     4×256   8×128   16×64   32×32
//   end of substep           0.502   0.480   0.484   0.489
//   time-centred             0.594   0.575   0.583   0.595
//
// (7 × 128, 72 registers: 0.498 / 0.574; 6 × 128 and 3 × 256, 80: 0.510 / 0.588 and 0.552 / 0.625; 5 × 256, 48
// registers and 132 B of spills: 0.548 / 0.679.) What is left at 8 × 128 is the instruction count: ~1,450 issue
// slots a particle (i24g3's ncu) — the corners' index arithmetic (~60–70 instructions a component-sample besides
// its 8–16 loads and their addresses, ptxas rematerializing shifts at 64 registers), six lattice axes twice (~170)
// and the two block tests (~135 each); the issue's 0.4 ms asks for ~20% fewer of them, not another shape.
//
// The particle's brick table (BLOCK_TABLE = 1, helper h21g; VOXFX_SPARSE_G2P_CORNERS=table, auto's but for
// time-centred APIC since helper h21i: sparse_g2p_gpu.block_corners): the 2 × 2 × 2 bricks around the home cell
// (the lower neighbour along an axis where
// ⌊g⌋ lies in its brick's lower half) read once a particle from nbr27's row at constant offsets and kept in shared
// memory as (slot − r) · 512, a word a thread a brick (voxfx_g2p_block_table.cuh); both samples' corners lie in it
// (every cell within 4 of ⌊g⌋: the midpoint where it moved < 2.5 cells; else g2p_advect_bricks' corners, as any
// sample whose block has an inactive brick). A corner's pool index is v = e_x + e_y + e_z (per axis its brick bit at
// 9 + d and its local coordinate at 3d, without carries) plus the entry at v's bits 9–11 (table_read: one shared
// load), in place of the block test, its 8 row loads and pick8's 7 selects a corner and sample (and the 8 bases'
// registers); the home brick's index entry in 32-bit integers (block_home_slot). The same cells, hence the same bits
// (host harnesses tests/unit/test_cuda_g2p_table_host.py: the flip scenes, and fast faces whose midpoints leave the
// table; GPU tests: every corners). SASS of g2p_advect_block_end (nvcc 13.0, sm_90, 8 × 128, a closed domain's fast
// path, read here): ~1,500 → ~1,280 instructions a particle — entry 67, home slot 58, the table 83, sample 1's axes,
// encodings and block test 162 and its corners, 48 loads and blends 357, the velocity, x_m and sample 2's axes 207,
// its corners 237, push-out and stores 108; 64 registers, no spills (end; APIC 24 B, centred 24 B, centred APIC 40
// B). H100 80GB HBM3, driver 580.159.04, one call, the 8M dam break after 4 substeps (3,258 bricks), the kernel
// alone, the ways in turn (bench/flip_sparse_g2p_project.py, medians of 7; every way the first's bits), ms:
//
//   case                     select 4×256   table 4×256   select 8×128   table 8×128
//   end of substep              0.502          0.451          0.479          0.432
//   time-centred                0.595          0.551          0.576          0.537
//
// (−10% / −7%: fewer instructions, though each corner still costs an add, a mask, a shared load and an add
// besides its loads' IMAD.WIDE; what is left for 0.4 ms at 8 × 128: ~7% — see bench/RESULTS.md "h21g".)
//
// Helper h21i: a corner's per-axis code in one shift and an IMAD (table_axis_code: SASS −63…−68 instructions an
// entry, the same registers and spills); the table with APIC; 8 × 128 the default (sparse_g2p_gpu.G2P_BLOCK_SHAPES).
// H100 80GB HBM3, driver 580.159.04, one call, the same state, all ways in turn in one process (main's table header
// as "h21g"; bench/flip_sparse_g2p_project.py --apic --base, medians of 7; every way the first's bits), ms:
//
//   case                  h21g 4×256  h21i 4×256  h21g 8×128  h21i 8×128  select 4×256/8×128  pairs 4×256/8×128
//   end of substep           0.450       0.443       0.431       0.425        0.502 / 0.479       0.500 / 0.501
//   time-centred             0.552       0.555       0.537       0.540        0.595 / 0.576       0.599 / 0.603
//   APIC, end                0.992       0.996       0.934       0.937        1.057 / 1.020       1.002 / 0.949
//   APIC, time-centred       1.103       1.102       1.064       1.064        1.099 / 1.064       1.021 / 1.001
//
// (the code: −1.5% at the end of the substep, +0.6% time-centred, ±0.4% with APIC; auto: the table but for
// time-centred APIC, pairs; at 8 × 128 auto's corners are 2–6% faster than at 4 × 256 in every variant.)
//
// Helper s22c: the table's corner codes split (BLOCK_TABLE = 2, voxfx_g2p_block_wtable.cuh; auto's without APIC) and
// the closed lattices' upper-corner flag once a launch (BLOCK_UP_UNIFORM): fast path 1,196 → 1,160 instructions at
// the end of the substep; H100 80GB HBM3, the kernel alone, 0.4256 → 0.4225 ms (end), 0.5374 → 0.5312 (time-centred).
//
// Layout and brick tables: flip_sparse_transfer.cu's notes. Constants from Python (-D):
// AIR, FLUID, SOLID, PUSH_EPSILON.

#include "voxfx_g2p.cuh"  // g2p_velocity: the FLIP/PIC blend and APIC's C
#include "voxfx_g2p_bricks.cuh"  // corner_axis, blend_corners
#include "voxfx_g2p_home.cuh"  // Home, corner_cells_fast, Sampler, push_out_brick
#include "voxfx_sparse_index.cuh"  // BRICK_INDEX_ARGS
#ifndef G2P_MARKS  // the next substep's topology marks of the moved particles (1; helper s23j, VOXFX_SPARSE_G2P_MARKS)
#define G2P_MARKS 0
#endif
#if G2P_MARKS
#include "voxfx_topology_mark.cuh"  // mark_particle: mark_occupied's work
#endif

#include "voxfx_g2p_block_corners.cuh"  // AxisCorners, axis_corners, FaceSets, Corners, block_corners_slow,
                                        // blend_fields (BLOCK_UP_UNIFORM, BLOCK_PAIRS)

#ifndef BLOCK_MIN_BLOCKS  // blocks of BLOCK_THREADS an SM for __launch_bounds__ (sparse_g2p_gpu.G2P_BLOCK_MIN_BLOCKS)
#define BLOCK_MIN_BLOCKS 1
#endif
#ifndef BLOCK_THREADS  // sparse_g2p_gpu.G2P_THREADS
#define BLOCK_THREADS 512
#endif

#ifndef BLOCK_TABLE  // block_sample_table: the corners' bricks from the particle's table in shared memory (1;
#define BLOCK_TABLE 0  // VOXFX_SPARSE_G2P_CORNERS=table, sparse_g2p_gpu.block_corners; 2: tablew, its split codes,
#endif  // voxfx_g2p_block_wtable.cuh, helper s22c), else block_sample (0)

#ifndef BLOCK_TABLE_OR  // the entries whose table corners take h21g's per-axis code (table_axis_code<true>; helper
#define BLOCK_TABLE_OR 0  // h21n), a bit each: 1 end, 2 end APIC, 4 centred, 8 centred APIC (sparse_g2p_gpu's)
#endif
#if BLOCK_TABLE == 2
#include "voxfx_g2p_block_wtable.cuh"  // the table, split corner codes (helper s22c): the same names
#elif BLOCK_TABLE
#include "voxfx_g2p_block_table.cuh"  // Table, table_load, block_sample_table
#else
struct Table {};
#endif

// FIELDS sets of faces of F at g (cell units) into out[field], with grad (rows ∂u_a/∂(x, y,
// z)) of field 0 unless null: sample_faces_fast (flip_sparse_g2p.cu) per field, the corners
// found once for all fields (file notes).
template <int FIELDS>
__device__ __forceinline__ void block_sample(const Home& H, int closed, const int n[3], const float g[3],
                                             const FaceSets& F, float out[3][3], float* grad)
{
    AxisCorners face[3], centre[3];
    bool ok = H.slot >= 0;
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        face[d] = axis_corners(g[d], closed, n[d] + 1);
        centre[d] = axis_corners(g[d] - 0.5f, closed, n[d]);
        ok = ok && face[d].in && centre[d].in;
    }
    int lo[3], rel[3];
    unsigned need = 0u;  // bit d: the block is two bricks along d
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        const int l = min(face[d].i0, centre[d].i0) >> 3;
        const int top = max(face[d].i0 + face[d].up, centre[d].i0 + centre[d].up) >> 3;
        lo[d] = l;
        rel[d] = l - H.hb[d];
        need |= (unsigned)(top > l) << d;
        ok = ok && top - l <= 1 && rel[d] >= -1 && rel[d] + (top > l) <= 1;
    }
    int base[8];  // slot·SPARSE_CELLS of block brick lo + (r & 1, r >> 1 & 1, r >> 2), r ⊆ need
    if (ok) {
        const int* __restrict__ row = H.nbr27 + 27 * H.slot + sparse_offset_index(rel[0], rel[1], rel[2]);
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            const int s = (r & need) == (unsigned)r ? row[(r & 1) + 3 * ((r >> 1) & 1) + 9 * (r >> 2)] : 0;
            ok = ok && s >= 0;
            base[r] = s * SPARSE_CELLS;
        }
    }
    if (ok) {  // every corner in an active brick of the block: no walk test
        // per axis the four corner coordinates relative to the block's first cell 8·lo, each in
        // [0, 16) (bit 3: the block's brick, bits 0–2: the local coordinate), in one word:
        // face lower, face upper, centre lower, centre upper (4 bits each; fewer live registers
        // across the loads than i0, up and lo)
        // (bits 16 (face) and 17 (centre): the upper corner is the next cell of the lower one's brick: up,
        // and the lower one not on its brick's last layer)
        unsigned rc[3];
#pragma unroll
        for (int d = 0; d < 3; ++d) {
            const int b = 8 * lo[d];
            rc[d] = (unsigned)(face[d].i0 - b) | (unsigned)(face[d].i0 + face[d].up - b) << 4 |
                    (unsigned)(centre[d].i0 - b) << 8 | (unsigned)(centre[d].i0 + centre[d].up - b) << 12 |
                    (unsigned)(face[d].up && (face[d].i0 & 7) != 7) << 16 |
                    (unsigned)(centre[d].up && (centre[d].i0 & 7) != 7) << 17;
        }
#pragma unroll
        for (int a = 0; a < 3; ++a) {
            int lb[3], ub[3], ll[3], ul[3];  // lower and upper corner: block bit and local coordinate
            float t[3];
#pragma unroll
            for (int d = 0; d < 3; ++d) {
                const unsigned r = rc[d] >> (a == d ? 0 : 8);
                lb[d] = (r >> 3) & 1;
                ub[d] = (r >> 7) & 1;
                ll[d] = r & 7;
                ul[d] = (r >> 4) & 7;
                t[d] = a == d ? face[d].t : centre[d].t;
            }
            // pairs: along y and z the upper corner is the next cell of the lower one's brick (no brick
            // crossed, up = 1) for every lane of the warp (a warp's particles share their rows in the bins'
            // order): the 8 corners are two cells, lower and upper along x (either brick), each with its
            // cells +8 (y), +64 (z), +72 at constant offsets: 2 brick picks and 2 addresses a field, not 8
            // (the same cells as the corners below)
            const bool pairs =
                BLOCK_PAIRS && active_lanes_all((rc[1] >> (a == 1 ? 16 : 17)) & (rc[2] >> (a == 2 ? 16 : 17)) & 1u);
            if (pairs) {
                const int cell = (ll[2] << 6) | (ll[1] << 3), row = (lb[1] << 1) | (lb[2] << 2);
                const int i0 = pick8(base, lb[0] | row) + (cell | ll[0]);
                const int i1 = pick8(base, ub[0] | row) + (cell | ul[0]);
#pragma unroll
                for (int k = 0; k < FIELDS; ++k) {
                    const float* __restrict__ f = F.f[k][a];
                    const float p[8] = {f[i0], f[i1], f[i0 + 8], f[i1 + 8], f[i0 + 64], f[i1 + 64], f[i0 + 72],
                                        f[i1 + 72]};
                    out[k][a] = trilinear_blend(p, t[0], t[1], t[2], k == 0 && grad ? grad + 3 * a : nullptr);
                }
                continue;
            }
            int idx[8];
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const int bx = (q & 1) ? ub[0] : lb[0], by = (q & 2) ? ub[1] : lb[1], bz = (q & 4) ? ub[2] : lb[2];
                const int x = (q & 1) ? ul[0] : ll[0], y = (q & 2) ? ul[1] : ll[1], z = (q & 4) ? ul[2] : ll[2];
                idx[q] = pick8(base, bx | (by << 1) | (bz << 2)) + ((z << 6) | (y << 3) | x);
            }
            blend_fields<FIELDS>(F, a, idx, t, out, grad);
        }
        return;
    }
#pragma unroll
    for (int a = 0; a < 3; ++a) {  // g2p_advect_bricks' corners
        const Corners C = block_corners_slow(H, closed, n[0] + (a == 0), n[1] + (a == 1), n[2] + (a == 2),
                                             a == 0 ? g[0] : g[0] - 0.5f, a == 1 ? g[1] : g[1] - 0.5f,
                                             a == 2 ? g[2] : g[2] - 0.5f);
#pragma unroll
        for (int k = 0; k < FIELDS; ++k)
            out[k][a] = blend_corners(F.f[k][a], C.idx, C.t, k == 0 && grad ? grad + 3 * a : nullptr);
    }
}

#include "voxfx_g2p_block_push.cuh"  // Point, block_push_out_slow, block_push_out

// indexed_slot (voxfx_sparse_index.cuh: the brick index, else a binary search) of brick (bx, by, bz)
// of the key range (|b| < 2^20) in 32-bit integers: the index's offsets and entries fit (its
// size is at most sparse_gpu.INDEX_LIMIT = 2^22), so the same entry (19 instructions on the indexed
// path against 46, sm_90); the search as indexed_slot's.
__device__ __forceinline__ int block_home_slot(const int* __restrict__ index, int lx, int ly, int lz, int dx, int dy,
                                               int dz, const long long* __restrict__ keys,
                                               const int* __restrict__ slots, long long n_keys, int bx, int by,
                                               int bz)
{
    const int x = bx - lx, y = by - ly, z = bz - lz;
    if (dx > 0 && (unsigned)x < (unsigned)dx && (unsigned)y < (unsigned)dy && (unsigned)z < (unsigned)dz)
        return index[(z * dy + y) * dx + x];
    return sparse_slot(keys, slots, n_keys, sparse_key_of_voxel(8LL * bx, 8LL * by, 8LL * bz));
}

// One particle's update: g2p_advect_bricks' steps; u_n (centred) sampled on the corners of
// u_{n+1} and u_old at x, and of u_{n+1} at x_m (the corners depend on the point only).
template <bool CENTRED, bool APIC>
__device__ __forceinline__ void block_particle(float* __restrict__ pos, float* __restrict__ vel,
                                               float* __restrict__ c, long long p, const FaceSets& F,
                                               const unsigned char* __restrict__ solid, const Home& H, int closed,
                                               const int dims[3], const float o[3], float h, float inv_h, float flip,
                                               float pic, float dt, float half_dt, const float x0[3], const float g[3],
                                               const Table& T)
{
    float s1[3][3], grad[9];  // u_{n+1}, u_old (, u_n) at x
#if BLOCK_TABLE
    constexpr bool or_code = ((BLOCK_TABLE_OR >> (2 * CENTRED + APIC)) & 1) != 0;  // table_axis_code's form
    block_sample_table<CENTRED ? 3 : 2, or_code>(H, T, closed, dims, g, F, s1, APIC ? grad : nullptr);
#else
    block_sample<CENTRED ? 3 : 2>(H, closed, dims, g, F, s1, APIC ? grad : nullptr);
#endif
    g2p_velocity(vel, c, p, APIC, s1[0], s1[1], grad, flip, pic, inv_h);  // seed 003 Alg. 1
    // RK2: x_m = x + ½Δt·u(x), x' = x + Δt·u(x_m); centred (b = u_n): x_m = x + ½Δt·u_n(x),
    // x' = x + Δt·½(u_n + u_{n+1})(x_m)
    float gm[3], x1[3];
    for (int a = 0; a < 3; ++a) {
        const float xm = x0[a] + half_dt * (CENTRED ? s1[2][a] : s1[0][a]);
        gm[a] = (xm - o[a]) * inv_h;
    }
    FaceSets Fm;  // u_{n+1} (, u_n) at x_m
    for (int a = 0; a < 3; ++a) {
        Fm.f[0][a] = F.f[0][a];
        Fm.f[1][a] = F.f[2][a];
        Fm.f[2][a] = nullptr;
    }
    float s2[3][3];
#if BLOCK_TABLE
    block_sample_table<CENTRED ? 2 : 1, or_code>(H, T, closed, dims, gm, Fm, s2, nullptr);  // the same table
#else
    block_sample<CENTRED ? 2 : 1>(H, closed, dims, gm, Fm, s2, nullptr);
#endif
    for (int a = 0; a < 3; ++a) {
        const float v2 = CENTRED ? 0.5f * (s2[0][a] + s2[1][a]) : s2[0][a];
        x1[a] = x0[a] + dt * v2;
    }
    block_push_out(x1, x0, solid, H, closed, dims, o, h, inv_h);
    for (int a = 0; a < 3; ++a) pos[3 * p + a] = x1[a];
}

// G2P_MARKS (helper s23j; sparse_g2p_gpu.g2p_advect with marks): what the next substep's mark_occupied
// (flip_sparse_topology.cu) would write for the particles as this kernel leaves them, in the same topology
// (keys, slots and brick index are this launch's): marks_occupied (a flag a pool cell), *marks_missed,
// marks_speed2 (with marks_speeds, mark_occupied's speeds) and, unless null, *marks_most: the largest |v|² bits
// of all particles (transfer.max_speed's max_speed_squared: the step's speed read). Zero them first.
#if G2P_MARKS
#define G2P_MARKS_PARAMS                                                                                   \
    , unsigned char *__restrict__ marks_occupied, unsigned long long *__restrict__ marks_missed,           \
        unsigned int *__restrict__ marks_speed2, int marks_speeds, unsigned int *__restrict__ marks_most
#define G2P_MARKS_ARGS , marks_occupied, marks_missed, marks_speed2, marks_speeds, marks_most
#else
#define G2P_MARKS_PARAMS
#define G2P_MARKS_ARGS
#endif

// g2p_advect_bricks' arguments (flip_sparse_g2p.cu), every entry the same: one thread per
// particle, thread t on particle order[t] where use_order, else t; the home brick from the
// brick index.
#define G2P_BLOCK_PARAMS                                                                                            \
    float *__restrict__ pos, float *__restrict__ vel, float *__restrict__ c, long long n, int apic,                 \
        const float *__restrict__ u, const float *__restrict__ v, const float *__restrict__ w,                      \
        const float *__restrict__ old_u, const float *__restrict__ old_v, const float *__restrict__ old_w,          \
        const unsigned char *__restrict__ solid, const long long *__restrict__ keys, const int *__restrict__ slots, \
        long long n_keys, const int *__restrict__ nbr27, BRICK_INDEX_ARGS, int closed, int nx, int ny, int nz,     \
        float ox, float oy, float oz, float h, float inv_h, float flip, float pic, float dt, float half_dt,         \
        const int *__restrict__ order, int use_order, int centred, const float *__restrict__ b_u,                 \
        const float *__restrict__ b_v, const float *__restrict__ b_w G2P_MARKS_PARAMS

// g2p_advect_bricks' results for the variant (CENTRED: u_n's faces b_u, b_v, b_w; APIC: C
// written); the entries below, one a variant (sparse_g2p_gpu.g2p_advect picks by centred and apic),
// so each is compiled for its own registers: one entry of all four took 64 registers with 92 B
// of spills (file notes), the variants apart fewer (sparse_g2p_gpu's notes).
template <bool CENTRED, bool APIC>
__device__ __forceinline__ void block_advect(G2P_BLOCK_PARAMS)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const long long p = use_order ? (long long)order[t] : t;
    const float o[3] = {ox, oy, oz};
    const int dims[3] = {nx, ny, nz};
    const float x0[3] = {pos[3 * p], pos[3 * p + 1], pos[3 * p + 2]};
    const float g[3] = {(x0[0] - ox) * inv_h, (x0[1] - oy) * inv_h, (x0[2] - oz) * inv_h};
    Home H{keys, slots, n_keys, nbr27, -1, {0, 0, 0}};
    // g2p_advect_bricks' home (sampler_at): ⌊g⌋ >> 3, a slot only where g is finite and every
    // ⌊g_a⌋ lies within the key range
    bool inside = isfinite(g[0]) && isfinite(g[1]) && isfinite(g[2]);
#if BLOCK_TABLE
    int fl[3] = {0, 0, 0};  // ⌊g⌋ (where inside): the table's bricks
    if (inside)
        for (int a = 0; a < 3; ++a) {
            const float f = floorf(g[a]);
            inside = inside && f >= -LATTICE_LIMIT && f < LATTICE_LIMIT;
            fl[a] = inside ? (int)f : 0;
            H.hb[a] = fl[a] >> 3;
        }
#else
    if (inside)
        for (int a = 0; a < 3; ++a) {
            const float f = floorf(g[a]);
            inside = inside && f >= -LATTICE_LIMIT && f < LATTICE_LIMIT;
            H.hb[a] = inside ? ((int)f) >> 3 : 0;
        }
#endif
#if BLOCK_PAIRS || BLOCK_TABLE
    if (inside)
        H.slot = block_home_slot(index, index_lx, index_ly, index_lz, index_dx, index_dy, index_dz, keys, slots,
                                 n_keys, H.hb[0], H.hb[1], H.hb[2]);
#else
    if (inside) H.slot = INDEXED_SLOT((long long)H.hb[0], (long long)H.hb[1], (long long)H.hb[2]);
#endif
    else H.hb[0] = H.hb[1] = H.hb[2] = 0;
    const FaceSets F{{{u, v, w}, {old_u, old_v, old_w}, {b_u, b_v, b_w}}};
#if BLOCK_TABLE
    Table T{0u, 0u};  // act 0: every sample's slow path
    if (H.slot >= 0) T = table_load(H, fl);
#else
    const Table T{};
#endif
    block_particle<CENTRED, APIC>(pos, vel, c, p, F, solid, H, closed, dims, o, h, inv_h, flip, pic, dt, half_dt, x0,
                                  g, T);
#if G2P_MARKS  // the new position and velocity read back (this thread's own stores)
    mark_particle(pos, p, ox, oy, oz, inv_h, closed, nx, ny, nz, keys, slots, n_keys, index, index_lx, index_ly,
                  index_lz, index_dx, index_dy, index_dz, marks_occupied, marks_missed, vel, marks_speed2,
                  marks_speeds);
    if (marks_most) {  // max_speed_squared's |v|² and maximum (the same bits; a warp's max, one atomic)
        const float vx = vel[3 * p], vy = vel[3 * p + 1], vz = vel[3 * p + 2];
        group_max_into(marks_most, __float_as_uint(vx * vx + vy * vy + vz * vz), 0, true);
    }
#endif
}

#define G2P_BLOCK_ARGS                                                                                              \
    pos, vel, c, n, apic, u, v, w, old_u, old_v, old_w, solid, keys, slots, n_keys, nbr27, index, index_lx, index_ly, index_lz, index_dx, index_dy, index_dz, closed, \
        nx, ny, nz, ox, oy, oz, h, inv_h, flip, pic, dt, half_dt, order, use_order, centred, b_u, b_v, b_w G2P_MARKS_ARGS

// End of the substep (centred = 0), apic = 0.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS, BLOCK_MIN_BLOCKS) g2p_advect_block_end(G2P_BLOCK_PARAMS)
{
    block_advect<false, false>(G2P_BLOCK_ARGS);
}

// End of the substep, apic = 1.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS, BLOCK_MIN_BLOCKS)
    g2p_advect_block_end_apic(G2P_BLOCK_PARAMS)
{
    block_advect<false, true>(G2P_BLOCK_ARGS);
}

// Time-centred (centred = 1), apic = 0.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS, BLOCK_MIN_BLOCKS)
    g2p_advect_block_centred(G2P_BLOCK_PARAMS)
{
    block_advect<true, false>(G2P_BLOCK_ARGS);
}

// Time-centred, apic = 1.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS, BLOCK_MIN_BLOCKS)
    g2p_advect_block_centred_apic(G2P_BLOCK_PARAMS)
{
    block_advect<true, true>(G2P_BLOCK_ARGS);
}
