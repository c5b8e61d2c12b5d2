# ruff: noqa
"""Where does CuPy write its kernel cache? (diagnostic for tests/gpu/test_gpu_setup_gpu.py)"""
import os, sys, tempfile, time, uuid
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.package import load
load()
from voxfx.kernels import backend, kernel_cache
import cupy
print("cupy", cupy.__version__, "env CUPY_CACHE_DIR", os.environ.get("CUPY_CACHE_DIR"), "in memory", os.environ.get("CUPY_CACHE_IN_MEMORY"))
d = Path(tempfile.mkdtemp()) / "kernels"
print("configure ->", kernel_cache.configure(d))
print("backend", getattr(cupy.cuda.compiler, "_kernel_cache_backend", None).__dict__ if hasattr(cupy.cuda.compiler, "_kernel_cache_backend") else "13.x/14.0")
marker = time.time()
mod = backend.load_module("bitgrid.cu", options=(f"-DX{uuid.uuid4().hex}=1",))
print("after compile, files in chosen:", list(d.iterdir()) if d.is_dir() else "missing")
fn = None
try:
    import cupy._core.raw as raw
    print("RawModule attrs", [a for a in dir(mod) if not a.startswith('__')][:30])
except Exception as e:
    print(e)
for root in (Path.home() / ".cupy", Path("/tmp")):
    for p in root.rglob("*.cubin"):
        if p.stat().st_mtime >= marker - 1:
            print("new cubin:", p)
