"""The P2G stage's tail on the GPU (``sparse_transfer.extrapolate_and_boundaries``, helper
i24a): fused (the last extrapolation ring, the old faces and the boundaries with gravity in
one kernel) and apart give the NumPy reference's old faces, faces and masks bit for bit, and
whole sparse runs are the same bits either way."""

import numpy as np
import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_gpu import host, moved_scene
from voxfx.kernels.flip import sparse_gpu, sparse_transfer


def bits(a):
    return host(a).view(np.uint32) if host(a).dtype == np.float32 else host(a)


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("mode", sparse_transfer.P2G_TAILS)
def test_gpu_p2g_tail_is_the_cpus_bit_for_bit(closed, mode):
    import cupy

    spec, cpu, gpu, pos, vel, c = moved_scene(closed, False, int(np.random.default_rng().integers(1 << 30)))
    assert sparse_gpu.available(gpu)
    cpu.valid = sparse_transfer.particles_to_grid(cpu, pos, vel, c)
    for name in cpu.FACES:  # the same faces and masks on both
        gpu[name] = cupy.asarray(cpu[name])
    gpu.valid = tuple(cupy.asarray(m) for m in cpu.valid)
    gravity = [np.float32(a * 0.01) for a in (0.0, -9.81, 0.5)]
    want = sparse_transfer.extrapolate_and_boundaries(cpu, add=gravity)
    got = sparse_transfer.extrapolate_and_boundaries(gpu, add=gravity, mode=mode)
    for a, b in zip(got, want):
        assert np.array_equal(bits(a), bits(b))
    for name in cpu.FACES:
        assert np.array_equal(bits(gpu[name]), bits(cpu[name])), name
        assert not np.array_equal(bits(gpu[name]), bits(got[cpu.FACES.index(name)]))  # boundaries, gravity
    for a, b in zip(gpu.valid, cpu.valid):
        assert np.array_equal(host(a), host(b))
    assert sum(int(host(m).sum()) for m in cpu.valid) > 0


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_are_the_same_bits_either_tail(monkeypatch, apic):
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_P2G_TAIL", sparse_transfer.P2G_TAILS)
