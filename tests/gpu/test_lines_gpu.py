"""The GPU segment DDA (cuda/lines.cu, seed 001 §3.1) sets the same voxels as the NumPy
reference, bit for bit, on fresh random inputs."""

import numpy as np
import pytest

from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize.lines import voxelize_segments


def both(a, b, spec):
    import cupy as cp

    cpu = voxelize_segments(a, b, spec, xp=np)
    gpu = voxelize_segments(a, b, spec, xp=cp)
    assert isinstance(gpu, np.ndarray)  # results leave the kernel as NumPy
    return cpu, gpu


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 7, 5), (64, 64, 64), (257, 31, 17), (100, 300, 40)])
def test_gpu_random_segments_match_cpu(shape):
    rng = np.random.default_rng()
    n = np.array(shape, dtype=float)
    spec = GridSpec(tuple(rng.uniform(-5, 5, 3)), float(rng.uniform(0.01, 2.0)), shape)
    lo = np.array(spec.origin) - 0.2 * n * spec.voxel_size
    hi = np.array(spec.origin) + 1.2 * n * spec.voxel_size
    a = rng.uniform(lo, hi, (3000, 3))
    b = np.concatenate([rng.uniform(lo, hi, (1000, 3)),  # long, many partly outside
                        a[1000:2000] + rng.normal(0, 3 * spec.voxel_size, (1000, 3)),  # short
                        a[2000:]])  # points
    cpu, gpu = both(a, b, spec)
    assert np.array_equal(gpu, cpu)
    assert bitgrid.count(cpu) > 0


@pytest.mark.parametrize("quantum", [1.0, 0.5, 0.25])
def test_gpu_lattice_segments_with_exact_ties_match_cpu(quantum):
    """End points on voxel faces, edges and corners: every tie must fall the same way."""
    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (45, 38, 29))
    a = np.round(rng.uniform(-3, 48, (4000, 3)) / quantum) * quantum
    b = np.round(rng.uniform(-3, 48, (4000, 3)) / quantum) * quantum
    b[:1000, 1:] = a[:1000, 1:]  # along x
    b[1000:1500, 0] = a[1000:1500, 0]  # in yz planes
    b[1500:1800] = a[1500:1800]  # points
    direction = rng.integers(-3, 4, (1000, 3))
    b[2000:3000] = a[2000:3000] + direction * rng.integers(1, 6, (1000, 1))  # through corners
    cpu, gpu = both(a, b, spec)
    assert np.array_equal(gpu, cpu)
    assert bitgrid.count(cpu) > 1000


def test_gpu_ors_into_a_device_grid_in_place():
    import cupy as cp

    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (70, 20, 30))
    start = (rng.random(spec.array_shape[:2] + (3,)) < 0.05).astype(np.uint32)  # some set bits
    start &= np.uint32(0x7)  # keep padding bits (x ≥ 70) clear
    a, b = rng.uniform(-0.5, 7.5, (500, 3)), rng.uniform(-0.5, 7.5, (500, 3))
    words = cp.asarray(start)
    out = voxelize_segments(a, b, spec, words=words)  # xp from the grid: CuPy
    assert out is words
    expected = start | voxelize_segments(a, b, spec, xp=np)
    assert np.array_equal(cp.asnumpy(words), expected)
    host = start.copy()  # a NumPy grid with the GPU backend: copied back in place
    assert voxelize_segments(a, b, spec, xp=cp, words=host) is host
    assert np.array_equal(host, expected)


def test_gpu_keep_on_device_and_empty_inputs():
    import cupy as cp

    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (40, 3, 3))
    bits = voxelize_segments(np.zeros((0, 3)), np.zeros((0, 3)), spec, xp=cp, keep_on_device=True)
    assert isinstance(bits, cp.ndarray) and bits.shape == (3, 3, 2) and int(bits.sum()) == 0
    outside = voxelize_segments(np.array([[-5.0, 1, 1]]), np.array([[-1.0, 2, 2]]), spec, xp=cp)
    assert not outside.any()
