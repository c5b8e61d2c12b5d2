"""Every CUDA source compiles with nvcc for Turing (sm_75) and Hopper (sm_90), so a
syntax error fails CI on machines without a GPU."""

import shutil
import subprocess

import pytest

from voxfx.kernels import backend

SOURCES = sorted(backend.CUDA_DIR.glob("*.cu"))


def test_there_are_cuda_sources():
    assert SOURCES, "kernels/cuda/ holds no .cu files"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_cuda_source_compiles(source, arch, tmp_path):
    out = tmp_path / (source.stem + ".ptx")
    r = subprocess.run(["nvcc", "-ptx", f"-arch={arch}", "--std=c++17", f"-I{backend.CUDA_INCLUDE}", "-Werror",
                        "all-warnings", str(source), "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0
