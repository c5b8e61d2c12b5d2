// The fused tables queued ahead of the topology's flags read (kernels/flip/sparse_topology_tables_ahead.py,
// VOXFX_SPARSE_TABLES_AHEAD=1): flip_sparse_topology.cu's topology_slot_tables and topology_cell_tables
// (no fills) with the new topology's key count and pool capacity taken from the flags on the device
// (the fused update's outputs hold the keys, slots, used slots and brick index for the most they can
// hold), so they run while the host reads the flags and does its Python after the read. Launched over
// `room` slots; where the update writes nothing (a particle missed, a brick beyond, no brick changed:
// flip_sparse_topology_fused.cu's update_skipped) or the new pool passes `room`, they write nothing and
// the host launches the tables after the read as before. The same values as the plain kernels at the
// host's sizes (tests/unit/test_cuda_sparse_topology_tables_ahead_host.py).

#include "voxfx_topology_tables.cuh"  // the plain kernels' per-thread work (sparse_cell_step, BRICK_INDEX_ARGS too)

// The new topology's key count and pool capacity from the flags (missed, beyond, added, freed) and the
// current topology's (n_keys, capacity): Topology.update's capacity, max(capacity, new count). False where
// no update is written or its pool passes room.
__device__ __forceinline__ bool ahead_sizes(const unsigned long long* __restrict__ flags, long long n_keys,
                                            long long capacity, long long room, long long& n_new, long long& cap)
{
    if (flags[0] != 0ULL || flags[1] != 0ULL || (flags[2] == 0ULL && flags[3] == 0ULL)) return false;
    n_new = n_keys - (long long)flags[3] + (long long)flags[2];
    cap = n_new > capacity ? n_new : capacity;
    return cap <= room;
}

// topology_slot_tables at the flags' sizes: threads [0, 27·room · 2) launched; keys, slots, used: the
// fused update's outputs (the new topology's, room for the most it holds).
extern "C" __global__ void topology_slot_tables_ahead(const unsigned long long* __restrict__ flags,
                                                      const long long* __restrict__ keys,
                                                      const int* __restrict__ slots, long long n_old, BRICK_INDEX_ARGS,
                                                      const unsigned char* __restrict__ used, long long cap_old,
                                                      long long room, int* __restrict__ coords,
                                                      int* __restrict__ nbr27)
{
    long long n_keys, capacity;
    if (!ahead_sizes(flags, n_old, cap_old, room, n_keys, capacity)) return;
    topology_slot_table_entry(keys, slots, n_keys, index, index_lx, index_ly, index_lz, index_dx, index_dy, index_dz,
                              used, capacity, coords, nbr27);
}

// topology_cell_tables (no refill) at the flags' sizes: room · 512 threads launched, the pool's cells
// = capacity · 512 (nbr's rows that long, as the plain kernel's).
extern "C" __global__ void topology_cell_tables_ahead(const unsigned long long* __restrict__ flags, long long n_old,
                                                      long long cap_old, long long room,
                                                      const int* __restrict__ nbr27,
                                                      const unsigned char* __restrict__ used,
                                                      const int* __restrict__ coords, int closed, int nx, int ny,
                                                      int nz, int* __restrict__ nbr, int marks,
                                                      unsigned char* __restrict__ exists_u,
                                                      unsigned char* __restrict__ exists_v,
                                                      unsigned char* __restrict__ exists_w,
                                                      unsigned char* __restrict__ wall,
                                                      unsigned char* __restrict__ solid, float* __restrict__ solid_u,
                                                      float* __restrict__ solid_v, float* __restrict__ solid_w)
{
    long long n_keys, capacity;
    if (!ahead_sizes(flags, n_old, cap_old, room, n_keys, capacity)) return;
    const long long cells = capacity * SPARSE_CELLS, t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    for (int d = 0; d < 6; ++d) nbr[d * cells + t] = sparse_cell_step(nbr27, (int)t, d);
    if (marks) topology_cell_marks(used, coords, t, closed, nx, ny, nz, exists_u, exists_v, exists_w, wall, solid,
                                   solid_u, solid_v, solid_w);
}
