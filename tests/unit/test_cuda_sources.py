"""Every CUDA source compiles with nvcc for Turing (sm_75) and Hopper (sm_90), with every
set of options its module compiles it with (the -D constants among them: the .cu files do
not define those), so a syntax error fails CI on machines without a GPU."""

import shutil
import subprocess

import pytest

from voxfx.kernels import backend
from voxfx.kernels.grid import launch

SOURCES = sorted(backend.CUDA_DIR.glob("*.cu"))
COMPILES = launch.compiles()
BUILDS = [(backend.CUDA_DIR / name, options) for name, option_sets in COMPILES.items() for options in option_sets]


def test_there_are_cuda_sources():
    assert SOURCES, "kernels/cuda/ holds no .cu files"


def test_every_source_is_launched_by_a_kernel_module():
    assert sorted(COMPILES) == [p.name for p in SOURCES]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
@pytest.mark.parametrize("source,options", BUILDS, ids=lambda a: a.name if hasattr(a, "name") else " ".join(a))
def test_cuda_source_compiles(source, options, arch, tmp_path):
    out = tmp_path / (source.stem + ".ptx")
    r = subprocess.run(["nvcc", "-ptx", f"-arch={arch}", "--std=c++17", f"-I{backend.CUDA_INCLUDE}", "-Werror",
                        "all-warnings", *options, str(source), "-o", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0


def test_warp_reductions_live_in_one_header():
    """Warp shuffles and ballots are written once, in include/voxfx_reduce.cuh; the kernels
    call its functions (a second copy could drift from the first)."""
    headers = sorted(backend.CUDA_INCLUDE.glob("*.cuh"))
    users = [p.name for p in SOURCES + headers if p.name != "voxfx_reduce.cuh"
             and any(word in p.read_text() for word in ("__shfl", "__ballot_sync", "__reduce_"))]
    assert users == []
    assert "__shfl_down_sync" in (backend.CUDA_INCLUDE / "voxfx_reduce.cuh").read_text()
