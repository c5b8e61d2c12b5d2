"""Bit-for-bit comparison of small bakes between two revisions (a refactoring check).

    python tools/compare_bakes.py --base <rev> [--head <rev>] [--backend cpu|gpu]

Extracts <rev> with ``git archive`` into a temporary folder (no worktree is touched), runs
the same small FLIP and snow-with-wind bakes plus the grid stages (pressure, projection,
transfers, wind with sealed pockets) in a child process on each tree (default head: the
working tree) on the chosen backend (NumPy by default; ``gpu``: CuPy on the CUDA device),
and compares every array exactly (dtype, shape and bits). Exit status 0 when all agree.
Nothing is stored between runs: both sides are computed from their code. ``--base X
--head X`` shows the run-to-run noise of a backend (none expected: every reduction of
these stages has a fixed order).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

PAYLOAD = r"""
import sys, numpy as np
sys.path.insert(0, ROOT)
from tools.package import load
load()
from tests.meshes import box, merge
from voxfx.kernels import backend
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.flip import pressure, transfer
from voxfx.kernels.flip.grid import AIR, FLUID, SOLID, DenseGrid, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.snow.domain import SnowDomain, SnowSettings
from voxfx.kernels.snow.sim import SnowSimulation
import dataclasses as _dc, math as _math
if "wind_direction_deg" in {f.name for f in _dc.fields(SnowSettings)}:  # settings before issue 19's one definition
    _Old = SnowSettings

    def SnowSettings(**kw):
        rename = {"wind_direction": ("wind_direction_deg", _math.degrees),
                  "snowfall_rate": ("snowfall_rate_cm_per_hour", float)}
        return _Old(**{rename[k][0] if k in rename else k: rename[k][1](v) if k in rename else v
                       for k, v in kw.items()})
from voxfx.kernels.snow.wind import WindField

out = {}
xp = backend.xp()

# FLIP: dam break against an obstacle, FLIP and APIC
for apic in (False, True):
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    sim = FlipSimulation(spec, FlipSettings(apic=apic), *box((0, 0, 0), (0.3, 0.4, 0.35)),
                         *box((0.5, 0.0, 0.0), (0.6, 0.4, 0.2)), xp=xp)
    for f in range(6):
        st = sim.step(1 / 60)
        out[f"flip{apic}_iters{f}"] = np.array([st["iterations"], st["substeps"]])
    out[f"flip{apic}_pos"], out[f"flip{apic}_vel"] = sim.pos, sim.vel
    out[f"flip{apic}_u"], out[f"flip{apic}_v"], out[f"flip{apic}_w"] = sim.grid.u, sim.grid.v, sim.grid.w
    out[f"flip{apic}_cell"] = sim.grid.cell

# FLIP pressure on random cells (sealed pockets, moving walls), every preconditioner
rng = np.random.default_rng(5)
for pre in pressure.PRECONDITIONERS:
    g = DenseGrid(GridSpec((0.0, 0.0, 0.0), 0.1, (9, 7, 6)), xp)
    g.cell[...] = xp.asarray(rng.choice([AIR, FLUID, FLUID, FLUID, SOLID], size=g.cell.shape).astype(np.uint8))
    g.cell[2:5, 2:5, 2:6] = SOLID
    g.cell[3, 3, 3:5] = FLUID  # sealed pocket
    for a in (g.u, g.v, g.w, g.solid_u, g.solid_v, g.solid_w):
        a[...] = xp.asarray(rng.standard_normal(a.shape).astype(np.float32))
    p, st = pressure.solve_pressure(g, 0.01, preconditioner=pre)
    out[f"p_{pre}"] = p
    out[f"p_{pre}_it"] = np.array([st["iterations"], st["converged"]])
    out[f"p_{pre}_res"] = np.array([st["residual"]])
    pressure.project(g, p, 0.01)
    out[f"proj_{pre}"] = xp.concatenate([g.u.ravel(), g.v.ravel(), g.w.ravel()])
    out[f"div_{pre}"] = pressure.divergence(g)
    g.solid[...] = (g.cell == SOLID)
    transfer.enforce_boundaries(g)
    out[f"enf_{pre}"] = xp.concatenate([g.u.ravel(), g.v.ravel(), g.w.ravel()])
    out[f"ff_{pre}"] = xp.concatenate([m.ravel() for m in transfer.fluid_faces(g)])
mask = rng.random((11, 9, 13)) < 0.55
try:  # the grid core's labelling (issue 19), or FLIP's own before it
    from voxfx.kernels.grid.components import label_components
except ImportError:
    def label_components(m):
        return pressure.label_regions(m, backend.array_module(m))
out["labels"] = label_components(xp.asarray(mask))

# Snow with wind: a house in a diagonal gusty wind, drift on, both pressure solvers; a
# stronger wind over lying snow for drift
for solver, speed, depth in (("converge", 6.0, 0.0), ("thesis", 6.0, 0.0), ("drift", 14.0, 0.2)):
    v, t = merge((np.array([[0, 0, 0], [16, 0, 0], [16, 16, 0], [0, 16, 0]], np.float32),
                  np.array([[0, 1, 2], [0, 2, 3]], np.int32)), box((6, 6, 0), (10, 10, 3)))
    domain = SnowDomain.from_box((0, 0, 0), (16, 16, 8), wind_cells_xy=16, ground_vertices_xy=33)
    settings = SnowSettings(flake_count=3000, wind_speed=speed, wind_direction=_math.radians(35.0), gust_strength=0.4,
                            snowfall_rate=3600.0, drift=True, seed=3, obstacle_update_every=3,
                            pressure_solver="thesis" if solver == "thesis" else "converge", initial_depth=depth)
    sim = SnowSimulation(domain, settings, v, t, xp=xp)
    for s in range(12):
        sim.step(0.1)
        out[f"snow_{solver}_wind{s}"] = np.array([sim.last_wind["iterations"], sim.last_wind["residual"]])
    w = sim.wind
    out[f"snow_{solver}_u"], out[f"snow_{solver}_v"], out[f"snow_{solver}_w"] = w.u, w.v, w.w
    out[f"snow_{solver}_p"], out[f"snow_{solver}_solid"], out[f"snow_{solver}_diag"] = w.p, w.solid, w.diag
    out[f"snow_{solver}_snow"], out[f"snow_{solver}_air"] = sim.snow, sim.airborne
    for k, a in sim.flakes_host().items():
        out[f"snow_{solver}_flake_{k}"] = np.asarray(a)
    out[f"snow_{solver}_div"] = w.divergence()
    pts = rng.uniform(-2, 18, size=(500, 3)).astype(np.float32)
    out[f"snow_{solver}_sample"] = w.sample(xp.asarray(pts))

# Wind with random obstacles: sealed pockets, every side direction
for deg in (0.0, 90.0, 200.0, 315.0):
    domain = SnowDomain.from_box((0, 0, 0), (8, 6, 4), wind_cells_xy=8, ground_vertices_xy=9)
    w = WindField(domain, SnowSettings(wind_speed=3.0, wind_direction=_math.radians(deg), gust_strength=0.3, seed=1),
                  xp=xp)
    solid = xp.asarray((rng.random(domain.wind.array_shape) < 0.3).astype(np.uint8))
    w.set_obstacles(solid)
    for s in range(4):
        st = w.step(0.05, 0.05 * s)
        out[f"wind{deg}_st{s}"] = np.array([st["iterations"], st["residual"]])
    out[f"wind{deg}_u"], out[f"wind{deg}_v"], out[f"wind{deg}_w"], out[f"wind{deg}_solid"] = w.u, w.v, w.w, w.solid

np.savez(OUT, **{k: backend.to_numpy(a) for k, a in out.items()})
"""


def run_tree(tree: Path, out: Path, backend: str) -> None:
    code = f"ROOT = {str(tree)!r}\nOUT = {str(out)!r}\n" + PAYLOAD
    env = dict(os.environ, VOXFX_BACKEND=backend)
    r = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"bake failed in {tree}:\n{r.stderr[-4000:]}")


def compare(a_path: Path, b_path: Path) -> int:
    a, b = np.load(a_path), np.load(b_path)
    bad = sorted(set(a.files) ^ set(b.files))
    for k in sorted(set(a.files) & set(b.files)):
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            bad.append(k)
    for k in bad:
        print(f"DIFFERS: {k}")
    print(f"{len(set(a.files) & set(b.files)) - len(bad)} arrays identical, {len(bad)} differ")
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="git revision to compare against")
    ap.add_argument("--head", default=None, help="git revision (default: the working tree)")
    ap.add_argument("--backend", default="cpu", choices=("cpu", "gpu"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="voxfx-compare-") as tmp:
        tmp = Path(tmp)
        trees = []
        for name, rev in (("base", args.base), ("head", args.head)):
            if rev is None:
                trees.append(ROOT)
                continue
            tree = tmp / name
            tree.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
            trees.append(tree)
        outs = [tmp / "base.npz", tmp / "head.npz"]
        for tree, out in zip(trees, outs):
            run_tree(tree, out, args.backend)
        return compare(*outs)


if __name__ == "__main__":
    sys.exit(main())
