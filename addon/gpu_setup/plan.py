"""Which pip packages make CuPy work for this driver and this Blender's numpy.

CuPy 13.x is built for numpy 1.x (Blender ≤ 5.0 bundles numpy 1.26), CuPy 14.x for
numpy 2.x (Blender 5.1+). The wheel's name carries the CUDA major version the driver
must run: ``cupy-cuda11x`` / ``cupy-cuda12x`` / ``cupy-cuda13x`` (PyPI, checked with
``pip index versions``: 13.x has all three — cuda13x only from 13.6.0 —, 14.x has no
cuda11x). The wheels do not contain the CUDA libraries CuPy loads at run time; VoxFX
needs NVRTC (every kernel is compiled at first use), the CUDA runtime and cuBLAS
(a matrix product in the liquid's volume estimate), so NVIDIA's own wheels of those
three come along: an artist does not have to install the CUDA Toolkit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...kernels.errors import VoxFXError

# CuPy release line -> {CUDA major: wheel name}
CUPY_WHEELS = {
    13: {11: "cupy-cuda11x", 12: "cupy-cuda12x", 13: "cupy-cuda13x"},
    14: {12: "cupy-cuda12x", 13: "cupy-cuda13x"},
}


def cuda_library_wheels(cuda_major: int) -> tuple[str, ...]:
    """NVIDIA's pip wheels of NVRTC, the CUDA runtime and cuBLAS for one CUDA major."""
    suffix = f"-cu{cuda_major}" if cuda_major <= 12 else ""  # CUDA 13 dropped the suffix
    return tuple(f"nvidia-{lib}{suffix}=={cuda_major}.*" for lib in ("cuda-nvrtc", "cuda-runtime", "cublas"))


class PlanError(VoxFXError):
    """No CuPy build fits this driver and numpy."""


@dataclass(frozen=True)
class Plan:
    cupy_line: int  # 13 or 14
    cuda_major: int
    wheel: str  # e.g. "cupy-cuda12x"
    requirements: tuple[str, ...]  # what pip is asked for

    def summary(self) -> str:
        return f"{self.wheel} {self.cupy_line}.x with NVIDIA's CUDA {self.cuda_major} NVRTC, runtime and cuBLAS"


def cupy_line_for(numpy_version: str) -> int:
    major = int(numpy_version.split(".")[0])
    return 13 if major < 2 else 14


def plan_install(cuda: tuple[int, int], numpy_version: str) -> Plan:
    """The packages for a driver running CUDA *cuda* and Blender's *numpy_version*."""
    line = cupy_line_for(numpy_version)
    wheels = CUPY_WHEELS[line]
    major = cuda[0]
    if major < min(wheels):
        raise PlanError(
            f"the NVIDIA driver runs CUDA {cuda[0]}.{cuda[1]}, but CuPy {line}.x (for Blender's "
            f"numpy {numpy_version}) needs CUDA {min(wheels)} or newer: update the NVIDIA driver")
    major = min(major, max(wheels))  # a newer driver runs older CUDA builds
    wheel = wheels[major]
    return Plan(line, major, wheel, (f"{wheel}>={line},<{line + 1}",) + cuda_library_wheels(major))
