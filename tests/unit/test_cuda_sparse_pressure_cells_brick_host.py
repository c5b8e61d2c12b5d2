"""cells_rhs_brick (cuda/flip_sparse_pressure_cells_brick.cu; sparse_pressure_cells.CELLS_BRICK
"fused"), the cells stage's first three launches in one, against those three launches (cells_rhs,
cells_hook_bricks_local, cells_hook_faces) and the NumPy reference, on the host without a GPU: nvcc
builds the kernels as host functions, one "thread" a block, the blocks run one after another in a
given order (so either brick of a face may be the second to finish and join its links), atomics
plain. Then cells_label and cells_sealed as the stage launches them. The same b bit for bit, touch
on FLUID cells, labels, reach, sealed count and kinds; the face tickets kept from one stage to the
next (their epochs) and stale values in them change nothing; mutants of the kernel fail. The
device run: tests/gpu/test_flip_sparse_pressure_cells_brick_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_bricks_host import brick_tables
from tests.unit.test_cuda_sparse_pressure_cells_host import HARNESS, _tank
from voxfx.kernels import backend
from voxfx.kernels.flip import density, sparse_pressure, sparse_pressure_cells
from voxfx.kernels.flip.grid import AIR, FLUID

# Input: HARNESS's up to nbr, then scale, crowd_on (and its values and counts), the capacity, nbr27
# (27 × capacity), way (0: the three launches, 1: cells_rhs_brick, 2: cells_rhs_brick without the faces,
# then cells_hook_faces), runs R, the blocks' order
# (n / 512), the tickets (3 × capacity), the first epoch. Output per run: b (n hex), touch (n),
# label (n), reach (n + 1), the sealed count, kind (n); then the tickets.
FUSED = HARNESS.split("int main() {")[0].replace(
    '#include "flip_sparse_pressure_cells.cu"',
    '#include "flip_sparse_pressure_cells.cu"\n#include "BRICK_FILE"') + r"""
int main() {
    int n;
    if (scanf("%d", &n) != 1) return 1;
    std::vector<unsigned char> cell(n), solid(n), eu(n), ev(n), ew(n);
    std::vector<float> u(n), v(n), w(n), su(n), sv(n), sw(n);
    read_bytes(cell); read_bytes(solid);
    for (auto* f : {&u, &v, &w, &su, &sv, &sw}) read_floats(*f);
    read_bytes(eu); read_bytes(ev); read_bytes(ew);
    std::vector<int> nbr(6 * (size_t)n);
    for (auto& x : nbr) scanf("%d", &x);
    float scale;
    int crowd_on, cap, way, runs, epoch;
    scanf("%a %d", &scale, &crowd_on);
    float inv_n0 = 0.0f, one_tau = 0.0f, alpha_dt = 0.0f, src_scale = 0.0f;
    std::vector<int> crowd(1, 0);
    if (crowd_on) {
        scanf("%a %a %a %a", &inv_n0, &one_tau, &alpha_dt, &src_scale);
        crowd.resize(n);
        for (auto& x : crowd) scanf("%d", &x);
    }
    scanf("%d", &cap);
    std::vector<int> nbr27(27 * (size_t)cap), order(n / 512), tickets(3 * (size_t)cap);
    for (auto& x : nbr27) scanf("%d", &x);
    scanf("%d %d", &way, &runs);
    for (auto& x : order) scanf("%d", &x);
    for (auto& x : tickets) scanf("%d", &x);
    scanf("%d", &epoch);
    for (int run = 0; run < runs; ++run, ++epoch) {
        // poisoned outputs: the stage allocates them uninitialised
        std::vector<unsigned char> touch(n, 7), reach(n + 1, 5), kind(n, 7);
        std::vector<float> b(n, -7.0f);
        std::vector<int> parent(n, -7), label(n, -7);
        int count = -5;
        // way 3: cells_rhs_brick_pairs then cells_label_brick ("1"); 4: _pairs then cells_label ("links");
        // 5: cells_rhs_brick then cells_label_brick ("label"); 6: "inner" then cells_label_brick
        const bool pairs = way == 3 || way == 4, inner = way == 2 || way == 6, by_brick = way == 3 || way >= 5;
        if (way >= 1) {
            h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n / 512);
            for (int blk : order) {
                h_block.x = (unsigned)blk;
                (pairs ? cells_rhs_brick_pairs : cells_rhs_brick)(
                    cell.data(), solid.data(), u.data(), v.data(), w.data(), su.data(), sv.data(), sw.data(),
                    eu.data(), ev.data(), ew.data(), nbr27.data(), n, scale, b.data(), touch.data(), parent.data(),
                    crowd.data(), crowd_on, inv_n0, one_tau, alpha_dt, src_scale, reach.data(), &count,
                    tickets.data(), epoch, inner ? 0 : 1);
            }
            if (inner) ONE_PER_ITEM(n / 512 * 192, cells_hook_faces(cell.data(), nbr.data(), n, parent.data()));
        } else {
            ONE_PER_ITEM(n, cells_rhs(cell.data(), solid.data(), u.data(), v.data(), w.data(), su.data(), sv.data(),
                                      sw.data(), eu.data(), ev.data(), ew.data(), nbr.data(), n, scale, 1, b.data(),
                                      touch.data(), parent.data(), crowd.data(), crowd_on, inv_n0, one_tau, alpha_dt,
                                      src_scale, reach.data(), &count));
            ONE_PER_ITEM(n / 512, cells_hook_bricks_local(cell.data(), nbr.data(), n, parent.data()));
            ONE_PER_ITEM(n / 512 * 192, cells_hook_faces(cell.data(), nbr.data(), n, parent.data()));
        }
        if (by_brick) {
            h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n / 512);
            for (int blk : order) {
                h_block.x = (unsigned)blk;
                cells_label_brick(cell.data(), touch.data(), n, parent.data(), label.data(), reach.data());
            }
        } else {
            ONE_PER_ITEM(n, cells_label(cell.data(), touch.data(), n, parent.data(), label.data(), reach.data()));
        }
        ONE_PER_ITEM(n, cells_sealed(cell.data(), label.data(), n, reach.data(), &count, kind.data()));
        print_stage(b, touch, label, reach, count, kind);
    }
    for (int x : tickets) printf("%d\n", x);
    return 0;
}
"""
_STUBS = ["template <typename T> T plain_exch(T* p, T v) { T o = *p; *p = v; return o; }",
          "#define atomicExch plain_exch", "#define __threadfence() ((void)0)"]
# Mutants that a check below must catch: the z links inside a brick, the links across faces, the
# face tickets' test (the first of two bricks joins, before its neighbour's parents exist), b's
# sum in another order, and touch without the neighbours across a face.
MUTANTS = {
    "no z links": ("unite(up, t, t + 64);", ";"),
    "y links skipped": ("!(run && types[t + 7] == CELL_FLUID)", "!run"),
    "no face links": ("if (cell[o] == CELL_FLUID) unite(parent, first + t, o);", ""),
    "first joins": ("tickets[3 * lower + (d >> 1)], epoch) == epoch", "tickets[3 * lower + (d >> 1)], epoch) != epoch"),
    "sum order": ("((diff[0] + diff[1]) + diff[2])", "(diff[0] + (diff[1] + diff[2]))"),
    "touch inside": ("across[d] ? cell[o[d]] : types[o[d] - first]", "across[d] ? 2 : types[o[d] - first]"),
    # CELLS_PAIRS: a face's links past its first skipped, a row's first link skipped after the row
    # before's last (not neighbours), the label pass without its global chase (a local root's own index)
    "pairs first only": ("if (!link[q] || ((i & 7)", "if (!link[q] || i > 0 || ((i & 7)"),
    "pairs row wrap": ("((i & 7) != 0 && link[q - 1])", "(i > 0 && link[q - 1])"),
    "label no chase": ("above == c ? c : find_root_halving(parent, c);", "c;"),
}
# 1 "fused": cells_rhs_brick; 2 "inner": cells_rhs_brick without the faces, then cells_hook_faces; with
# CELLS_PAIRS: 3 "1" (cells_rhs_brick_pairs, cells_label_brick), 4 "links", 5 "label", 6 "inner" and "label"
WAYS = (1, 2, 3, 4, 5, 6)
MUTANT_WAYS = {"no face links": (1, 5), "first joins": (1, 3, 4, 5), "pairs first only": (3, 4),  # the ways
               "pairs row wrap": (3, 4), "label no chase": (3, 5, 6)}  # each changes (else all)
_BRICK_FILE = "flip_sparse_pressure_cells_brick.cu"


def _source(text):
    return with_defines(FUSED, sparse_pressure_cells._K, _STUBS).replace("BRICK_FILE", text)


@pytest.fixture(scope="module")
def fused_device(tmp_path_factory):
    return _build(tmp_path_factory, _source(_BRICK_FILE), name="cells_brick")


@pytest.fixture(scope="module")
def mutant_devices(tmp_path_factory):
    text = (backend.CUDA_DIR / _BRICK_FILE).read_text()
    d = tmp_path_factory.mktemp("cells_brick_mutants")
    built = {}
    for i, (name, (old, new)) in enumerate(MUTANTS.items()):
        assert text.count(old) == 1, name
        path = d / f"mutant{i}.cu"
        path.write_text(text.replace(old, new))
        built[name] = _build(tmp_path_factory, _source(str(path)), name=f"cells_brick_mutant{i}")
    return built


def cell_steps(nbr27):
    """grid.nbr (6 × 512·capacity) from a brick table, as sparse_mac's cell_neighbours makes it on
    the device (sparse_cell_step: −1 where the brick one step away is inactive or the slot free)."""
    cap = nbr27.shape[0]
    idx = np.arange(512 * cap)
    slot, local = idx >> 9, idx & 511
    xyz = [local & 7, (local >> 3) & 7, local >> 6]
    out = np.empty((6, idx.size), np.int64)
    for d in range(6):
        c = [a.copy() for a in xyz]
        c[d >> 1] += 1 if d & 1 else -1
        s = nbr27[slot, (c[2] // 8 + 1) * 9 + (c[1] // 8 + 1) * 3 + c[0] // 8 + 1]
        out[d] = np.where(s < 0, -1, s * 512 + (((c[2] & 7) << 6) | ((c[1] & 7) << 3) | (c[0] & 7)))
    return out


def _lines(g, dt, way, order, tickets, epoch, runs=1, crowding=None, tables=None):
    """The harness's input; *tables*: (nbr, nbr27) in place of the grid's."""
    n = g.size
    nbr, nbr27 = (g.nbr, brick_tables(g)[1]) if tables is None else tables
    lines = [str(n)] + [str(int(x)) for name in ("cell", "solid") for x in g[name]]
    for name in ("u", "v", "w", "solid_u", "solid_v", "solid_w"):
        lines += [float(x).hex() for x in g[name]]
    lines += [str(int(x)) for name in g.EXISTS for x in g[name]]
    lines += [str(int(x)) for x in nbr.ravel()]
    lines.append(f"{float(np.float32(-g.h / dt)).hex()} {int(crowding is not None)}")
    if crowding is not None:
        lines.append(" ".join(float(x).hex() for x in crowding.kernel_args(g.h)))
        lines += [str(int(x)) for x in crowding.counts[:n]]
    lines += [str(g.capacity), *map(str, nbr27.ravel()), f"{way} {runs}", *map(str, order), *map(str, tickets),
              str(epoch)]
    return lines


def _outputs(harness, lines, n, runs=1):
    """[(b, touch, label, reach, count, kind)] a run, and the tickets after the last."""
    out = harness.raw(lines).split()
    each, got = 5 * n + 2, []
    for r in range(runs):
        o = out[r * each:(r + 1) * each]
        got.append((np.array([float.fromhex(x) for x in o[:n]], np.float32), np.array(o[n:2 * n], np.uint8),
                    np.array(o[2 * n:3 * n], np.int64), np.array(o[3 * n:4 * n + 1], np.uint8), int(o[4 * n + 1]),
                    np.array(o[4 * n + 2:5 * n + 2], np.uint8)))
    return got, np.array(out[runs * each:], np.int64)


def _same(a, b, fluid):
    """Two stages' outputs agree: b's bits, touch on FLUID cells, labels, reach, count, kinds."""
    return (np.array_equal(a[0].view(np.uint32), b[0].view(np.uint32)) and np.array_equal(a[1][fluid], b[1][fluid])
            and all(np.array_equal(x, y) for x, y in zip(a[2:4], b[2:4])) and a[4] == b[4]
            and np.array_equal(a[5], b[5]))


def _orders(slots, seed):
    rng = np.random.default_rng(seed)
    return [np.arange(slots), np.arange(slots)[::-1], rng.permutation(slots)]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("sealed", [False, True])
def test_fused_brick_stage_gives_the_three_launches_values(fused_device, sealed, way):
    """cells_rhs_brick then cells_label and cells_sealed against cells_rhs, cells_hook_bricks_local
    and cells_hook_faces then the same two, with the blocks in slot order, reversed and shuffled;
    and against the reference (b bit for bit, SciPy's components, pressure_rhs's kinds)."""
    g = _tank(sealed, seed=31 + sealed)
    n, slots, dt = g.size, g.capacity, 1 / 89
    assert n == 512 * slots
    fluid = g["cell"] == FLUID
    tickets = np.zeros(3 * slots, np.int64)
    (old,), _ = _outputs(fused_device, _lines(g, dt, 0, np.arange(slots), tickets, 1), n)
    raw = np.where(fluid, sparse_pressure.face_sum(g, *sparse_pressure.boundary_faces(g)) * np.float32(-g.h / dt),
                   np.float32(0)).astype(np.float32)
    assert np.array_equal(old[0].view(np.uint32), raw.view(np.uint32))
    assert np.array_equal(old[2], sparse_pressure.label_components(g, fluid))
    ref_b, ref_kind, ref_enclosed, _ = sparse_pressure.pressure_rhs(g, dt)
    assert np.array_equal(old[5], ref_kind) and (old[4] > 0) == sealed
    for order in _orders(slots, 7 + sealed):
        (new,), _ = _outputs(fused_device, _lines(g, dt, way, order, tickets, 1), n)
        assert _same(new, old, fluid)
    fb, kind, _, _ = sparse_pressure_cells.assemble(g, new[0], new[2], new[3], new[4], np)
    assert np.array_equal(fb.view(np.uint32), ref_b.view(np.uint32)) and np.array_equal(kind, ref_kind)
    nb = g.nbr
    assert np.array_equal(new[1][fluid] != 0, ((nb < 0) | (g["cell"][np.maximum(nb, 0)] == AIR)).any(axis=0)[fluid])


@pytest.mark.parametrize("way", (1, 3))
def test_face_tickets_keep_their_epochs_from_stage_to_stage(fused_device, way):
    """Three stages on one set of tickets (epochs 5, 6, 7), starting from stale values (older
    epochs, random): the same outputs each stage; afterwards every ticket is 0, stale or 7, and
    the faces with FLUID on both sides hold 7."""
    g = _tank(True, seed=41)
    n, slots, dt = g.size, g.capacity, 1 / 89
    fluid = g["cell"] == FLUID
    stale = np.random.default_rng(3).integers(0, 5, 3 * slots)
    (old,), _ = _outputs(fused_device, _lines(g, dt, 0, np.arange(slots), stale, 5), n)
    runs, tickets = _outputs(fused_device, _lines(g, dt, way, _orders(slots, 2)[2], stale, 5, runs=3), n, runs=3)
    assert all(_same(r, old, fluid) for r in runs)
    assert np.all((tickets == stale) | (tickets == 7))
    _, nbr27 = brick_tables(g)
    cell = g["cell"].reshape(slots, 8, 8, 8)  # slot, z, y, x
    faces = {0: (cell[..., 7], cell[..., 0]), 1: (cell[:, :, 7, :], cell[:, :, 0, :]),
             2: (cell[:, 7], cell[:, 0])}
    both = 0
    for axis, (hi, lo) in faces.items():
        for s in range(slots):
            o = nbr27[s, 13 + (1, 3, 9)[axis]]
            if nbr27[s, 13] == s and o >= 0 and (hi[s] == FLUID).any() and (lo[o] == FLUID).any():
                assert tickets[3 * s + axis] == 7
                both += 1
    assert both > 10


@pytest.mark.parametrize("way", WAYS)
def test_the_density_source_goes_into_the_fused_stage_as_into_cells_rhs(fused_device, way):
    g = _tank(False, seed=43)
    n, slots, dt = g.size, g.capacity, 1 / 71
    counts = np.random.default_rng(9).integers(0, 40, n + 1).astype(np.int32)
    crowding = density.Crowding(counts, 8, 0.3, dt)
    zeros = np.zeros(3 * slots, np.int64)
    (old,), _ = _outputs(fused_device, _lines(g, dt, 0, np.arange(slots), zeros, 1, crowding=crowding), n)
    (new,), _ = _outputs(fused_device, _lines(g, dt, way, _orders(slots, 4)[2], zeros, 1, crowding=crowding), n)
    assert _same(new, old, g["cell"] == FLUID)
    ref_b, _, _, _ = sparse_pressure.pressure_rhs(g, dt, crowding)
    fb, _, _, _ = sparse_pressure_cells.assemble(g, new[0], new[2], new[3], new[4], np)
    assert np.array_equal(fb.view(np.uint32), ref_b.view(np.uint32))


def test_a_free_slot_and_mutants(fused_device, mutant_devices):
    """The tank with slot 1 free (every nbr27 entry −1 and no neighbours in grid.nbr: its FLUID
    cells are each their own sealed-or-not component) gives the three launches' values; each
    mutant (MUTANTS) differs from them on the sealed tank, in one block order or another, in
    every way it changes (MUTANT_WAYS)."""
    g = _tank(True, seed=47)
    n, slots, dt = g.size, g.capacity, 1 / 89
    fluid = g["cell"] == FLUID
    zeros = np.zeros(3 * slots, np.int64)
    _, nbr27 = brick_tables(g)
    assert np.array_equal(cell_steps(nbr27), g.nbr)  # the two tables the two ways read agree
    free = np.where(nbr27 == 1, -1, nbr27)
    free[1] = -1
    tables = (cell_steps(free), free)
    assert (fluid[512:1024]).sum() > 100
    (old,), _ = _outputs(fused_device, _lines(g, dt, 0, np.arange(slots), zeros, 1, tables=tables), n)
    for way in WAYS:
        for order in _orders(slots, 13):
            (new,), _ = _outputs(fused_device, _lines(g, dt, way, order, zeros, 1, tables=tables), n)
            assert _same(new, old, fluid)
    assert np.array_equal(old[2][512:1024][fluid[512:1024]], np.flatnonzero(fluid[512:1024]) + 512)  # each alone
    (old,), _ = _outputs(fused_device, _lines(g, dt, 0, np.arange(slots), zeros, 1), n)
    for name, mutant in mutant_devices.items():
        for way in MUTANT_WAYS.get(name, WAYS):
            caught = False
            for order in _orders(slots, 11):
                try:
                    (got,), _ = _outputs(mutant, _lines(g, dt, way, order, zeros, 1), n)
                except (ValueError, IndexError):  # a mutant that crashes or prints garbage fails too
                    caught = True
                    break
                caught = caught or not _same(got, old, fluid)
            assert caught, (name, way)
