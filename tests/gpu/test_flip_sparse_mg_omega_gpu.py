"""The over-relaxed V-cycle on the device (``VOXFX_SPARSE_MG_OMEGA``, default 1.3; issue 24,
i24m): ω is compiled into the kernels when the modules load, so each check runs in a fresh
process with the variable set. There the device solver against the NumPy reference (which
reads the same ω): the GPU-against-CPU and bit-for-bit launch-switch tests of the pressure
solve, run unchanged at plain Gauss-Seidel (ω = 1; the rest of the suite runs the default),
and a dam break's first solve at ω = 1.3 — the same iterations (±1) and the pressure to
float32 rounding — with fewer CG iterations over its first frames than plain Gauss-Seidel."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OMEGA = "1.3"

# The device tests that compare the solve with the CPU or launch switches bit for bit; under
# another ω than the default they check those kernels (fused, split, tails, cluster, first2, shared).
SWITCH_TESTS = [
    "tests/gpu/test_flip_sparse_pressure_gpu.py::test_gpu_sparse_pressure_matches_cpu_for_every_preconditioner[mg]",
    "tests/gpu/test_flip_sparse_pressure_gpu.py::test_gpu_sealed_region_labels_and_pressure_are_the_cpus",
    "tests/gpu/test_flip_sparse_pressure_gpu.py::test_gpu_solver_keeps_its_buffers_and_graph_while_the_unknowns_change",
    "tests/gpu/test_flip_sparse_pressure_gpu.py::test_gpu_fused_and_split_vcycles_give_the_same_pressure",
    "tests/gpu/test_flip_sparse_pressure_gpu.py::test_gpu_tail_vcycle_gives_the_same_pressure_bit_for_bit",
    "tests/gpu/test_flip_sparse_pressure_vcycle_gpu.py",
    "tests/gpu/test_flip_sparse_pcg_loop_gpu.py::test_gpu_tail_switches_give_the_plain_tails_pressure_bit_for_bit",
]

DAM_BREAK = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from tools.package import load
load()
from tests.meshes import box
from tests.pressure_solves import solves
from voxfx.kernels.flip import sparse_multigrid
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

if sys.argv[2] == "gpu":
    import cupy as xp
else:
    xp = np
spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
sim = FlipSimulation(spec, FlipSettings(seed=5, warm_start_pressure=False), v, t, xp=xp, sparse=True)
runs = solves(sim, int(sys.argv[3]))
np.save(sys.argv[4], runs[0][0])  # the first solve's pressure (the same system whatever omega)
print("RESULT " + json.dumps({"omega": sparse_multigrid.MG_OMEGA, "iterations": [s["iterations"] for _, s in runs],
                              "converged": all(bool(s["converged"]) for _, s in runs)}))
"""

FRAMES = 3


def _env(omega):
    env = dict(os.environ)
    env["VOXFX_SPARSE_MG_OMEGA"] = omega
    return env


def _dam_break(omega, backend, path):
    """(iterations per solve, all converged, the first solve's pressure) of a dam break's
    first FRAMES frames on *backend* ("gpu" or "cpu") with ω = *omega*, in a fresh process."""
    import numpy as np

    run = subprocess.run([sys.executable, "-c", DAM_BREAK, str(ROOT), backend, str(FRAMES), str(path)],
                         capture_output=True, text=True, env=_env(omega), cwd=ROOT, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("RESULT "))
    out = json.loads(line[len("RESULT "):])
    assert out["omega"] == float(omega)
    return out["iterations"], out["converged"], np.load(path)


@pytest.fixture(scope="module")
def dam_breaks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("omega")
    return {(omega, backend): _dam_break(omega, backend, folder / f"{backend}-{omega}.npy")
            for omega in ("1", OMEGA) for backend in ("cpu", "gpu")}


def test_gpu_over_relaxed_dam_break_takes_the_cpus_iterations_and_pressure(dam_breaks):
    """The first solve is the same system on both (a fluid block at rest): the same
    iterations (±1: the dot products add in another order) and pressure to float32 rounding
    of a 1e-4 solve; the later ones follow each backend's own particles."""
    import numpy as np

    it_c, conv_c, p_c = dam_breaks[(OMEGA, "cpu")]
    it_g, conv_g, p_g = dam_breaks[(OMEGA, "gpu")]
    assert conv_c and conv_g and len(it_g) >= 3 and max(it_g) >= 3
    assert abs(it_g[0] - it_c[0]) <= 1
    assert np.abs(p_g - p_c).max() <= 1e-3 * np.abs(p_c).max()


def test_gpu_over_relaxation_takes_fewer_iterations_on_a_dam_break(dam_breaks):
    """Fewer CG iterations in all than plain Gauss-Seidel, and the first solve's pressure
    the same to the solve's tolerance."""
    import numpy as np

    plain, conv_p, p_plain = dam_breaks[("1", "gpu")]
    relaxed, conv_r, p_relaxed = dam_breaks[(OMEGA, "gpu")]
    assert conv_p and conv_r and sum(relaxed) < sum(plain), (plain, relaxed)
    assert np.abs(p_relaxed - p_plain).max() <= 5e-3 * np.abs(p_plain).max()


def test_gpu_solver_tests_pass_with_plain_gauss_seidel_kernels():
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *SWITCH_TESTS],
                         capture_output=True, text=True, env=_env("1"), cwd=ROOT, timeout=1200)
    assert run.returncode == 0, (run.stdout[-4000:], run.stderr[-2000:])
    assert " passed" in run.stdout, run.stdout[-500:]
