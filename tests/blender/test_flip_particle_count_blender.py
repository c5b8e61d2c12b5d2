"""Max Particles per Cell on the Liquid panel (``particle_count``; off by default): it reaches
the kernels' settings and every memory estimate the bake's guards take (the Auto solver's
choice, the panel's and the guard's need and the check before each frame), which count its
frame-end pass when it is on. The device branch of the estimates is
arithmetic (the object below only stands for 'not NumPy'; nothing runs on a GPU)."""

import numpy as np
import pytest

from .helpers import dam_scene

GPU = object()
USABLE = 1 << 40
PARTICLES = 100_000  # a frame-end pass larger than the GPU estimates' other stages on this small box


@pytest.fixture
def dam(tmp_path):
    with dam_scene(tmp_path / "dam.blend", 12) as (scene, f):
        yield scene, f


@pytest.mark.parametrize("solver", ["DENSE", "SPARSE"])
def test_the_setting_reaches_the_memory_estimates(dam, solver):
    from voxfx.addon.flip_sparse import frame_check, memory_need
    from voxfx.addon.operators.flip import bake_memory_need, domain_spec, kernel_settings
    from voxfx.kernels.flip.memory import flip_memory
    from voxfx.kernels.flip.sparse_memory import sparse_flip_memory

    scene, f = dam
    f.solver = solver
    sparse = solver == "SPARSE"
    spec = domain_spec(f.domain, f.resolution)

    def estimates():
        check = frame_check(spec, f, sparse, False, PARTICLES, xp=np)
        return (memory_need(spec, PARTICLES, f, xp=GPU, usable=USABLE),
                bake_memory_need(spec, PARTICLES, f, True, xp=GPU, usable=USABLE),
                check.memory(check.first or 1, PARTICLES, parts=True))

    assert f.max_particles_per_cell == 0  # off by default
    off = estimates()
    f.max_particles_per_cell = 32
    assert kernel_settings(f, scene, sparse).max_particles_per_cell == 32
    on = estimates()
    if sparse:
        kernel = sparse_flip_memory(spec, PARTICLES, int(f.particles_per_cell), xp=GPU, count_control=True)
    else:
        kernel = flip_memory(spec, PARTICLES, xp=GPU, count_control=True)
    assert on[0] == kernel > off[0]
    assert on[1] >= on[0]  # Compact frames: the device encoder beside the state is the larger here
    assert "count control" in on[2] and "count control" not in off[2]


def test_auto_counts_the_pass_when_it_weighs_the_dense_grid(dam):
    from voxfx.addon.flip_sparse import choose_solver
    from voxfx.addon.operators.flip import domain_spec
    from voxfx.kernels.flip.memory import flip_memory

    scene, f = dam
    spec = domain_spec(f.domain, f.resolution)
    usable = flip_memory(spec, PARTICLES, xp=GPU)  # the dense grid just fits without the pass
    assert choose_solver(spec, PARTICLES, f, usable=usable, xp=GPU)[0] is False
    f.max_particles_per_cell = 32
    assert choose_solver(spec, PARTICLES, f, usable=usable, xp=GPU)[0] is True
