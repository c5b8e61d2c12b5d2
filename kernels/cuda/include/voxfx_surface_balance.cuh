// The lean gather with its lanes balanced (flip_surface_lean.cu includes it at its end; surface_gpu
// VOXFX_LEVEL_SET_GATHER_BALANCE=on, opt-in): particle_level_set_lean_split's nodes and φ bit for bit, but a
// warp's row of cells no longer costs its fullest lane alone.
//
// Why (s23c, H100 80GB HBM3, the 65M Fast dam break's frame 11, gather_work's counters): a warp is a row of 32
// nodes along x and walks its rows of cells in lockstep (their (y, z) are the warp's, so the rows, their culls
// and their order are the same for every lane; only a lane's x-range of cells differs); each row costs the warp
// its fullest lane's points, and beside crowded cells (up to 7,068 points) a few lanes test thousands while the
// rest wait: 25.9G lane slots for 7.0G tests (27%), the gather 26–29 ms of the level set's ~50.
//
// How, keeping each node's sums in node_phi_lean's order (a float add chain — W += w, then sx, sy, sz, sr by fmaf
// or product-then-add —, which no split and recombination rounds the same way; so a node's chain stays in its
// own lane, and what moves is the arithmetic before it): in a row whose fullest lane has at least BALANCE_ROW
// points, the BALANCE_OWNERS fullest lanes ("owners", ties by lane) keep in place only as many points as the
// next fullest lane has (the share); every lane tests its first min(n, share) points as node_phi_lean does.
// Then the owners' remaining points, in rounds of 32 a owner: the warp's 32 lanes each make one point's terms
// (particle_terms: w, dx, dy, dz — the d², the quotient and the cube, ~16 of a test's ~21 instructions) for
// every owner in turn, into the warp's shared memory, and each owner adds its 32 terms to its own sums in order
// (add_terms: the same operations on the same operands). So a node sums every point of its rows in order, each
// term made from the same bits by the same arithmetic: the same φ bit for bit, whichever lane made a term.
// Cost of such a row, in issue slots of the warp: ~21 × share + ~21 per owner-round + ~8 × the fullest owner's
// remainder (the chains of ≤ 8 owners run side by side), against ~21 × the fullest lane's points before.
// tests/unit/test_cuda_surface_balance_host.py runs it with a warp's 32 lanes as host threads.
#pragma once

#if !defined(blockIdx) || defined(HOST_WARP_THREADS)  // the one-thread host harnesses leave it out

#ifndef BALANCE_OWNERS
#define BALANCE_OWNERS 8  // lanes of a warp whose points beyond the share the warp tests
#endif
#ifndef BALANCE_ROW
#define BALANCE_ROW 64  // a row whose fullest lane tests fewer points runs as node_phi_lean's
#endif
#ifndef BALANCE_NOTE
#define BALANCE_NOTE(slot)  // the host harness counts the balanced rows and their owners
#endif
#define BALANCE_WARPS 4  // a block's warps: the tile's 512 nodes over 4 blocks (surface_gpu: split 4 or more)

// An owner's row of terms is 33 wide: the owners' chains read the same k of their rows together, which a
// stride of 32 would put in one bank (8-way conflicts); 33 puts owner o's float4 in banks 4o..4o+3, its r in bank o.
struct BalanceWarp {
    float4 terms[BALANCE_OWNERS][33];  // an owner's round: its points' (w, dx, dy, dz)
    float radius[BALANCE_OWNERS][33];  // and their r
    int n[32];                         // each lane's points in the row
    int start[BALANCE_OWNERS];         // an owner's first point past its share
    int excess[BALANCE_OWNERS];        // its points past the share (0: the slot has no owner)
    float x[BALANCE_OWNERS];           // its node's x (the warp's y, z are every lane's)
    int share;
};

// The row's plan: each lane's share of its own points in place (the return) and, for an owner, its slot
// (else −1). Every lane of the warp calls it. Ranks by (n descending, lane): a permutation of 0..31, so
// slot r < BALANCE_OWNERS has exactly one lane; the share is the n of rank BALANCE_OWNERS.
__device__ __forceinline__ int balance_plan(BalanceWarp& sh, int lane, int n, int s, float x, int& slot)
{
    sh.n[lane] = n;
    __syncwarp();
    int rank = 0;
    for (int b = 0; b < 32; ++b) {
        int nb = sh.n[b];
        rank += (nb > n || (nb == n && b < lane)) ? 1 : 0;
    }
    if (rank == BALANCE_OWNERS) sh.share = n;
    __syncwarp();
    const int share = sh.share;
    slot = -1;
    if (rank < BALANCE_OWNERS) {
        const bool owns = n > share;
        sh.excess[rank] = owns ? n - share : 0;
        sh.start[rank] = s + share;
        sh.x[rank] = x;
        if (owns) slot = rank;
    }
    __syncwarp();  // the slots written; sh.n and sh.share read by every lane before the next row rewrites them
    return min(n, share);
}

// The owners' points past their shares, in rounds of 32 points an owner (the plan's slots, nonincreasing in
// excess by rank). Every lane of the warp calls it; an owner adds its terms to its sums m in point order.
__device__ __forceinline__ void balance_rest(BalanceWarp& sh, int lane, int slot, NodeSums& m,
                                             const float4* __restrict__ packed, float y, float z, float R2, float inv)
{
    const int most = sh.excess[0];
    for (int base = 0; base < most; base += 32) {
        for (int o = 0; o < BALANCE_OWNERS; ++o) {
            const int e = sh.excess[o];
            if (base >= e) break;  // the next slots have no more
            const int k = base + lane;
            if (k < e) {
                const float4 q = packed[sh.start[o] + k];
                sh.terms[o][lane] = particle_terms(q, sh.x[o], y, z, R2, inv);
                sh.radius[o][lane] = q.w;
            }
        }
        __syncwarp();
        if (slot >= 0) {
            const int count = min(32, sh.excess[slot] - base);
            for (int k = 0; k < count; ++k) {
                const float4 e = sh.terms[slot][k];
                add_terms(m, e.x, e.y, e.z, e.w, sh.radius[slot][k]);
            }
        }
        __syncwarp();  // the terms read before the next round writes them
    }
}

// node_phi_lean for the 32 lanes of a warp together (gathers: whether this lane's node gathers; the others
// walk the rows with no points), the balanced rows as above. The same rows, points and order for each node.
__device__ __forceinline__ float node_phi_balance(BalanceWarp& sh, int lane, bool gathers,
                                                  const float4* __restrict__ packed, const int* __restrict__ starts,
                                                  float x, float y, float z, float cox, float coy, float coz,
                                                  float inv_edge, int cx, int cy, int cz, float R, float band)
{
    float R2 = R * R;
    float inv = reciprocal_step(R2);
    float ux = (x - cox) * inv_edge, uy = (y - coy) * inv_edge, uz = (z - coz) * inv_edge;
    float Rc = R * inv_edge + SLACK;

    int klo = max((int)floorf(uz - Rc), 0), khi = min((int)floorf(uz + Rc), cz - 1);
    int jlo = max((int)floorf(uy - Rc), 0), jhi = min((int)floorf(uy + Rc), cy - 1);
    NodeSums m = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int ck = klo; ck <= khi; ++ck) {  // the warp's y, z: these bounds and culls are every lane's
        float gz = gap_to_cell(uz, ck);
        float left_z = Rc * Rc - gz * gz;
        if (left_z <= 0.0f) continue;
        for (int cj = jlo; cj <= jhi; ++cj) {
            float gy = gap_to_cell(uy, cj);
            float left = left_z - gy * gy;
            if (left <= 0.0f) continue;
            float half = sqrtf(left);
            int ilo = max((int)floorf(ux - half - SLACK), 0), ihi = min((int)floorf(ux + half + SLACK), cx - 1);
            int s = 0, last = 0;
            if (gathers && ilo <= ihi) {
                int row = (ck * cy + cj) * cx;
                s = starts[row + ilo], last = starts[row + ihi + 1];
            }
            const bool heavy = (int)warp_all_max_redux((unsigned int)(last - s)) >= BALANCE_ROW;
            int slot = -1, cut = last;
            if (heavy) {
                cut = s + balance_plan(sh, lane, last - s, s, x, slot);
                BALANCE_NOTE(slot);
            }
            for (; s + 4 <= cut; s += 4) {
                float4 a = packed[s], b = packed[s + 1], c = packed[s + 2], d = packed[s + 3];
                add_particle(m, a, x, y, z, R2, inv);
                add_particle(m, b, x, y, z, R2, inv);
                add_particle(m, c, x, y, z, R2, inv);
                add_particle(m, d, x, y, z, R2, inv);
            }
            for (; s < cut; ++s) add_particle(m, packed[s], x, y, z, R2, inv);
            if (heavy) balance_rest(sh, lane, slot, m, packed, y, z, R2, inv);
        }
    }
    return phi_of_sums(m.W, m.sx, m.sy, m.sz, m.sr, band);
}

// particle_level_set_lean_split (parts ≥ 4: blockDim.x = 512 / parts ≤ 32·BALANCE_WARPS) with node_phi_balance:
// a warp is one row of TILE_X = 32 nodes, and it gathers (or returns) as a whole — a node past the grid's x edge
// or deep inside (the interior skip) walks the rows with no points.
extern "C" __global__ void particle_level_set_lean_balance(GATHER_LEAN_ARGS, int parts, long long first)
{
    static_assert(TILE_X == 32, "a warp is a row of the tile");
    __shared__ BalanceWarp shared[BALANCE_WARPS];
    const long long b = first + blockIdx.x / parts;
    const int t = (int)(blockIdx.x % parts) * blockDim.x + threadIdx.x;
    int i, j, k;
    long long node = 0;
    const bool in = tile_node(b, t, nbx, nby, nx, ny, nz, &i, &j, &k, &node);
    if (!active[b]) {  // the whole block
        if (in) phi[node] = band;
        return;
    }
    if (j >= ny || k >= nz) return;  // the whole warp (its row's j, k)
    const float x = ((float)i + 0.5f) * h + ox, y = ((float)j + 0.5f) * h + oy, z = ((float)k + 0.5f) * h + oz;
    const bool deep = in && interior_at(interior, skip, x, y, z, cox, coy, coz, inv_edge, cx, cy, cz);
    const float v = node_phi_balance(shared[threadIdx.x >> 5], (int)(threadIdx.x & 31), in && !deep, packed, starts,
                                     x, y, z, cox, coy, coz, inv_edge, cx, cy, cz, R, band);
    if (in) phi[node] = deep ? -band : v;  // deep inside: no gather (the interior skip)
}

#endif  // the one-thread host harnesses
