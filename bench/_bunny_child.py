"""The child process of the bunny benches (sparse_coverage.py, voxelize_sparse_auto.py): each
case runs in a fresh Python process, so that its host peak (VmHWM) is its own. The child
loads the Stanford bunny (99,785 triangles) and the case's grid, on NumPy or CuPy
(``case["gpu"]``), then runs the bench's *body* and prints one JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What every child does first: the imports (then the bench's own, before the mesh is loaded:
# the host peak is measured against the heap as it is then) ...
IMPORTS = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {root!r})
    from tools.package import load
    load()
    import numpy as np
    from tests.meshes import bunny
    from voxfx.kernels.grid import GridSpec
    from voxfx.kernels.voxelize import voxelize
""")

# ... then the case (argv[1], JSON), xp, the bunny (v, t), spec at case["res"] voxels along its
# longest side, and status() (VmRSS and VmHWM in bytes).
SETUP = textwrap.dedent("""
    case = json.loads(sys.argv[1])
    xp = np
    if case.get("gpu"):
        import cupy as xp
    mesh, why = bunny()
    if mesh is None:  # not cached and not fetchable (the device has no internet: carry .cache/test-meshes)
        raise SystemExit("no bunny mesh: " + " ".join(why.split()))
    v, t = mesh
    lo, hi = v.min(0), v.max(0)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / case["res"])

    def status():
        out = {{}}
        for line in open("/proc/self/status"):
            k, _, rest = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(rest.split()[0]) * 1024
        return out
""")


def run_case(imports, body, case):
    """*imports*, then ``SETUP``, then *body* (braces doubled, as for ``str.format``), after
    ``IMPORTS`` in a fresh process on *case*: its last JSON line, or {"error": the last line of
    its stderr}."""
    code = (IMPORTS + textwrap.dedent(imports) + SETUP + textwrap.dedent(body)).format(root=str(ROOT))
    p = subprocess.run([sys.executable, "-c", code, json.dumps(case)], capture_output=True, text=True)
    if p.returncode:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])
