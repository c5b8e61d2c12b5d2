// Several flat pool channels written in one launch (kernels/grid/sparse_join.py join_kept: a
// retopologize's kept channels; kernels/flip/sparse_topology_tables.py: their fills in
// topology_cell_tables): up to JOIN_CHANNELS channels c0…c(n−1) passed as pointers, channel i of
// 1-byte items where bit i of `bytes` is set, else of 4-byte items (a float32 channel moved as its
// bits: NaN backgrounds exactly), its value's bits v_i (the low byte for a 1-byte channel).
#pragma once

#define JOIN_CHANNELS 8
#define JOIN_POINTERS(p, T) T p##0, T p##1, T p##2, T p##3, T p##4, T p##5, T p##6, T p##7
#define JOIN_LIST(p) {p##0, p##1, p##2, p##3, p##4, p##5, p##6, p##7}

// Every channel's item `cell` ← its value's bits (c, v: JOIN_LIST's arrays of the arguments).
__device__ __forceinline__ void join_store(void* const* c, const unsigned int* v, int n, int bytes, long long cell)
{
    for (int i = 0; i < n && i < JOIN_CHANNELS; ++i) {
        if ((bytes >> i) & 1) ((unsigned char*)c[i])[cell] = (unsigned char)v[i];
        else ((unsigned int*)c[i])[cell] = v[i];
    }
}
