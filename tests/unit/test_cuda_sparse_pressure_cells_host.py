"""The fused set-up kernels of the sparse pressure solve (cuda/flip_sparse_pressure_cells.cu)
against the NumPy reference (sparse_pressure.pressure_rhs: boundary faces, face sums, the
sealed-region labels by SciPy's connected components), on the host without a GPU: nvcc
builds the kernels as host functions (one "thread" per block, atomics plain, no FMA
contraction as the module is compiled) and a C++ driver launches them in
sparse_pressure_cells.pressure_rhs's order; ``assemble`` then finishes on NumPy arrays.
The device run is tests/gpu/test_flip_sparse_pressure_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE
from voxfx.kernels.flip import density, sparse_pressure, sparse_pressure_cells, sparse_transfer
from voxfx.kernels.flip.grid import AIR, FLUID, SOLID
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec

# Input: n, cell, solid (n each), u v w solid_u solid_v solid_w (n hex floats each),
# exists_u exists_v exists_w (n each), nbr (6 × n), scale (hex), link_init, hook (0:
# cells_hook, 1: cells_hook_bricks then cells_hook_faces, 2: cells_hook_bricks_local then
# cells_hook_faces), crowd_on, then with it 1/n₀, 1 + τ,
# α/Δt, h²/Δt (hex) and the counts (n): the density correction. Output: b (n hex), touch (n),
# label (n), reach (n + 1), the sealed count, kind (n).
HARNESS = PREAMBLE.replace('#include "flip_sparse_pressure.cu"', '#include "flip_sparse_pressure_cells.cu"') + r"""
#define ONE_PER_ITEM(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
static void read_bytes(std::vector<unsigned char>& v) {
    for (auto& x : v) { int t; scanf("%d", &t); x = (unsigned char)t; }
}
// The stage's outputs as both cells harnesses print them: b (hex), touch, label, reach, the sealed count, kind.
template <class B, class T, class L, class R, class K>
static void print_stage(const B& b, const T& touch, const L& label, const R& reach, int count, const K& kind) {
    for (float x : b) printf("%a\n", x);
    for (auto x : touch) printf("%d\n", (int)x);
    for (int x : label) printf("%d\n", x);
    for (auto x : reach) printf("%d\n", (int)x);
    printf("%d\n", count);
    for (auto x : kind) printf("%d\n", (int)x);
}
static void read_floats(std::vector<float>& v) { for (auto& x : v) scanf("%a", &x); }
int main() {
    int n;
    if (scanf("%d", &n) != 1) return 1;
    std::vector<unsigned char> cell(n), solid(n), eu(n), ev(n), ew(n), touch(n, 7), reach(n + 1, 5), kind(n, 7);
    std::vector<float> u(n), v(n), w(n), su(n), sv(n), sw(n), b(n, -7.0f);
    read_bytes(cell); read_bytes(solid);
    for (auto* f : {&u, &v, &w, &su, &sv, &sw}) read_floats(*f);
    read_bytes(eu); read_bytes(ev); read_bytes(ew);
    std::vector<int> nbr(6 * (size_t)n), parent(n, -7), label(n, -7);
    for (auto& x : nbr) scanf("%d", &x);
    float scale;
    int link_init, hook, crowd_on;
    scanf("%a %d %d %d", &scale, &link_init, &hook, &crowd_on);
    float inv_n0 = 0.0f, one_tau = 0.0f, alpha_dt = 0.0f, src_scale = 0.0f;
    std::vector<int> crowd(1, 0);
    if (crowd_on) {
        scanf("%a %a %a %a", &inv_n0, &one_tau, &alpha_dt, &src_scale);
        crowd.resize(n);
        for (auto& x : crowd) scanf("%d", &x);
    }
    int count = -5;  // reach 5s and count −5: cells_rhs zeroes both (the stage allocates them uninitialised)
    ONE_PER_ITEM(n, cells_rhs(cell.data(), solid.data(), u.data(), v.data(), w.data(), su.data(), sv.data(), sw.data(),
                              eu.data(), ev.data(), ew.data(), nbr.data(), n, scale, link_init, b.data(),
                              touch.data(), parent.data(), crowd.data(), crowd_on, inv_n0, one_tau, alpha_dt,
                              src_scale, reach.data(), &count));
    if (hook) {  // sparse_pressure_cells.HOOK "bricks": a block a slot (its one thread walks the 512 cells)
        if (hook == 2)  // BRICK_LINKS "local"
            ONE_PER_ITEM(n / 512, cells_hook_bricks_local(cell.data(), nbr.data(), n, parent.data()));
        else
            ONE_PER_ITEM(n / 512, cells_hook_bricks(cell.data(), nbr.data(), n, parent.data()));
        ONE_PER_ITEM(n / 512 * 192, cells_hook_faces(cell.data(), nbr.data(), n, parent.data()));
    } else {
        ONE_PER_ITEM(n, cells_hook(cell.data(), nbr.data(), n, parent.data()));
    }
    ONE_PER_ITEM(n, cells_label(cell.data(), touch.data(), n, parent.data(), label.data(), reach.data()));
    ONE_PER_ITEM(n, cells_sealed(cell.data(), label.data(), n, reach.data(), &count, kind.data()));
    print_stage(b, touch, label, reach, count, kind);
    return 0;
}
"""


@pytest.fixture(scope="module")
def cells_device(tmp_path_factory):
    k = sparse_pressure_cells._K
    return _build(tmp_path_factory, with_defines(HARNESS, k))


def _tank(sealed: bool, seed: int):
    """A closed tank on bricks with walls, a moving obstacle, air, liquid and random face
    velocities; *sealed*: random cell types over the whole box besides (many FLUID regions
    that reach no AIR, walled in by SOLID cells, the box walls or each other)."""
    rng = np.random.default_rng(seed)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (20, 12, 18))
    up = np.asarray(spec.upper)
    pos = np.concatenate([(rng.uniform(0.0, 0.4, (6000, 3)) * up), (rng.uniform(0.7, 0.95, (3000, 3)) * up)])
    pos = pos.astype(np.float32)
    g = SparseFlipGrid(spec, np, closed=True)
    obstacle = np.array([(i, j, 2) for i in range(3, 7) for j in range(2, 5)])
    g.update(pos, 3, obstacle=obstacle, obstacle_velocity=rng.normal(0.0, 0.5, obstacle.shape).astype(np.float32))
    sparse_transfer.classify(g, pos)
    n = g.size
    for name in ("u", "v", "w"):
        g[name] = rng.normal(0.0, 1.0, n).astype(np.float32)
    if sealed:
        g["cell"] = rng.choice(np.array([AIR, FLUID, SOLID], np.uint8), n, p=[0.04, 0.66, 0.30])
    return g


def _run(harness, g, dt, link_init=1, hook=0, crowding=None):
    n = g.size
    lines = [str(n)] + [str(int(x)) for name in ("cell", "solid") for x in g[name]]
    for name in ("u", "v", "w", "solid_u", "solid_v", "solid_w"):
        lines += [float(x).hex() for x in g[name]]
    lines += [str(int(x)) for name in g.EXISTS for x in g[name]]
    lines += [str(int(x)) for x in g.nbr.ravel()]
    lines.append(f"{float(np.float32(-g.h / dt)).hex()} {int(link_init)} {int(hook)} {int(crowding is not None)}")
    if crowding is not None:
        lines.append(" ".join(float(x).hex() for x in crowding.kernel_args(g.h)))
        lines += [str(int(x)) for x in crowding.counts[:n]]
    out = harness.raw(lines).split()
    b = np.array([float.fromhex(x) for x in out[:n]], np.float32)
    touch = np.array(out[n:2 * n], np.uint8)
    label = np.array(out[2 * n:3 * n], np.int32)
    reach = np.array(out[3 * n:4 * n + 1], np.uint8)
    return b, touch, label, reach, int(out[4 * n + 1]), np.array(out[4 * n + 2:5 * n + 2], np.uint8)


@pytest.mark.parametrize("link_init, hook", [(1, 0), (0, 0), (1, 1), (1, 2), (0, 2)])
@pytest.mark.parametrize("sealed", [False, True])
def test_fused_setup_kernels_equal_pressure_rhs(cells_device, sealed, link_init, hook):
    """Every kernel's output against the reference; the labels' union-find on the flat cells
    (cells_hook, its trees started at the cells themselves or at a neighbour below) or brick
    by brick (*hook*: cells_hook_bricks, or cells_hook_bricks_local, and cells_hook_faces)."""
    g = _tank(sealed, seed=3 + sealed)
    assert g.size % 512 == 0
    dt = 1 / 97
    b, touch, label, reach, count, device_kind = _run(cells_device, g, dt, link_init, hook)
    fluid = g["cell"] == FLUID
    # the raw right-hand side, bit for bit
    raw = np.where(fluid, sparse_pressure.face_sum(g, *sparse_pressure.boundary_faces(g)) * np.float32(-g.h / dt),
                   np.float32(0)).astype(np.float32)
    assert np.array_equal(b.view(np.uint32), raw.view(np.uint32))
    # labels: the lowest flat index of each FLUID cell's component (SciPy's components)
    assert np.array_equal(label.astype(np.int64), sparse_pressure.label_components(g, fluid))
    nb = g.nbr
    assert np.array_equal(touch != 0, fluid & ((nb < 0) | (g["cell"][np.maximum(nb, 0)] == AIR)).any(axis=0))
    ref_b, ref_kind, ref_enclosed, ref_labels = sparse_pressure.pressure_rhs(g, dt)
    assert count == (0 if ref_enclosed is None else int(ref_enclosed.sum()))
    assert (count > 0) == sealed  # the random tank has sealed regions, the liquid one none
    fb, kind, enclosed, labels = sparse_pressure_cells.assemble(g, b, label, reach, count, np)
    assert np.array_equal(fb.view(np.uint32), ref_b.view(np.uint32))
    assert np.array_equal(kind, ref_kind)
    assert np.array_equal(device_kind, ref_kind)  # cells_sealed's pins: the unknowns need no read of the count
    if sealed:
        assert np.array_equal(enclosed, ref_enclosed) and np.array_equal(labels, ref_labels)
        assert int((kind != g["cell"]).sum()) == len(np.unique(labels[enclosed]))  # one pin per sealed region
    else:
        assert enclosed is None and labels is None


@pytest.mark.parametrize("sealed", [False, True])
def test_the_density_source_is_added_as_the_array_code_adds_it(cells_device, sealed):
    """cells_rhs with a ``density.Crowding`` (random counts, many cells past 1 + τ times n₀):
    the raw b is the array code's b + (h²/Δt)·density.source, bit for bit, and ``assemble``'s
    b is ``sparse_pressure.pressure_rhs(grid, dt, crowding)``'s (the sealed regions' means
    removed after the source)."""
    g = _tank(sealed, seed=21 + sealed)
    dt = 1 / 71
    counts = np.random.default_rng(7).integers(0, 40, g.size + 1).astype(np.int32)  # + the bins' extra entry
    crowding = density.Crowding(counts, 8, 0.3, dt)
    b, _, label, reach, count, _ = _run(cells_device, g, dt, crowding=crowding)
    fluid = g["cell"] == FLUID
    raw = np.where(fluid, sparse_pressure.face_sum(g, *sparse_pressure.boundary_faces(g)) * np.float32(-g.h / dt),
                   np.float32(0)).astype(np.float32)
    s = density.source(counts[:g.size], fluid, 8, 0.3, dt)
    assert (s > 0).sum() > 100  # the source is on in many cells
    want = np.where(fluid, raw + np.float32(g.h * g.h / dt) * s, raw).astype(np.float32)
    assert np.array_equal(b.view(np.uint32), want.view(np.uint32))
    ref_b, _, ref_enclosed, _ = sparse_pressure.pressure_rhs(g, dt, crowding)
    fb, _, _, _ = sparse_pressure_cells.assemble(g, b, label, reach, count, np)
    assert np.array_equal(fb.view(np.uint32), ref_b.view(np.uint32))
    assert (ref_enclosed is not None) == sealed


# Input: as HARNESS up to nbr, then p (n hex), Δt/h (hex). Output: u, v, w after project_faces (n hex each).
PROJECT = HARNESS.split("int main() {")[0] + r"""
int main() {
    int n;
    if (scanf("%d", &n) != 1) return 1;
    std::vector<unsigned char> cell(n), solid(n), eu(n), ev(n), ew(n);
    std::vector<float> u(n), v(n), w(n), su(n), sv(n), sw(n), p(n), ou(n, -7.0f), ov(n, -7.0f), ow(n, -7.0f);
    read_bytes(cell); read_bytes(solid);
    for (auto* f : {&u, &v, &w, &su, &sv, &sw}) read_floats(*f);
    read_bytes(eu); read_bytes(ev); read_bytes(ew);
    std::vector<int> nbr(6 * (size_t)n);
    for (auto& x : nbr) scanf("%d", &x);
    read_floats(p);
    float c;
    scanf("%a", &c);
    ONE_PER_ITEM(n, project_faces(cell.data(), solid.data(), u.data(), v.data(), w.data(), su.data(), sv.data(),
                                  sw.data(), eu.data(), ev.data(), ew.data(), nbr.data(), n, p.data(), c, ou.data(),
                                  ov.data(), ow.data()));
    for (auto* f : {&ou, &ov, &ow}) for (float x : *f) printf("%a\n", x);
    return 0;
}
"""


@pytest.fixture(scope="module")
def project_device(tmp_path_factory):
    k = sparse_pressure_cells._K
    return _build(tmp_path_factory, with_defines(PROJECT, k))


@pytest.mark.parametrize("sealed", [False, True])
def test_project_kernel_equals_the_array_projection_bit_for_bit(project_device, sealed):
    """project_faces (sparse_pressure_cells.project) gives sparse_pressure.project's faces
    exactly: gradient on faces next to FLUID, solid velocity on faces touching SOLID or
    missing, the rest unchanged."""
    g = _tank(sealed, seed=11 + sealed)
    dt = 1 / 83
    rng = np.random.default_rng(5)
    p = np.where(g["cell"] == FLUID, rng.normal(0.0, 50.0, g.size), 0.0).astype(np.float32)
    n = g.size
    lines = [str(n)] + [str(int(x)) for name in ("cell", "solid") for x in g[name]]
    for name in ("u", "v", "w", "solid_u", "solid_v", "solid_w"):
        lines += [float(x).hex() for x in g[name]]
    lines += [str(int(x)) for name in g.EXISTS for x in g[name]]
    lines += [str(int(x)) for x in g.nbr.ravel()] + [float(x).hex() for x in p]
    lines.append(float(np.float32(dt / g.h)).hex())
    out = np.array([float.fromhex(x) for x in project_device.raw(lines).split()], np.float32).reshape(3, n)
    before = [g[name].copy() for name in g.FACES]
    sparse_pressure.project(g, p, dt)  # NumPy: the array code
    for got, name, old in zip(out, g.FACES, before):
        assert np.array_equal(got.view(np.uint32), g[name].view(np.uint32))
        changed = g[name] != old
        assert changed.sum() > 100  # the gradient and the solid faces changed many faces
        assert (~changed).sum() > 100  # and left the faces away from the liquid alone


# Input: as PROJECT, then the capacity and nbr27 (27 × capacity). Output: u, v, w after
# project_faces_fluid (n hex each), then its masks valid_u, valid_v, valid_w (n each).
PROJECT_FLUID = HARNESS.split("int main() {")[0] + r"""
int main() {
    int n, cap;
    if (scanf("%d", &n) != 1) return 1;
    std::vector<unsigned char> cell(n), solid(n), eu(n), ev(n), ew(n), mu(n, 7), mv(n, 7), mw(n, 7);
    std::vector<float> u(n), v(n), w(n), su(n), sv(n), sw(n), p(n), ou(n, -7.0f), ov(n, -7.0f), ow(n, -7.0f);
    read_bytes(cell); read_bytes(solid);
    for (auto* f : {&u, &v, &w, &su, &sv, &sw}) read_floats(*f);
    read_bytes(eu); read_bytes(ev); read_bytes(ew);
    read_floats(p);
    float c;
    scanf("%a %d", &c, &cap);
    std::vector<int> nbr27(27 * (size_t)cap);
    for (auto& x : nbr27) scanf("%d", &x);
    ONE_PER_ITEM(n, project_faces_fluid(cell.data(), solid.data(), u.data(), v.data(), w.data(), su.data(),
                                        sv.data(), sw.data(), eu.data(), ev.data(), ew.data(), nbr27.data(), n,
                                        p.data(), c, ou.data(), ov.data(), ow.data(), mu.data(), mv.data(),
                                        mw.data()));
    for (auto* f : {&ou, &ov, &ow}) for (float x : *f) printf("%a\n", x);
    for (auto* m : {&mu, &mv, &mw}) for (auto x : *m) printf("%d\n", (int)x);
    return 0;
}
"""


@pytest.fixture(scope="module")
def project_fluid_device(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(PROJECT_FLUID, sparse_pressure_cells._K))


@pytest.mark.parametrize("sealed", [False, True])
def test_project_fluid_kernel_gives_the_projection_and_the_fluid_faces(project_fluid_device, sealed):
    """project_faces_fluid (VOXFX_SPARSE_PROJECT_FLUID=1): the neighbours from the brick table
    give sparse_pressure.project's faces bit for bit, and its masks are sparse_transfer.fluid_faces'
    (faces with a FLUID cell on either side) for the same cell types."""
    from tests.unit.test_cuda_sparse_pressure_bricks_host import brick_tables

    g = _tank(sealed, seed=13 + sealed)
    dt = 1 / 71
    rng = np.random.default_rng(9)
    p = np.where(g["cell"] == FLUID, rng.normal(0.0, 50.0, g.size), 0.0).astype(np.float32)
    n = g.size
    assert n == 512 * g.capacity
    _, nbr27 = brick_tables(g)
    lines = [str(n)] + [str(int(x)) for name in ("cell", "solid") for x in g[name]]
    for name in ("u", "v", "w", "solid_u", "solid_v", "solid_w"):
        lines += [float(x).hex() for x in g[name]]
    lines += [str(int(x)) for name in g.EXISTS for x in g[name]] + [float(x).hex() for x in p]
    lines += [float(np.float32(dt / g.h)).hex(), str(g.capacity), *map(str, nbr27.ravel())]
    words = project_fluid_device.raw(lines).split()
    out = np.array([float.fromhex(x) for x in words[:3 * n]], np.float32).reshape(3, n)
    masks = np.array([int(x) for x in words[3 * n:]], np.uint8).reshape(3, n)
    want_masks = sparse_transfer.fluid_faces(g)
    before = [g[name].copy() for name in g.FACES]
    sparse_pressure.project(g, p, dt)  # NumPy: the array code
    for got, name, old in zip(out, g.FACES, before):
        assert np.array_equal(got.view(np.uint32), g[name].view(np.uint32))
        assert (g[name] != old).sum() > 100 and (g[name] == old).sum() > 100
    for got, want in zip(masks, want_masks):
        assert np.array_equal(got, want)
        assert 0 < int(got.sum()) < n  # some faces of either kind


# Input: n way (1: cells_hook_bricks, 2: cells_hook_bricks_local), cell (n), nbr (6 × n),
# parent (n). Output: parent after the one launch (a block a slot).
BRICK_LINKS = HARNESS.split("int main() {")[0] + r"""
int main() {
    int n, way;
    if (scanf("%d %d", &n, &way) != 2) return 1;
    std::vector<unsigned char> cell(n);
    read_bytes(cell);
    std::vector<int> nbr(6 * (size_t)n), parent(n);
    for (auto& x : nbr) scanf("%d", &x);
    for (auto& x : parent) scanf("%d", &x);
    if (way == 2)
        ONE_PER_ITEM(n / 512, cells_hook_bricks_local(cell.data(), nbr.data(), n, parent.data()));
    else
        ONE_PER_ITEM(n / 512, cells_hook_bricks(cell.data(), nbr.data(), n, parent.data()));
    for (int x : parent) printf("%d\n", x);
    return 0;
}
"""
# A mutant of "local" that forgets the z links inside a brick: the comparison below must catch it.
_Z_LINK = "if ((t >> 6) != 7 && fluid[t + 64]) unite(up, t, t + 64);"


@pytest.fixture(scope="module")
def brick_links_device(tmp_path_factory):
    k = sparse_pressure_cells._K
    source = with_defines(BRICK_LINKS, k)
    mutant = source.replace('#include "flip_sparse_pressure_cells.cu"', "#include \"cells_mutant.cu\"")
    d = tmp_path_factory.mktemp("cells_mutant")
    from voxfx.kernels import backend

    text = (backend.CUDA_DIR / "flip_sparse_pressure_cells.cu").read_text()
    assert text.count(_Z_LINK) == 1
    (d / "cells_mutant.cu").write_text(text.replace(_Z_LINK, ""))
    mutant = mutant.replace('#include "cells_mutant.cu"', f'#include "{d / "cells_mutant.cu"}"')
    return _build(tmp_path_factory, source), _build(tmp_path_factory, mutant)


def _brick_parents(harness, cell, nbr, parent, way):
    n = len(cell)
    lines = [f"{n} {way}", *map(str, cell.astype(int)), *map(str, nbr.ravel()), *map(str, parent)]
    return np.array(harness.raw(lines).split(), np.int64)


def _brick_cases():
    """(cell, nbr, parent) sets: the random sealed tank (cells_rhs's parents: a FLUID cell's
    lowest FLUID neighbour below), an all-FLUID pool, and the tank with its slot 1 free (its
    in-brick neighbours −1, as sparse_cell_step gives a free slot) and FLUID all the same."""
    g = _tank(True, seed=5)
    n, cell, nbr = g.size, np.asarray(g["cell"], np.uint8), np.asarray(g.nbr, np.int64)
    low = np.arange(n)
    for d in range(6):
        o = nbr[d]
        ok = (cell == FLUID) & (o >= 0) & (o < low) & (cell[np.maximum(o, 0)] == FLUID)
        low = np.where(ok, o, low)
    yield "tank", cell, nbr, low
    yield "full", np.full(n, FLUID, np.uint8), nbr, np.arange(n)
    free = nbr.copy()
    free[:, 512:1024] = -1
    yield "free slot", cell, free, low


def test_local_brick_links_give_cells_hook_bricks_parents(brick_links_device):
    """cells_hook_bricks_local (sparse_pressure_cells.BRICK_LINKS "local") leaves every parent
    as cells_hook_bricks does — each FLUID cell its in-brick component's lowest index, every
    other cell untouched — on a random tank, an all-FLUID pool and a free slot of FLUID cells
    (the fallback through nbr); a mutant without the z links differs (the check can fail)."""
    harness, mutant = brick_links_device
    caught = 0
    for name, cell, nbr, parent in _brick_cases():
        old = _brick_parents(harness, cell, nbr, parent, 1)
        new = _brick_parents(harness, cell, nbr, parent, 2)
        assert np.array_equal(new, old), name
        assert (old != parent).any() or name == "free slot", name  # the kernel did join cells
        caught += not np.array_equal(_brick_parents(mutant, cell, nbr, parent, 2), old)
    assert caught >= 2  # the tank and the full pool (the free slot's links go through nbr)
