"""The NVIDIA driver and the CUDA version it supports, found without CuPy.

The driver library itself answers first (``cuDriverGetVersion`` from ``libcuda.so.1`` /
``nvcuda.dll``, through ctypes); ``nvidia-smi``, when present, adds the driver release
and the GPU names, and stands in for the CUDA version when the library cannot be loaded.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass


def default_libraries() -> tuple[str, ...]:
    if sys.platform == "win32":
        return ("nvcuda.dll",)
    if sys.platform == "darwin":
        return ()  # no CUDA driver for macOS
    return ("libcuda.so.1", "libcuda.so")


@dataclass(frozen=True)
class Driver:
    cuda: tuple[int, int] | None  # the newest CUDA version the driver runs, e.g. (12, 4)
    release: str | None = None  # the driver's own version, e.g. "550.54.15" (nvidia-smi)
    gpus: tuple[str, ...] = ()
    source: str = ""  # what answered
    problem: str = ""  # why none was found

    @property
    def found(self) -> bool:
        return self.cuda is not None

    @property
    def cuda_text(self) -> str:
        return f"{self.cuda[0]}.{self.cuda[1]}" if self.cuda else "none"

    def summary(self) -> str:
        if not self.found:
            return f"NVIDIA driver: no NVIDIA driver found ({self.problem})"
        release = f" {self.release}" if self.release else ""
        gpus = f"; GPU: {', '.join(self.gpus)}" if self.gpus else ""
        return f"NVIDIA driver{release}: CUDA {self.cuda_text} (from {self.source}){gpus}"


def detect(libraries: tuple[str, ...] | None = None, nvidia_smi: str | None = "nvidia-smi") -> Driver:
    """What driver this machine has. *libraries* and *nvidia_smi* (a name on PATH or a
    path; None to skip) are parameters so tests can point them elsewhere."""
    libraries = default_libraries() if libraries is None else libraries
    version, detail = libcuda_version(libraries)  # detail: the library's name, or why not
    smi = query_nvidia_smi(nvidia_smi) if nvidia_smi else None
    release, gpus, smi_cuda = smi if smi else (None, (), None)
    if version is not None:
        cuda = (version // 1000, (version % 1000) // 10)
        return Driver(cuda, release, gpus, source=detail)
    if smi_cuda is not None:
        return Driver(smi_cuda, release, gpus, source="nvidia-smi")
    smi_note = "" if smi else "; no nvidia-smi"
    return Driver(None, release, gpus, problem=detail + smi_note)


def libcuda_version(libraries) -> tuple[int | None, str]:
    """(cuDriverGetVersion's value, the library's name) or (None, why not)."""
    if not libraries:
        return None, f"no CUDA driver exists for {sys.platform}"
    problems = []
    for name in libraries:
        try:
            lib = ctypes.WinDLL(name) if sys.platform == "win32" else ctypes.CDLL(name)
        except OSError as e:
            problems.append(str(e).splitlines()[0] if str(e) else f"{name} cannot be loaded")
            continue
        try:
            get_version = lib.cuDriverGetVersion
        except AttributeError:
            problems.append(f"{name} has no cuDriverGetVersion")
            continue
        version = ctypes.c_int(0)
        status = get_version(ctypes.byref(version))
        if status == 0 and version.value > 0:
            return version.value, name
        problems.append(f"cuDriverGetVersion in {name} returned error {status}")
    return None, problems[0]  # the first, the library's proper name, says enough


_SMI_CUDA = re.compile(r"CUDA Version:\s*(\d+)\.(\d+)")


def query_nvidia_smi(exe: str = "nvidia-smi", timeout: float = 15.0):
    """(driver release, GPU names, CUDA version or None) from nvidia-smi, or None."""
    path = shutil.which(exe)
    if path is None:
        return None
    try:
        listing = subprocess.run([path, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=timeout)
        header = subprocess.run([path], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if listing.returncode != 0:
        return None
    rows = [[part.strip() for part in line.split(",")] for line in listing.stdout.splitlines() if "," in line]
    gpus = tuple(row[0] for row in rows)
    release = rows[0][1] if rows else None
    m = _SMI_CUDA.search(header.stdout) if header.returncode == 0 else None
    return release, gpus, ((int(m.group(1)), int(m.group(2))) if m else None)
