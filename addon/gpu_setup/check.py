"""Check GPU: what this machine has for VoxFX's GPU backend and what is missing, one line
each. CuPy is only imported when it is there to import."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...kernels import backend, kernel_cache
from . import driver as gpu_driver
from . import folder as gpu_folder
from .plan import PlanError, cupy_line_for, plan_install


@dataclass
class Findings:
    lines: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    gpu_ready: bool = False
    summary: str = ""


def check(folder: Path, driver: gpu_driver.Driver | None = None, numpy_version: str | None = None,
          probe: bool = True) -> Findings:
    """Look at the driver, Blender's numpy, CuPy and the GPU support *folder*.
    *probe* False skips importing CuPy (drawing the preferences must stay cheap)."""
    found = Findings()
    driver = driver if driver is not None else gpu_driver.detect()
    numpy_version = numpy_version or np.__version__
    found.lines.append(driver.summary())
    if not driver.found:
        found.missing.append("an NVIDIA driver")

    plan_text = ""
    if driver.found:
        try:
            plan_text = f" → {plan_install(driver.cuda, numpy_version).summary()}"
        except PlanError as e:
            plan_text = f" → {e}"
            found.missing.append("a newer NVIDIA driver")
    found.lines.append(f"Blender's numpy: {numpy_version} (CuPy {cupy_line_for(numpy_version)}.x)" + plan_text)

    folder = Path(folder)
    packages = gpu_folder.installed(folder) if gpu_folder.is_ours(folder) else []
    found.lines.append(f"VoxFX GPU folder: {folder} — "
                       + (", ".join(f"{n} {v}" for n, v in packages) if packages else "nothing installed"))

    spec = importlib.util.find_spec("cupy")  # finds without importing
    if spec is None:
        found.lines.append("CuPy: not installed")
        found.missing.append("CuPy (press Install GPU Support)")
    elif not probe:
        found.lines.append(f"CuPy: found at {Path(spec.origin).parent}")
    else:
        cp, why_not = backend.probe_cuda()
        where = Path(spec.origin).parent
        if cp is None:
            found.lines.append(f"CuPy at {where}: not usable — {why_not}")
            found.missing.append(f"a CuPy that works ({why_not})")
        else:
            info = backend.Backend("gpu", cp, "").device_info()
            found.lines.append(f"CuPy {cp.__version__} at {where}: works on {info.name}")
            found.gpu_ready = bool(driver.found)  # both must hold: a driver VoxFX can see, a CuPy that works
            found.summary = f"GPU ready: {info.name} with CuPy {cp.__version__}"
        cache = kernel_cache.current()
        found.lines.append(cache.warning or cache.summary())

    if not found.gpu_ready:
        found.summary = "GPU not usable: missing " + "; ".join(found.missing or ["nothing found wrong"])
    return found
