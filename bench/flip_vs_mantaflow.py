"""CPU comparison (issue 5): VoxFX's FLIP liquid on its NumPy path vs Blender's own
Mantaflow liquid, baked through bpy, on the same small dam break.

    .venv/bin/python bench/flip_vs_mantaflow.py [--res 32 48] [--repeats 5]

Scene (both engines): a closed 1 m × 0.5 m × 1 m box (x, y, z; z up), a 0.3 m cube of
water in the corner at the origin, default gravity (0, 0, −9.81), no obstacle, 24 frames
at 24 fps (1 s), ``res`` cells along the longest side (res × res/2 × res cells).

* **VoxFX** — ``FlipSimulation(..., FlipSettings(), xp=numpy)``: FLIP (0.97) with
  8 particles per cell in the whole liquid, MGPCG pressure to a relative residual of
  1e-4, RK2 advection, adaptive CFL substeps (the default cfl 2, at most 8 per frame), plus
  ``sim.level_set()`` (the particle level set closed against the walls) once per frame,
  as a bake does. A second row runs it under Mantaflow's step policy (cfl 2, ≤ 4).
* **Mantaflow** — a domain object (fluid modifier DOMAIN, domain_type LIQUID,
  ``resolution_max`` = res, cache_type ALL in a temporary folder, OpenVDB cache, **mesh
  off**) and a flow object (FLOW, flow_type LIQUID, flow_behavior GEOMETRY), baked with
  ``bpy.ops.fluid.bake_all()`` in background mode (a ``temp_override`` with the domain
  active). Blender's defaults otherwise: FLIP (0.97), particles seeded 2³ per cell and
  then kept at 8–16 per cell only in a band 3 cells deep under the surface
  (``adjustNumber``), RK4 particle advection, a grid level set ``phi`` rebuilt from the
  particles every step (plus semi-Lagrangian advection of phi and velocity), PCG
  pressure at Mantaflow's default accuracy (1e-3), adaptive steps (CFL 2, 1–4 per
  frame), the outermost cell layer as wall, each frame's velocity and particles written
  to the VDB cache. "Mesh" is off because with it Blender would also build an upsampled
  (×2) particle level set and a triangle mesh every frame — more than VoxFX's level set.
  A second row holds every thread of the process to one core (CPU affinity).

Columns: *particles* — FLIP particles after the first step and after the last.
*total s/frame* — wall clock of the whole run / 24: VoxFX's set-up (voxelize and seed)
+ 24 × (step + level set); Mantaflow's ``bake_all`` call (scene export, flow
voxelization, solver set-up, steps, cache writing). *solver s/frame* — VoxFX's
step + level set only; Mantaflow's ``liquid_adaptive_step`` calls only (timed by
wrapping that function in Mantaflow's Python namespace; no cache writing). *CPU/wall* —
process user+sys time over wall time, for the whole run and for the solver part:
Mantaflow's kernels run on worker threads (both cores here), NumPy's on one. *centre of
mass* — of the particles at 1 s, a check that both collapsed the same column (the bake's
last particles are saved as text by the wrapper, outside the timings). Timings are
medians of ``--repeats`` runs, the four cases interleaved so machine noise hits them
alike.

bpy 5.0.1 workaround (see ``enable_mantaflow``): in the ``bpy`` *module* build,
Blender creates Mantaflow's ``manta`` Python module when bpy is imported, before
Mantaflow's registry has copied the base classes' methods into the derived classes, so
``LevelsetGrid.setConst``, ``BasicParticleSystem.create`` ... are missing and every
Mantaflow script fails (the bake "completes" in 0.2 s and writes only config files).
We let one throwaway domain run Mantaflow's set-up, delete it, and call the module's
init function again (``PyInit_manta_main``, exported by bpy's ``__init__.so``); the
types are rebuilt in place with the inherited methods and later bakes run normally.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
import bpy  # noqa: E402

from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.grid import GridSpec  # noqa: E402

FPS = 24
FRAMES = 24
DOMAIN = (1.0, 0.5, 1.0)
WATER = 0.3


def box(lo, hi):
    x0, y0, z0 = lo
    x1, y1, z1 = hi
    v = np.array([[x0, y0, z0], [x1, y0, z0], [x1, y1, z0], [x0, y1, z0],
                  [x0, y0, z1], [x1, y0, z1], [x1, y1, z1], [x0, y1, z1]], dtype=np.float32)
    q = [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7)]
    return v, q


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# --------------------------------------------------------------------------- VoxFX

def run_voxfx(res, settings=None):
    spec = GridSpec((0.0, 0.0, 0.0), DOMAIN[0] / res, (res, res // 2, res))
    v, q = box((0.0, 0.0, 0.0), (WATER, WATER, WATER))
    tris = np.array([(a, b, c) for a, b, c, d in q] + [(a, c, d) for a, b, c, d in q], dtype=np.int32)
    c0, t0 = cpu_seconds(), time.perf_counter()
    sim = FlipSimulation(spec, settings or FlipSettings(), v, tris, xp=np)
    t1 = time.perf_counter()
    substeps = 0
    for _ in range(FRAMES):
        substeps += sim.step(1.0 / FPS)["substeps"]
        phi = sim.level_set()  # the surface a bake writes each frame
    t2, c2 = time.perf_counter(), cpu_seconds()
    assert phi.shape == sim.surface_spec.array_shape and (phi < 0).any()
    cpu = (c2 - c0) / (t2 - t0)  # set-up is ~5 ms of it: the same ratio for the solver
    return {"total": (t2 - t0) / FRAMES, "solver": (t2 - t1) / FRAMES, "cpu": cpu, "solver_cpu": cpu,
            "steps": substeps, "particles": len(sim.pos), "particles0": len(sim.pos),
            "com": tuple(sim.centre_of_mass()), "grid": spec.shape}


# --------------------------------------------------------------------------- Mantaflow

class MantaProbe:
    """Times Mantaflow's per-step Python function and reads its state between steps.

    Blender runs Mantaflow's scripts in a private namespace that starts with
    ``from manta import *``; we put a copy of the ``manta`` module there whose
    ``mantaMsg`` (called at the top of every script function) wraps
    ``liquid_adaptive_step_<id>`` with a timer the first time it sees it. After each
    step (outside the timer) it counts the FLIP particles, and after the last frame's
    steps it saves them as text for the centre of mass; the time that takes is
    subtracted from the bake's total."""

    def __init__(self):
        self.namespace = None
        self.reset(None)

    def reset(self, dump):
        self.step_times = []  # (wall s, CPU s) per step
        self.counts = []  # FLIP particles after each step
        self.dump = dump  # text file for the particles after the last frame
        self.overhead = 0.0  # seconds spent here outside the timed steps

    def module(self, real):
        mod = types.ModuleType("manta")
        mod.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})
        message = real.mantaMsg

        def manta_msg(*args, **kwargs):
            self._wrap(sys._getframe(1).f_globals)
            return message(*args, **kwargs)

        mod.mantaMsg = manta_msg
        return mod

    def _wrap(self, ns):
        self.namespace = ns
        for name in [k for k in ns if k.startswith("liquid_adaptive_step_")]:
            fn = ns[name]
            if getattr(fn, "_timed", False):
                continue

            def timed(framenr, *args, _fn=fn, **kwargs):
                t, c = time.perf_counter(), cpu_seconds()
                try:
                    return _fn(framenr, *args, **kwargs)
                finally:
                    t1 = time.perf_counter()
                    self.step_times.append((t1 - t, cpu_seconds() - c))
                    pp = self.particles()
                    self.counts.append(pp.pySize())
                    if framenr == FRAMES and self.dump:
                        pp.save(self.dump)
                    self.overhead += time.perf_counter() - t1

            timed._timed = True
            ns[name] = timed

    def _newest(self, prefix):
        ns = self.namespace or {}
        ids = [k[len(prefix):] for k in ns if k.startswith(prefix) and k[len(prefix):].isdigit()]
        return ns.get(prefix + max(ids, key=int)) if ids else None

    def particles(self):
        return self._newest("pp_s")  # the newest solver's (ids grow per domain)

    def grid_size(self):
        gs = self._newest("gs_s")
        return (int(gs.x), int(gs.y), int(gs.z)) if gs is not None else ()


def read_particle_text(path):
    """Positions (grid units) from Mantaflow's text particle dump: ``i: [x,y,z] ...``."""
    rows = []
    with open(path) as f:
        for line in f:
            head, sep, rest = line.partition(": [")
            if sep and head.strip().isdigit():
                rows.append([float(x) for x in rest.split("]", 1)[0].split(",")])
    return np.array(rows, dtype=np.float64).reshape(-1, 3)


def mesh_object(name, lo, hi):
    v, q = box(lo, hi)
    me = bpy.data.meshes.new(name)
    me.from_pydata([tuple(map(float, p)) for p in v], [], q)
    me.update()
    obj = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def manta_scene(res, cache):
    domain = mesh_object("domain", (0.0, 0.0, 0.0), DOMAIN)
    water = mesh_object("water", (0.0, 0.0, 0.0), (WATER, WATER, WATER))
    d = domain.modifiers.new("Fluid", "FLUID")
    d.fluid_type = "DOMAIN"
    ds = d.domain_settings
    ds.domain_type = "LIQUID"
    ds.resolution_max = res
    ds.use_mesh = False
    ds.cache_type = "ALL"
    ds.cache_directory = cache
    ds.cache_frame_start, ds.cache_frame_end = 1, FRAMES
    for side in ("front", "back", "left", "right", "top", "bottom"):  # closed box (the default)
        setattr(ds, f"use_collision_border_{side}", True)
    f = water.modifiers.new("Fluid", "FLUID")
    f.fluid_type = "FLOW"
    f.flow_settings.flow_type = "LIQUID"
    f.flow_settings.flow_behavior = "GEOMETRY"
    return domain, water


def remove(*objs):
    for o in objs:
        me = o.data
        bpy.data.objects.remove(o)
        bpy.data.meshes.remove(me)


def enable_mantaflow(probe):
    """Work around bpy 5.0.1's half-initialised ``manta`` module (module text)."""
    scene = bpy.context.scene
    if hasattr(sys.modules["manta"].LevelsetGrid, "setConst"):
        sys.modules["manta"] = probe.module(sys.modules["manta"])
        return
    cache = tempfile.mkdtemp(prefix="voxfx_manta_setup_")
    scene.frame_set(2)
    objs = manta_scene(8, cache)
    bpy.context.view_layer.objects.active = objs[0]
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:  # its scripts fail (the bug itself): hide the tracebacks
        os.dup2(devnull.fileno(), 2)
        try:
            scene.frame_set(1)  # creates the domain's Mantaflow instance: runs the registry set-up
            remove(*objs)  # its (failed) solver objects go while the old types are intact
            sys.stderr.flush()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    shutil.rmtree(cache, ignore_errors=True)
    with open("/proc/self/maps") as maps:
        so = next(line.split()[-1] for line in maps if line.rstrip().endswith("bpy/__init__.so"))
    init = ctypes.PyDLL(so).PyInit_manta_main
    init.restype = ctypes.py_object
    manta = init()  # rebuilds the same static type objects, now with inherited methods
    if not hasattr(manta.LevelsetGrid, "setConst"):
        raise RuntimeError("Mantaflow's Python module is still missing inherited methods")
    for value in vars(manta).values():  # the rebuild reset their reference counts: pin them
        if isinstance(value, type):
            for _ in range(1000):
                ctypes.pythonapi.Py_IncRef(ctypes.py_object(value))
    sys.modules["manta"] = probe.module(manta)


def pin(cpus):
    """Set the CPU affinity of every thread of this process (Mantaflow's worker threads included)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # a thread that just ended
            pass


def run_mantaflow(res, probe, cores=None):
    scene = bpy.context.scene
    every = os.sched_getaffinity(0)
    if cores:
        pin(set(sorted(every)[:cores]))
    cache = tempfile.mkdtemp(prefix="voxfx_manta_")
    scene.frame_set(1)
    domain, water = manta_scene(res, cache)
    bpy.context.view_layer.objects.active = domain
    probe.reset(os.path.join(cache, "particles_last.txt"))
    c0, t0 = cpu_seconds(), time.perf_counter()
    with bpy.context.temp_override(object=domain, active_object=domain, scene=scene):
        result = bpy.ops.fluid.bake_all()
    t1, c1 = time.perf_counter(), cpu_seconds()
    pin(every)
    # Check that the bake really ran: one data file per frame holding the FLIP particles,
    # at least one step per frame, and particles that moved.
    files = sorted((Path(cache) / "data").glob("fluid_data_*.vdb"))
    with_particles = sum(b"particles" in p.read_bytes() for p in files)
    pos = read_particle_text(probe.dump) if os.path.exists(probe.dump) else np.zeros((0, 3))
    h = DOMAIN[0] / res  # Mantaflow positions are in cells from the domain's corner
    wall, cpu = (sum(x) for x in zip(*probe.step_times)) if probe.step_times else (0.0, 0.0)
    out = {"total": (t1 - t0 - probe.overhead) / FRAMES, "solver": wall / FRAMES,
           "cpu": (c1 - c0) / (t1 - t0), "solver_cpu": cpu / wall if wall else 0.0,
           "steps": len(probe.step_times), "particles0": probe.counts[0] if probe.counts else 0,
           "particles": probe.counts[-1] if probe.counts else 0,
           "com": tuple(pos.mean(axis=0) * h) if len(pos) else (), "grid": probe.grid_size(),
           "files": len(files), "with_particles": with_particles, "result": result}
    if result != {"FINISHED"} or len(files) != FRAMES or with_particles != FRAMES or out["steps"] < FRAMES \
            or not out["particles"] or not out["com"]:
        raise RuntimeError(f"Mantaflow bake did not run: {out}")
    remove(domain, water)
    shutil.rmtree(cache, ignore_errors=True)
    return out


# --------------------------------------------------------------------------- report

def median_runs(fns, repeats):
    """Run each function *repeats* times, interleaved (machine noise hits them alike);
    medians of the timings, the rest from the first run."""
    runs = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, runs):
            out.append(fn())
    results = []
    for out in runs:
        best = dict(out[0])
        for key in ("total", "solver", "cpu", "solver_cpu"):
            best[key] = statistics.median(r[key] for r in out)
        best["totals"] = [round(r["total"], 4) for r in out]
        results.append(best)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--res", type=int, nargs="+", default=[32, 48])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps = FPS
    scene.frame_start, scene.frame_end = 1, FRAMES
    probe = MantaProbe()
    enable_mantaflow(probe)

    # VoxFX also under Mantaflow's step policy (CFL 2, at most 4 steps per frame), and
    # Mantaflow also held to one core (NumPy uses one).
    manta_policy = FlipSettings(cfl=2.0, max_substeps=4)
    names = ["VoxFX (NumPy)", "VoxFX (NumPy), CFL 2, ≤ 4 steps", "Mantaflow (bpy)", "Mantaflow (bpy), 1 core"]
    rows = []
    for res in args.res:
        runs = median_runs([lambda res=res: run_voxfx(res), lambda res=res: run_voxfx(res, manta_policy),
                            lambda res=res: run_mantaflow(res, probe),
                            lambda res=res: run_mantaflow(res, probe, cores=1)],
                           args.repeats)
        for name, r in zip(names, runs):
            print(f"res {res}: {name}: {r}", flush=True)
        rows.append((res, runs))

    print()
    print("| res | engine | grid | particles (step 1 → frame 24) | steps / 24 frames | total s/frame "
          "| solver s/frame | solver s/step | CPU/wall (total, solver) | centre of mass at 1 s (m) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for res, runs in rows:
        for name, r in zip(names, runs):
            grid = "×".join(str(n) for n in r["grid"])
            print(f"| {res} | {name} | {grid} | {r['particles0']:,} → {r['particles']:,} | {r['steps']} "
                  f"| {r['total']:.3f} | {r['solver']:.3f} | {r['solver'] * FRAMES / r['steps']:.4f} "
                  f"| {r['cpu']:.2f}, {r['solver_cpu']:.2f} | ({', '.join(f'{c:.2f}' for c in r['com'])}) |")
    print()
    print("| res | VoxFX / Mantaflow (total s/frame) | VoxFX / Mantaflow 1 core | VoxFX CFL 2 / Mantaflow "
          "| VoxFX CFL 2 / Mantaflow 1 core |")
    print("|---|---|---|---|---|")
    for res, (vox, vox2, manta, manta1) in rows:
        print(f"| {res} | {vox['total'] / manta['total']:.1f}× | {vox['total'] / manta1['total']:.1f}× "
              f"| {vox2['total'] / manta['total']:.1f}× | {vox2['total'] / manta1['total']:.1f}× |")
    sys.stdout.flush()
    sys.stderr.flush()
    # Mantaflow's own teardown at interpreter exit can abort ("can't clean grid cache");
    # everything is measured and printed, so leave without it.
    os._exit(0)


if __name__ == "__main__":
    main()
