"""Level 0's smoothing brick by brick (issue 24, helper h19a): the sparse V-cycle's level-0
smoother as block Gauss-Seidel over the grid's 8³ bricks, one pass a smoothing on the device
(``cuda/flip_sparse_pressure_brick_smooth.cu``: a block a brick, its cells in shared memory)
where today's red-black sweeps take one launch a colour (~8-10 µs each, latency-bound: 9 of
level 0's ~11 launches an iteration at 8M).

The rule. An unknown's brick is its flat cell // 512 (``sparse_grid``: slot · 512 + the cell's
place in the brick, x + 8y + 64z). Inside each brick the same over-relaxed red-black sweeps as
``sparse_multigrid.sweep`` — x_c ← x_c + ω·((b_c + Σ_n v_n)/diag_c − x_c), Σ added −x, +x, −y,
+y, −z, +z — where a neighbour n in the same brick gives its current x and one in another brick
(the halo) its value at the smoothing's start. Pre-smoothing starts from x = 0 (the halo is 0
throughout: no read of another brick) and sweeps red, black ``SWEEPS`` times (3 by default);
post-smoothing reads the halo once (x after the prolongation) and sweeps in the adjoint order (black, red). An
affine smoothing x ← x + P (b − A x) with P = blockdiag(P_B) (P_B the brick's forward sweeps on
its diagonal block A_BB) before the coarse correction and x ← x + Pᵀ (b − A x) after it: the
V-cycle stays a symmetric positive definite preconditioner, as CG needs (tests: ⟨V a, c⟩ =
⟨a, V c⟩; the forward order after it breaks that).

Measured before building it (this 2-core CPU, ``bench/flip_mg_iterations.py``, the dam break's
own systems, warm starts, MG_OMEGA 1.3, MG_DENSE 2): CG iterations 128³ (1M particles, substeps
1, 4, 7, 10, 13) base [6, 9, 9, …] against the bricks' the same; 64³ (125k, substeps 1, 4, 7,
10) 26 → 29 (+11.5%; 3 sweeps inside a brick: 26). Bigger grids have relatively fewer cells on a
brick's face, so the 8M one should lose least.

Measured on the device (H100 80GB HBM3, driver 580.159.04, 8M dam break; bench/RESULTS.md, h19a and
h19a2): the solver's z the same as this reference's bit for bit for every block shape; the PCG loop
222 → 216-218 µs an iteration (the two brick kernels ~28 and ~48 µs by event pairs), but with 2 sweeps
one CG iteration more in half the substeps (11 → 12), so the row's pressure 3.59 → 3.71 ms; ``SWEEPS``
3 keeps the red-black sweeps' CG counts on the 8M row ([10, 12, 12, 12, 11, 11, 11, 11]) but its loop
is slower (226.9 µs), pressure 3.77 ms: not the default. h20a (the kernels' span loads, ``span_table``
below; ``SWEEPS`` 3 by default): the loop 221.9 → 203.1 µs an iteration, the row's pressure 3.58 / 3.56
→ 3.40 / 3.33 ms with the red-black CG counts (separate processes, alternating). h20d made "brick" the
default: the GPU files of the pressure solve, the sparse FLIP, its accuracy and memory check passed with
it (the tests that compare a solver without it against one with it, or check the red-black kernels,
pin "rb"), the 8M Fast frames' pressure device time over frames 6-11 72.1 / 83.1 / 77.3 → 64.2 / 74.4 /
76.8 ms in three alternating pairs with the same CG iterations frame by frame (±1); on this 2-core CPU
the NumPy dam break's pressure +13-14% (64³, 96³; one gather a direction), its substep within the noise
(bench/RESULTS.md, h20d). The device applies it to workspace solvers (the brick table) whose level 0 is
launched by itself; others (the host set-up, ``PERSIST`` off, the sorted-key set-up, a tail from level 0)
keep the red-black sweeps, as the dense solver does. It went back to "rb" by default after session 20's
final call (H100 80GB HBM3, driver 580.159.04): on the 65M dam break (512³, Fast) frames 10 and 11 (the
pool 75k → 120k–132k bricks, a solver built) took 22.3 / 34.1 s, 31.0 s for frame 10 in the call after it
(`--stages`: 30.8 s of device in the topology stage, where the solve launched ahead of the next set-up
runs), against 195 / 200 ms with "rb" (early stop on or off). Not a fault of the brick path (helper h20g, from
those calls' logs): the run is deterministic (frames 0–9 the same bricks and CFL counts in both calls) and
its own trajectory — the brick V-cycle's pressure, within the same 1e-4 tolerance, differs from the red-black
one's from frame 3 on (26,991 against 26,901 bricks), and Fast's 3 substeps where the CFL asks 72–179 amplify
it — put spray at ~300 cells a substep in frames 10–11 (CFL asking 179 / 173 substeps: 5·179/3 ≈ 298 cells;
frame 9's 92 ≈ 153, "rb"'s frames ≤ 77 ≈ 128), past the topology classes' ``CLASS_MAX_MARGIN`` of 256, so
``incremental_keys`` returned None before its read (3 calls a frame, no second) and ``topology_keys`` built
the bricks on the array path: the 30.8 s of "topology" (6 mallocs, 6,361 MiB), the CG counts normal (35 a
frame), the pool 75k → 121k → 132k bricks. ``sparse_reach.class_limit`` now serves every margin in a closed
box whose brick index a walk at 256 covers (the 512³ box's 66³ entries ≤ 67³), the same bricks (host
harnesses past 256). Session 21's first call (H100 80GB HBM3, driver 580.159.04; ``bench/flip_h20g_call.sh``):
the reach, margins, device-margin and brick GPU files 28 + 11 passed; the 65M Fast frames with "brick" built no
brick on the array path (frames 10–11: largest margins 302 / 292 cells, frames 225 / 244 ms; "rb" 199 / 204 ms
with margins ≤ 131, its calmer trajectory), frames 1–8 115–178 ms against "rb"'s 130–177: **"brick" the default
again**.

``SMOOTHER`` (``VOXFX_SPARSE_MG_SMOOTHER``, read when a V-cycle or a solver is built; a value
here overrides it): "brick" (the default since h20d) or "rb" (the red-black sweeps).
"""

from __future__ import annotations

import os

import numpy as np

from ..settings import env_choice

SMOOTHERS = ("brick", "rb")  # the default first (h20d)
SMOOTHER = None
# Sweeps inside a brick before and after the coarse correction (VOXFX_SPARSE_MG_BRICK_SWEEPS, read at
# import; the kernels compile it in as BRICK_SWEEPS): 3 by default (h20a; MG_SWEEPS, 2, before). The
# passes run in shared memory, so a third costs little on the device; on this CPU 3 gave the
# red-black sweeps' CG iterations at 64³ (26, where 2 gave 29) and at 128³ (42 over substeps 1-13, as
# 2 did); on the 8M row (H100) 3 keep the red-black counts [10, 12, 12, 12, 11, 11, 11, 11] where 2
# take one more in half the substeps (h19a2, the coordinator's call 1 of session 20, h20a).
SWEEPS = int(os.environ.get("VOXFX_SPARSE_MG_BRICK_SWEEPS", "3"))
if SWEEPS < 1:
    raise ValueError(f"VOXFX_SPARSE_MG_BRICK_SWEEPS must be at least 1, not {SWEEPS}")
BRICK_CELLS = 512  # sparse_mac.CELLS: a brick's cells, slot · 512 + place
_F32 = np.float32


def smoother(given=None) -> str:
    """Level 0's smoother: *given*, else ``SMOOTHER``, else VOXFX_SPARSE_MG_SMOOTHER ("brick")."""
    return env_choice("VOXFX_SPARSE_MG_SMOOTHER", SMOOTHERS, given or SMOOTHER, default="brick")


def brick_inside(level, xp=np):
    """(6, m) bool: whether unknown c's neighbour in direction d is an unknown of c's brick
    (``level.cells``: the flat cells; the sentinel is in none)."""
    m = level.m
    brick = xp.concatenate([xp.asarray(level.cells) // BRICK_CELLS, xp.full(1, -1, xp.int64)])
    nbr = level.nbr[:, :m]
    return (brick[nbr] == brick[None, :m]) & (nbr < m)


def brick_sweep(level, index, v, b, colour, omega):
    """One colour in place: x_c ← x_c + ω·((b_c + Σ_d v_d)/diag_c − x_c) (g itself where ω = 1),
    v_d = x[n_d] where n_d is in c's brick, else halo[n_d]: *v* holds x then the halo (x its first
    n entries, a view), *index* (``_gather_index``) each neighbour's place in it."""
    lo, hi = (0, level.m_red) if colour == 0 else (level.m_red, level.m)
    if hi <= lo:
        return
    at = index[:, lo:hi]
    s = v[at[0]]
    for d in range(1, 6):
        s = s + v[at[d]]
    g = (b[lo:hi] + s) / level.diag[lo:hi]
    x = v[lo:hi]
    v[lo:hi] = g if omega == 1.0 else x + _F32(omega) * (g - x)


def _gather_index(level, inside, n, xp):
    """(6, m): neighbour d of unknown c as a place in [x, halo] (x of *n* entries, the sentinel
    last): n_d inside c's brick, else n + n_d. One gather a direction where the sweeps took two and
    a choice (the CPU's brick smoothing ~40-50% slower than the red-black sweeps before: h20d)."""
    nbr = level.nbr[:, :level.m]
    return xp.where(inside, nbr, nbr + n)


def pre_smooth(level, inside, b, omega, sweeps, xp=np, boundary=None):
    """x from 0: *sweeps* × (red, black) inside each brick, the halo 0; then *boundary*'s sweeps inside
    the brick, the halo still 0 (before the brick's sweeps where ``boundary.first``). *boundary*: None, or
    extra sweeps over some unknowns (``bench/_mg_variants.BrickBoundary``, issue 24, helper s23a: measured
    on the CPU, not on the device; its ``sweep(level, index, v, b, colours)`` updates v in place)."""
    n = b.shape[0]
    v = xp.zeros(2 * n, b.dtype)  # x, then the halo (0)
    index = _gather_index(level, inside, n, xp)
    if boundary is not None and boundary.first:
        boundary.sweep(level, index, v, b, (0, 1))
    for _ in range(sweeps):
        brick_sweep(level, index, v, b, 0, omega)
        brick_sweep(level, index, v, b, 1, omega)
    if boundary is not None and not boundary.first:
        boundary.sweep(level, index, v, b, (0, 1))
    return v[:n].copy()


def post_smooth(level, inside, x, b, omega, sweeps, colours=(1, 0), xp=np, boundary=None):
    """*x* smoothed in place: *sweeps* × *colours* (the adjoint order: black, red) inside each
    brick, the halo x as given; *boundary*'s sweeps before them in its ``post`` colours (the adjoint of
    ``pre_smooth``'s: black, red), after them where ``boundary.first``."""
    n = x.shape[0]
    v = xp.concatenate([x, x])  # x, then the halo (x as given)
    index = _gather_index(level, inside, n, xp)
    if boundary is not None and not boundary.first:
        boundary.sweep(level, index, v, b, boundary.post)
    for _ in range(sweeps):
        for colour in colours:
            brick_sweep(level, index, v, b, colour, omega)
    if boundary is not None and boundary.first:
        boundary.sweep(level, index, v, b, boundary.post)
    x[...] = v[:n]
    return x


# The span table (issue 24, helper h20a; the device's mg_brick_span_table and the "span" kernels,
# sparse_pressure_brick_smooth.SMOOTH_THREADS "span"): level 0 is numbered red then black, each colour in
# flat-cell order (``sparse_pressure.Unknowns``), so a brick's unknowns of one parity class
# q = (x + y + z) & 1 are one contiguous run in the brick's local order. Per slot SPAN_WORDS int32:
# mask[16] (bit l % 32 of word l // 32: cell l an unknown), base[q][w] (the class's first unknown
# of the slot plus its unknowns in words before w) and the red parity: cell l of class q has the
# unknown base[q][l // 32] + popcount(mask[l // 32] & the class's bits below l).
SPAN_WORDS = 64
_SPAN_BASE, _SPAN_RED = 16, 48


def _class_bits(q, w):
    """The class-q bits of mask word w (bss_class_bits)."""
    return 0x55AA55AA if (q ^ (w >> 1)) & 1 else 0xAA55AA55


def span_table(position, live, m_red, m):
    """(slots, SPAN_WORDS) int32 from level 0's *position* (flat cell → unknown, m where none; slots ·
    512 long) and *live* (a slot's brick active: nbr27's centre ≥ 0; other slots hold no unknown).
    Raises ValueError where a slot's class is not one contiguous run in local order (another
    numbering than ``sparse_pressure.Unknowns``'s)."""
    position = np.asarray(position).reshape(-1, BRICK_CELLS)
    slots = position.shape[0]
    table = np.zeros((slots, SPAN_WORDS), np.int64)
    local = np.arange(BRICK_CELLS)
    parity = ((local & 7) + ((local >> 3) & 7) + (local >> 6)) & 1
    for slot in range(slots):
        u = position[slot] if live[slot] else np.full(BRICK_CELLS, m)
        on = u < m
        bits = on.reshape(16, 32).astype(np.int64) << np.arange(32)
        table[slot, :16] = bits.sum(axis=1)
        for q in (0, 1):
            run = u[on & (parity == q)]
            if run.size and not np.array_equal(run, run[0] + np.arange(run.size)):
                raise ValueError(f"slot {slot}: level 0's class-{q} unknowns are not one run in local order")
            counts = (on & (parity == q)).reshape(16, 32).sum(axis=1)
            first = int(run[0]) if run.size else m
            lo = _SPAN_BASE + 16 * q
            table[slot, lo:lo + 16] = first + np.concatenate([[0], np.cumsum(counts)[:-1]])
        if on.any():
            c = int(np.flatnonzero(on)[0])
            table[slot, _SPAN_RED] = parity[c] ^ int(u[c] >= m_red)
    return table.astype(np.uint32).view(np.int32)


def span_unknowns(table, m):
    """Each slot's cells' unknowns (slots · 512, m where none) from *table* (``span_table``'s rule)."""
    table = np.asarray(table).view(np.uint32).astype(np.int64)
    out = np.full((table.shape[0], BRICK_CELLS), m, np.int64)
    for cell in range(BRICK_CELLS):
        w, i = cell >> 5, cell & 31
        q = ((cell & 7) + ((cell >> 3) & 7) + (cell >> 6)) & 1
        mask = table[:, w]
        below = mask & _class_bits(q, w) & ((1 << i) - 1)
        count = np.array([bin(int(v)).count("1") for v in below])
        on = (mask >> i) & 1 == 1
        out[on, cell] = table[on, _SPAN_BASE + 16 * q + w] + count[on]
    return out.ravel()


SPAN_HALO = 384  # a slot's halo places: 6 faces (−x, +x, −y, +y, −z, +z) of 64


def halo_places():
    """(dir, cell) of each of a brick's SPAN_HALO halo places (place i: face i // 64, its cell a + 8c,
    a = i % 8, c = i // 8 % 8, in the face's two other axes): *dir* the nbr27 entry of the brick across
    the face, *cell* the cell of that brick it mirrors (the coordinate across the face 0 ↔ 7)."""
    i = np.arange(SPAN_HALO)
    f, p = i >> 6, i & 63
    axis, up, a, c = f >> 1, f & 1, p & 7, p >> 3
    direction = 13 + np.where(up == 1, 1, -1) * np.array([1, 3, 9])[axis]
    at = np.where(up == 1, 0, 7)
    lx = np.where(axis == 0, at, a)
    ly = np.where(axis == 1, at, np.where(axis == 0, a, c))
    lz = np.where(axis == 2, at, c)
    return direction, (lz << 6) | (ly << 3) | lx


def span_halo(position, nbr27, m):
    """(slots, SPAN_HALO) int32: each live slot's halo places' unknowns (the unknown of the mirrored cell
    of the brick across the face, m where none or where the slot is free), as the post-smoothing reads
    them (the device's mg_brick_span_table with a halo table)."""
    position = np.asarray(position).reshape(-1, BRICK_CELLS)
    nbr27 = np.asarray(nbr27).reshape(-1, 27)
    direction, cell = halo_places()
    across = nbr27[:, direction]  # (slots, SPAN_HALO)
    out = np.where(across >= 0, position[np.maximum(across, 0), cell[None, :]], m)
    out[nbr27[:, 13] < 0] = m
    return out.astype(np.int32)
