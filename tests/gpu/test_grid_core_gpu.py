"""The grid core on CuPy (kernels/grid/): the MAC operations, the sampler and the connected
components give the NumPy reference's bits on fresh random inputs; the device sampler
(voxfx_lattice.cuh) matches the NumPy sampler bit for bit; a GraphLoop replays as a
CUDA graph with the same results as plain launches."""

import numpy as np
import pytest

from voxfx.kernels.grid import components, launch, mac
from voxfx.kernels.grid.sample import sample_face, sample_lattice

SHAPES = [(7, 5, 3), (16, 9, 12), (1, 4, 2)]  # (nx, ny, nz)


def same(gpu, cpu):
    a = gpu.get()
    return a.dtype == cpu.dtype and a.shape == cpu.shape and a.tobytes() == cpu.tobytes()


@pytest.mark.parametrize("shape", SHAPES)
def test_mac_operations_match_numpy_bit_for_bit(shape):
    import cupy as cp

    nx, ny, nz = shape
    rng = np.random.default_rng()
    mask = rng.random((nz, ny, nx)) < 0.4
    faces = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)]
    p = rng.standard_normal((nz, ny, nx)).astype(np.float32)
    c = np.float32(0.3)
    for outside in (False, True):
        for dtype in (bool, np.uint8):
            got = mac.faces_touching(cp.asarray(mask), outside, dtype)
            assert all(same(g, h) for g, h in zip(got, mac.faces_touching(mask, outside, dtype)))
    assert same(mac.face_sum(*map(cp.asarray, faces)), mac.face_sum(*faces))
    assert same(mac.neighbour_sum(cp.asarray(p)), mac.neighbour_sum(p))
    assert same(mac.neighbour_count(cp.asarray(mask)), mac.neighbour_count(mask))
    assert same(mac.any_neighbour(cp.asarray(mask)), mac.any_neighbour(mask))
    assert same(mac.red_cells((nz, ny, nx), cp), mac.red_cells((nz, ny, nx), np))
    for touch in (None, mac.faces_touching(mask)):
        cpu = [f.copy() for f in faces]
        gpu = [cp.asarray(f) for f in faces]
        mac.subtract_gradient(*cpu, p, c, touch=touch)
        mac.subtract_gradient(*gpu, cp.asarray(p), c, touch=None if touch is None else tuple(map(cp.asarray, touch)))
        assert all(same(g, h) for g, h in zip(gpu, cpu))


@pytest.mark.parametrize("shape", SHAPES)
def test_projection_matches_numpy_on_cupy_arrays_and_in_the_device_kernels(shape):
    """The one projection (mac.fixed_faces / mac.project, device: cell_face_sum and
    project_face of voxfx_mac.cuh) on CuPy arrays and in both effects' kernels: the
    wind's (compiled --fmad=false) and FLIP's divergence bit for bit, FLIP's projection
    to float32 rounding (its file may contract to FMA)."""
    import cupy as cp

    from voxfx.kernels.flip import density, pressure_gpu
    from voxfx.kernels.snow import wind

    nx, ny, nz = shape
    dims = (np.int32(nx), np.int32(ny), np.int32(nz))
    rng = np.random.default_rng()
    cell = rng.integers(0, 3, (nz, ny, nx)).astype(np.uint8)  # AIR, FLUID, SOLID
    faces = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)]
    fixed = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)]
    p = rng.standard_normal((nz, ny, nx)).astype(np.float32)
    c = np.float32(0.3)
    for walls_fixed, values in ((True, fixed), (False, None)):
        cpu = [f.copy() for f in faces]
        gpu = [cp.asarray(f) for f in faces]
        gvalues = None if values is None else [cp.asarray(f) for f in values]
        mac.project(*cpu, p, c, cell, 1, 2, walls_fixed, values)
        mac.project(*gpu, cp.asarray(p), c, cp.asarray(cell), 1, 2, walls_fixed, gvalues)
        assert all(same(g, h) for g, h in zip(gpu, cpu))
        got = mac.face_sum(*mac.fixed_faces(*map(cp.asarray, faces), cp.asarray(cell), 2, walls_fixed, gvalues))
        assert same(got, mac.face_sum(*mac.fixed_faces(*faces, cell, 2, walls_fixed, values)))

    solid = (rng.random((nz, ny, nx)) < 0.3).astype(np.uint8)  # the wind: air 0, solid 1, walls free
    cpu = [f.copy() for f in faces]
    mac.project(*cpu, p, c, solid, 0, 1, False)
    gpu = [cp.asarray(f) for f in faces]
    wind._K.launch("project", mac.face_count(nx, ny, nz), (*gpu, cp.asarray(p), cp.asarray(solid), *dims, c))
    assert all(same(g, h) for g, h in zip(gpu, cpu))

    scale = np.float32(1.0 / 0.1)  # FLIP: fluid 1, solid 2, walls fixed to the solid velocity
    want = np.where(cell == 1, mac.face_sum(*mac.fixed_faces(*faces, cell, 2, True, fixed)) * scale, np.float32(0.0))
    out = cp.empty((nz, ny, nx), cp.float32)
    gfixed = [cp.asarray(f) for f in fixed]
    off = density.device_args(None, out.size, 0.1)  # the density correction off (a null counts pointer)
    pressure_gpu._K.launch("divergence", out.size, (*map(cp.asarray, faces), *gfixed, cp.asarray(cell), *dims, scale,
                                                    out, *off))
    assert same(out, want.astype(np.float32))
    cpu = [f.copy() for f in faces]
    mac.project(*cpu, p, c, cell, 1, 2, True, fixed)
    gpu = [cp.asarray(f) for f in faces]
    pressure_gpu._K.launch("project", mac.face_count(nx, ny, nz), (*gpu, *gfixed, cp.asarray(cell), cp.asarray(p),
                                                                   *dims, c))
    for g, h in zip(gpu, cpu):
        np.testing.assert_allclose(g.get(), h, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", SHAPES)
def test_components_match_numpy(shape, monkeypatch):
    import cupy as cp

    nx, ny, nz = shape
    rng = np.random.default_rng()
    mask = rng.random((nz, ny, nx)) < 0.55
    seeds = np.zeros_like(mask)
    seeds[:, :, 0] = True
    assert same(components.label_components(cp.asarray(mask)), components.label_components(mask))
    want = components.reachable(mask, seeds)
    assert same(components.reachable(cp.asarray(mask), cp.asarray(seeds)), want)
    monkeypatch.setattr(components, "_ndimage_labels", lambda m, xp: None)
    assert same(components.reachable(cp.asarray(mask), cp.asarray(seeds)), want)


def test_array_sampler_on_cupy_matches_numpy():
    import cupy as cp

    rng = np.random.default_rng()
    f = rng.standard_normal((5, 6, 7)).astype(np.float32)
    pts = [rng.uniform(-2, 9, 1000).astype(np.float32) for _ in range(3)]
    value, grad = sample_lattice(f, *pts, gradient=True)
    gvalue, ggrad = sample_lattice(cp.asarray(f), *map(cp.asarray, pts), gradient=True)
    assert same(gvalue, value) and all(same(g, h) for g, h in zip(ggrad, grad))


PROBE = r"""
#include "voxfx_lattice.cuh"
extern "C" __global__ void probe(const float* f, int comp, int nx, int ny, int nz, const float* x, const float* y,
                                 const float* z, long long n, float* out)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float g[3];
    out[5 * t] = sample_face(comp, f, nx, ny, nz, x[t], y[t], z[t], g);
    out[5 * t + 1] = g[0];
    out[5 * t + 2] = g[1];
    out[5 * t + 3] = g[2];
    out[5 * t + 4] = sample_face(comp, f, nx, ny, nz, x[t], y[t], z[t]);
}
"""


@pytest.mark.parametrize("cells", [(6, 5, 4), (1, 3, 1), (2, 1, 5)])
def test_device_sampler_matches_numpy_bit_for_bit(cells):
    import cupy as cp

    from voxfx.kernels import backend

    mod = cp.RawModule(code=PROBE, options=("--std=c++17", f"-I{backend.CUDA_INCLUDE}", "--fmad=false"))
    probe = mod.get_function("probe")
    nx, ny, nz = cells
    rng = np.random.default_rng()
    for comp, shape in enumerate(mac.face_shapes(nx, ny, nz)):
        f = rng.standard_normal(shape).astype(np.float32)
        x, y, z = (rng.uniform(-1.5, n + 1.5, 4096).astype(np.float32) for n in cells)
        x[:7] = np.nan
        out = cp.empty((x.size, 5), cp.float32)
        probe(launch.blocks(x.size), (launch.THREADS,),
              (cp.asarray(f), np.int32(comp), np.int32(nx), np.int32(ny), np.int32(nz), cp.asarray(x), cp.asarray(y),
               cp.asarray(z), np.int64(x.size), out))
        value, grad = sample_face(comp, f, x, y, z, gradient=True)
        assert same(out, np.stack([value, *grad, value], axis=1).astype(np.float32))


def test_graph_loop_replays_the_sequence_as_a_cuda_graph():
    import cupy as cp

    two = np.float32(2)
    a = cp.arange(1000, dtype=cp.float32)
    b = a.copy()
    cp.multiply(b[:1], two, out=b[:1] * 0)  # compile and load the kernel before any capture
    cp.cuda.get_current_stream().synchronize()

    def double_a():
        cp.multiply(a, two, out=a)

    def double_b():
        cp.multiply(b, two, out=b)

    plain = launch.GraphLoop(double_b, enabled=False)
    graphed = launch.GraphLoop(double_a)
    for _ in range(3):
        plain.run()
        graphed.run()
    assert graphed.graph is not None and not graphed.failed and graphed.launches == 3
    assert plain.graph is None and plain.launches == 0
    cp.cuda.get_current_stream().synchronize()
    assert bool(cp.all(a == b)) and float(a[1]) == 8.0
