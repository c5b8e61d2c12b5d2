"""Each kernel the sparse PCG launches by name (sparse_pressure_gpu._module, and the solver's
_module for the cluster tail of 16 blocks) is looked up in the Kernels that compile the .cu
file holding it. A kernel moved to another file (the V-cycle's tail into
flip_sparse_pressure_vcycle_tail.cu) and not routed there would fail at its first launch, on a
device alone: here it fails without one."""

import re
from types import SimpleNamespace

from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure_gpu as gpu

# extern "C" kernels, their qualifiers (the cluster's dims, launch bounds) between void and the name
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:TAIL_CLUSTER_DIMS\s+|__launch_bounds__\([^)]*\)\s+)*'
                     r'(\w+)\s*\(')


def kernels_in(filename):
    text = (backend.CUDA_DIR / filename).read_text(encoding="utf-8")
    names = _KERNEL.findall(text)
    assert len(names) == text.count("__global__"), filename  # every kernel found
    return names


def test_every_vcycle_kernel_is_launched_from_the_file_that_holds_it():
    held = {name: k.filename for k in (gpu._MG, gpu._MGT, gpu._MGB, gpu._NB) for name in kernels_in(k.filename)}
    assert {"mg_smooth", "mg_dense_inverse", "mg_tail_vcycle", "mg_tail_cluster_shared_fold", "mg_restrict_bricks",
            "mg_smooth_nb"} <= set(held)
    for name, filename in held.items():
        assert gpu._module(name).filename == filename, name
    loop = set(kernels_in(gpu._K.filename))
    for name in gpu._LOOP_KERNELS:
        assert name in loop and gpu._module(name) is gpu._K, name


def test_the_cluster_tail_of_16_blocks_is_the_tail_file_with_its_cluster_size():
    tail = set(kernels_in(gpu._MGT.filename))
    solver = SimpleNamespace(cluster_blocks=16)  # a solver's _module reads cluster_blocks alone
    for name in sorted(tail):
        kernels = gpu.SparsePressureSolverGPU._module(solver, name)
        assert kernels is (gpu._MGT16 if name.startswith("mg_tail_cluster") else gpu._MGT), name
    assert gpu._MGT16.filename == gpu._MGT.filename
    assert "-DTAIL_CLUSTER=16" in gpu._MGT16.options and "-DTAIL_CLUSTER=8" in gpu._MGT.options
    assert not any(o.startswith("-DTAIL_CLUSTER=") for o in gpu._MG.options)  # the V-cycle's file has no tail
