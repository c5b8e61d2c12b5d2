"""The cells stage's first three launches in one (sparse_pressure_cells.CELLS_BRICK "fused":
cells_rhs_brick, a block a pool slot, the links across brick faces joined by the second of the
two bricks to finish; "inner": cells_rhs_brick's inner links, then cells_hook_faces)
against the three launches ("apart": cells_rhs, cells_hook_bricks_local, cells_hook_faces) and
the NumPy reference on the device's real concurrent blocks: the stage's b, kinds, labels, reach
and sealed count bit for bit on fresh random liquids, the density source on, pools of thousands
of bricks (random types: a spanning liquid with many sealed regions; all FLUID: one component
across every face), the stage repeated on one grid (the face tickets kept from stage to stage),
and the same pressure bit for bit and iterations through solve_pressure."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_bricks_gpu import host
from tests.gpu.test_flip_sparse_pressure_one_read_gpu import DT, scene
from voxfx.kernels.flip import density, sparse_pressure, sparse_pressure_cells, sparse_pressure_gpu
from voxfx.kernels.flip.grid import AIR, FLUID, SOLID
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec


def _stage(monkeypatch, g, way, crowding=None):
    monkeypatch.setenv("VOXFX_SPARSE_CELLS_BRICK", way)
    return [host(a) for a in sparse_pressure_cells.stage(g, DT, crowding)]


def _agree(old, new, note):
    for a, b in zip(old, new):
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8)), note


FUSED = ("fused", "inner")


@pytest.mark.parametrize("way", FUSED)
@pytest.mark.parametrize("name", ("tank", "moved", "speckled", "sheet"))
def test_gpu_fused_stage_gives_the_three_launches_values(monkeypatch, name, way):
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    ref = scene(np, name, seed)
    fluid = ref["cell"] == FLUID
    ref_b, ref_kind, _, _ = sparse_pressure.pressure_rhs(ref, DT)
    g = scene(cupy, name, seed)
    old = _stage(monkeypatch, g, "apart")
    assert getattr(g, "_face_tickets", None) is None
    for repeat in range(3):  # the tickets kept on the grid, a new epoch each stage
        new = _stage(monkeypatch, g, way)
        assert g._face_tickets is not None
        _agree(old, new, f"{name}, seed {seed}, stage {repeat}")
    assert np.array_equal(new[2][fluid].astype(np.int64), sparse_pressure.label_components(ref, fluid)[fluid])
    b, kind, _, _ = sparse_pressure_cells.assemble(ref, new[0], new[2], new[3], int(new[4][0]), np)
    assert np.array_equal(b.view(np.uint32), ref_b.view(np.uint32)) and np.array_equal(kind, ref_kind), f"seed {seed}"
    if name == "speckled":
        assert int(new[4][0]) > 0 and len(np.unique(new[2][fluid])) > 50


@pytest.mark.parametrize("way", FUSED)
def test_gpu_fused_stage_adds_the_density_source_as_cells_rhs(monkeypatch, way):
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    g = scene(cupy, "tank", seed)
    counts = cupy.asarray(np.random.default_rng(seed).integers(0, 40, g.size + 1).astype(np.int32))
    crowding = density.Crowding(counts, 8, 0.3, DT)
    old = _stage(monkeypatch, g, "apart", crowding)
    new = _stage(monkeypatch, g, way, crowding)
    _agree(old, new, f"seed {seed}")
    plain = _stage(monkeypatch, g, way)
    assert not np.array_equal(plain[0], new[0])  # the source changed b


def big_pool(cupy, seed, fluid_share):
    """A closed pool of ~7,700 bricks (3.9M cells) with random face velocities and random cell
    types on its active cells: *fluid_share* FLUID, the rest AIR and SOLID 2 : 15 ("speckled"'s
    shares at 0.66: singletons walled in by SOLID, sealed regions)."""
    rng = np.random.default_rng(seed)
    spec = GridSpec((0.0, 0.0, 0.0), 0.01, (192, 128, 160))
    pos = (rng.uniform(0.0, 1.0, (400000, 3)) * np.asarray(spec.upper)).astype(np.float32)
    g = SparseFlipGrid(spec, cupy, closed=True)
    g.update(cupy.asarray(pos), 3)
    n = g.size
    for name in g.FACES:
        g[name] = cupy.asarray(rng.normal(0.0, 1.0, n).astype(np.float32))
    rest = 1.0 - fluid_share
    types = rng.choice(np.array([AIR, FLUID, SOLID], np.uint8), n, p=[rest * 2 / 17, fluid_share, rest * 15 / 17])
    g["cell"] = cupy.where(g.active(), cupy.asarray(types), g["cell"]).astype(cupy.uint8)
    return g


@pytest.mark.parametrize("way", FUSED)
@pytest.mark.parametrize("fluid_share", (0.66, 1.0))
def test_gpu_fused_stage_on_thousands_of_bricks(monkeypatch, fluid_share, way):
    """Thousands of blocks at once, their face tickets and joins racing: five fused stages on
    one grid against the three launches, bit for bit."""
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    g = big_pool(cupy, seed, fluid_share)
    assert g.size // 512 > 5000
    old = _stage(monkeypatch, g, "apart")
    fluid = host(g["cell"]) == FLUID
    for repeat in range(5):
        _agree(old, _stage(monkeypatch, g, way), f"{way}, share {fluid_share}, seed {seed}, stage {repeat}")
    roots = np.unique(old[2][fluid])
    if fluid_share == 1.0:
        assert len(roots) == 1  # one component across every brick face
    else:
        assert len(roots) > 1000 and int(old[4][0]) > 0


def test_gpu_fused_stage_gives_the_same_pressure_bit_for_bit(monkeypatch):
    """Cold solves of a speckled tank (sealed regions) and dam-break tanks with each way."""
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    runs = {}
    for way in sparse_pressure_cells.CELLS_BRICK:
        monkeypatch.setenv("VOXFX_SPARSE_CELLS_BRICK", way)
        sparse_pressure_gpu.release_gpu_solvers()
        runs[way] = [sparse_pressure.solve_pressure(scene(cupy, name, seed), DT, tolerance=1e-5)
                     for name, seed in (("speckled", 3), ("tank", 4), ("moved", 5))]
    sparse_pressure_gpu.release_gpu_solvers()
    for way in FUSED:
        for (p_a, s_a), (p_b, s_b) in zip(runs["apart"], runs[way]):
            assert s_a == s_b and np.array_equal(host(p_a).view(np.uint32), host(p_b).view(np.uint32)), way
    assert max(s["iterations"] for _, s in runs["fused"]) >= 3
