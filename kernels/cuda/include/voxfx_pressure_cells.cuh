// The sparse pressure set-up's cell helpers (flip_sparse_pressure_cells.cu and, for its one-launch
// brick stage, flip_sparse_pressure_cells_brick.cu): the boundary face the projection sees and the
// union-find of the sealed-region labels, on global or shared parents.
#pragma once

// A face value as the projection sees it (sparse_pressure.boundary_faces): the solid's
// velocity where the face touches a SOLID cell on either side (lo: the cell below along
// the face's axis, −1 none) or does not exist, the grid's velocity elsewhere.
__device__ __forceinline__ float boundary_face(const float* __restrict__ f, const float* __restrict__ solid_f,
                                               const unsigned char* __restrict__ exists,
                                               const unsigned char* __restrict__ solid, int c, int lo)
{
    const bool touch = solid[c] != 0 || (lo >= 0 && solid[lo] != 0) || exists[c] == 0;
    return touch ? solid_f[c] : f[c];
}

// Root of v's tree (parents only ever point to smaller indices), halving the path on the way
// up: each visited cell is pointed at its grandparent, an ancestor, so every tree keeps its
// root and members. Reads through volatile: other threads hook roots meanwhile.
__device__ __forceinline__ int find_root_halving(int* parent, int v)
{
    volatile int* p = parent;
    int up = p[v];
    while (up != v) {
        const int next = p[up];
        if (next != up) p[v] = next;
        v = up;
        up = next;
    }
    return v;
}

// Join the trees of c and o by hooking the larger root under the smaller (atomicCAS, retried
// where another thread hooked it first), so a root stays its tree's lowest index. parent:
// global or shared memory.
__device__ __forceinline__ void unite(int* parent, int c, int o)
{
    int a = find_root_halving(parent, c), z = find_root_halving(parent, o);
    while (a != z) {
        if (a < z) {
            const int t = a;
            a = z;
            z = t;
        }
        const int old = atomicCAS(&parent[a], a, z);
        if (old == a) break;
        a = find_root_halving(parent, old);
        z = find_root_halving(parent, z);
    }
}
