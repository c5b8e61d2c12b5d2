// The sparse brick core's keys and index on the device (kernels/grid/sparse.py holds the
// design note; the constants here are checked against it by tests/unit/test_cuda_sources.py).
#pragma once
#include "voxfx_search.cuh"

#define SPARSE_BRICK_LOG2 3
#define SPARSE_BRICK 8
#define SPARSE_KEY_BITS 21
#define SPARSE_OFFSET 1048576LL  // 2^(KEY_BITS - 1)

// Key of the brick holding lattice voxel (i, j, k): z-major, as brick_keys() in Python;
// -1 when the brick lies outside the key range.
__device__ __forceinline__ long long sparse_key_of_voxel(long long i, long long j, long long k)
{
    long long bx = (i >> SPARSE_BRICK_LOG2) + SPARSE_OFFSET;
    long long by = (j >> SPARSE_BRICK_LOG2) + SPARSE_OFFSET;
    long long bz = (k >> SPARSE_BRICK_LOG2) + SPARSE_OFFSET;
    const long long limit = 1LL << SPARSE_KEY_BITS;
    if (bx < 0 || by < 0 || bz < 0 || bx >= limit || by >= limit || bz >= limit) return -1;
    return (bz << (2 * SPARSE_KEY_BITS)) | (by << SPARSE_KEY_BITS) | bx;
}

// The brick (bx, by, bz) of a key (sparse_key_of_voxel's, the inverse), less (lx, ly, lz).
__device__ __forceinline__ void sparse_brick_of_key(long long key, long long& bx, long long& by, long long& bz,
                                                    int lx = 0, int ly = 0, int lz = 0)
{
    const long long mask = (1LL << SPARSE_KEY_BITS) - 1;
    bx = (key & mask) - SPARSE_OFFSET - lx;
    by = ((key >> SPARSE_KEY_BITS) & mask) - SPARSE_OFFSET - ly;
    bz = (key >> (2 * SPARSE_KEY_BITS)) - SPARSE_OFFSET - lz;
}

// Thread t of a brick table pass, 27 threads a key (brick_tables, topology_slot_tables): key
// q = t / 27's slot s (its row of coordinates written by offset o = 13, the brick itself) and
// the brick (nx, ny, nz) at offset o (sparse_offset_index's order) whose slot goes to
// nbr27[27·s + o].
__device__ __forceinline__ void sparse_table_thread(long long t, const long long* __restrict__ keys,
                                                    const int* __restrict__ slots, int* __restrict__ coords, int& s,
                                                    int& o, long long& nx, long long& ny, long long& nz)
{
    const long long q = t / 27;
    o = (int)(t - 27 * q);
    long long bx, by, bz;
    sparse_brick_of_key(keys[q], bx, by, bz);
    s = slots[q];
    if (o == 13) {
        coords[3LL * s] = (int)bx;
        coords[3LL * s + 1] = (int)by;
        coords[3LL * s + 2] = (int)bz;
    }
    nx = bx + o % 3 - 1, ny = by + (o / 3) % 3 - 1, nz = bz + o / 9 - 1;
}

// Pool slot of the brick with *key* among n sorted keys (slots[] in key order), -1 if absent.
__device__ __forceinline__ int sparse_slot(const long long* __restrict__ keys, const int* __restrict__ slots,
                                           long long n, long long key)
{
    if (key < 0 || n <= 0) return -1;
    long long at = lower_bound(keys, n, key);
    return (at < n && keys[at] == key) ? slots[at] : -1;
}

// Offset of voxel (i, j, k) inside its brick's 8^3 block (z y x order).
__device__ __forceinline__ int sparse_local(long long i, long long j, long long k)
{
    return (int)((((k & 7) << 6) | ((j & 7) << 3)) | (i & 7));
}

// Brick neighbourhoods on the device (kernels/grid/sparse_mac.py): a pool of bricks, cell
// slot·512 + (lz·8 + ly)·8 + lx, and per slot the table nbr27[27·slot + o] of the slots of
// the 27 bricks at offsets (dx, dy, dz) ∈ {−1, 0, 1}³ (o = sparse_offset_index; −1 inactive,
// every entry −1 for a free slot): a stencil crosses a brick border with one table read.
#define SPARSE_CELLS (SPARSE_BRICK * SPARSE_BRICK * SPARSE_BRICK)

__device__ __forceinline__ int sparse_offset_index(int dx, int dy, int dz)
{
    return (dz + 1) * 9 + (dy + 1) * 3 + (dx + 1);
}

// Flat pool index of local cell (x, y, z) ∈ [−8, 15]³ of brick `slot`'s neighbourhood, −1
// where that brick is inactive (or `slot` is free).
__device__ __forceinline__ int sparse_cell_near(const int* __restrict__ nbr27, int slot, int x, int y, int z)
{
    const int s = nbr27[27LL * slot + sparse_offset_index(x >> 3, y >> 3, z >> 3)];
    return s < 0 ? -1 : s * SPARSE_CELLS + (((z & 7) << 6) | ((y & 7) << 3) | (x & 7));
}

// The cell one step along direction d (−x, +x, −y, +y, −z, +z: SparseMacGrid.nbr's order)
// from flat cell idx, −1 from −1 (grid.nbr[d][idx]).
__device__ __forceinline__ int sparse_cell_step(const int* __restrict__ nbr27, int idx, int d)
{
    if (idx < 0) return -1;
    const int l = idx & (SPARSE_CELLS - 1), axis = d >> 1, step = (d & 1) ? 1 : -1;
    return sparse_cell_near(nbr27, idx >> 9, (l & 7) + (axis == 0 ? step : 0),
                            ((l >> 3) & 7) + (axis == 1 ? step : 0), (l >> 6) + (axis == 2 ? step : 0));
}
