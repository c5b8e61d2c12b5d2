// The table through which the V-cycle's level-0 kernels that find indices from the grid's
// bricks read level 0's and level 1's arrays (flip_sparse_pressure_vcycle_bricks.cu's
// transfers, flip_sparse_pressure_level0.cu's neighbours): the arrays change with every set-up
// while the solver's captured graph keeps its kernel arguments, so the solver rewrites this
// device table (sparse_pressure_vcycle.brick_ptrs, Level0.brick_words) when it takes new tables.
#pragma once

#define BT_POSITION0 0  // const int*: flat cell → level-0 unknown (m0 where none)
#define BT_CELLS0 1     // const long long*: level-0 unknown → flat cell
#define BT_NBR27 2      // const int*: the grid's brick table (27 slots a slot, −1 inactive)
#define BT_MAP1 3       // const int*: level-1 candidate → its index in level 1's set (−1 none)
#define BT_POSITION1 4  // const int*: level-1 set index → level-1 unknown (m1 where none)
#define BT_CANDIDATES 5 // the candidates' count (pool capacity · 64), a value
#define BT_WORDS 6
