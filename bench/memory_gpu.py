"""GPU memory of VoxFX's device paths against the guards' formulas (issue 21 §6).

Plain python3 + CuPy (no Blender). For each case the peak of CuPy's default pool's
*used* bytes is recorded by a memory hook (every malloc) and compared with the formula
the guard uses:

* voxelize (cube and a UV sphere; surface, solid, solid+surface, solid+surface with the
  hole-tolerant vote) vs ``kernels.voxelize.estimate_bytes(xp=cupy)``;
* ``bitgrid.count`` / ``coordinates`` vs ``count_bytes`` / ``coordinates_bytes``;
* the pressure solve (first, with a new solver, and again with the cached one) vs
  ``pressure.pressure_stage_bytes``;
* a FLIP bake (``FlipSimulation``: two frames and the frame outputs) vs
  ``kernels.flip.sim.flip_memory``;
* release: after ``memory.release_gpu_pool`` the pool holds (almost) nothing and the
  solver cache is empty; a second identical bake peaks at the same bytes.

    python3 bench/memory_gpu.py [--quick] [--max-res N]     (writes $OUT/memory_gpu.json)

Prints a table; exits 1 when any measured/estimate ratio leaves [0.67, 1.5] (or a check
fails), so the formulas are verified, not assumed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
import cupy as cp  # noqa: E402
from cupy.cuda import memory_hook  # noqa: E402

from voxfx.kernels import memory  # noqa: E402
from voxfx.kernels.flip import pressure  # noqa: E402
from voxfx.kernels.flip.grid import FLUID, SOLID, DenseGrid, FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation, flip_memory  # noqa: E402
from voxfx.kernels.grid import GridSpec, bitgrid  # noqa: E402
from voxfx.kernels.voxelize import estimate_bytes, voxelize  # noqa: E402

LOW, HIGH = 0.67, 1.5
POOL = cp.get_default_memory_pool()


class PeakHook(memory_hook.MemoryHook):
    """Peak of the pool's used bytes (and reserved bytes) since the last reset."""

    name = "VoxFXPeak"

    def __init__(self):
        self.trace = None  # a list: record big allocations (phase, MiB, used MiB, caller) there
        self.phase = ""
        self.reset()

    def reset(self):
        cp.cuda.Device().synchronize()
        self.base = POOL.used_bytes()
        self.peak = self.base
        self.reserved = POOL.total_bytes()

    def malloc_postprocess(self, **kwargs):
        self.peak = max(self.peak, POOL.used_bytes())
        self.reserved = max(self.reserved, POOL.total_bytes())
        if self.trace is not None and kwargs.get("mem_size", 0) >= (4 << 20):
            import traceback

            frames = [f for f in traceback.extract_stack()[:-2] if "voxfx" in f.filename or "kernels" in f.filename]
            where = " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[-3:][::-1])
            self.trace.append((self.phase, kwargs["mem_size"] / 2**20, (POOL.used_bytes() - self.base) / 2**20,
                               where))

    @property
    def growth(self):
        return self.peak - self.base


def box_mesh(lo, hi):
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])], np.float32)
    t = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                  [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]], np.int32)
    return v, t


def sphere_mesh(n=96):
    """A closed UV sphere of radius 0.5 (n rings × 2n segments)."""
    th = np.linspace(0, np.pi, n + 1)[1:-1]
    ph = np.linspace(0, 2 * np.pi, 2 * n, endpoint=False)
    ring = np.stack([np.outer(np.sin(th), np.cos(ph)), np.outer(np.sin(th), np.sin(ph)),
                     np.repeat(np.cos(th)[:, None], 2 * n, 1)], -1).reshape(-1, 3)
    v = np.concatenate([[[0, 0, 1]], ring, [[0, 0, -1]]]).astype(np.float32) * 0.5
    m = 2 * n
    tris = [[0, 1 + (s + 1) % m, 1 + s] for s in range(m)]
    for r in range(n - 2):
        for s in range(m):
            a, b = 1 + r * m + s, 1 + r * m + (s + 1) % m
            tris += [[a, b, b + m], [a, b + m, a + m]]
    last = len(v) - 1
    base = 1 + (n - 2) * m
    tris += [[last, base + s, base + (s + 1) % m] for s in range(m)]
    return v, np.asarray(tris, np.int32)


ROWS = []
FAILED = []


def record(kind, case, measured, estimate, extra=""):
    ratio = measured / estimate if estimate else float("nan")
    ok = LOW <= ratio <= HIGH
    ROWS.append({"kind": kind, "case": case, "measured": int(measured), "estimate": int(estimate),
                 "ratio": ratio, "ok": ok, "extra": extra})
    if not ok:
        FAILED.append(f"{kind} {case}: measured/estimate {ratio:.2f}")
    print(f"{kind} | {case} | {measured / 2**20:,.1f} | {estimate / 2**20:,.1f} | {ratio:.2f}"
          f"{'' if ok else ' !'} | {extra}", flush=True)


def check(cond, what):
    if not cond:
        FAILED.append(what)
    print(f"check | {what} | {'ok' if cond else 'FAILED'}", flush=True)


def fresh():
    memory.release_gpu_pool()
    cp.cuda.Device().synchronize()


def bench_voxelize(hook, resolutions):
    meshes = {"cube": box_mesh((-0.5,) * 3, (0.5,) * 3), "sphere": sphere_mesh()}
    for name, (v, t) in meshes.items():
        for res in resolutions:
            spec = GridSpec.around(v.min(0), v.max(0), 1.0 / res)
            for mode, vote in (("surface", False), ("solid", False), ("solid+surface", False),
                               ("solid+surface", True)):
                fresh()
                est = estimate_bytes(spec, mode, len(v), len(t), vote, xp=cp)
                hook.reset()
                g = voxelize(v, t, spec, mode, vote=vote, xp=cp, keep_on_device=True)
                cp.cuda.Device().synchronize()
                record("voxelize", f"{name} {res}³ {mode}{' vote' if vote else ''}", hook.growth, est,
                       f"{len(t)} tris")
                if mode == "solid+surface" and not vote:
                    n = None
                    hook.reset()
                    n = bitgrid.count(g.bits)
                    record("count", f"{name} {res}³", max(hook.growth, 1), bitgrid.count_bytes(spec.shape, cp))
                    hook.reset()
                    ijk = bitgrid.coordinates(g.bits, spec.shape[0])
                    cp.cuda.Device().synchronize()
                    record("coordinates", f"{name} {res}³", hook.growth,
                           bitgrid.coordinates_bytes(spec.shape, n, cp), f"{n:,} voxels")
                    del ijk
                del g


def bench_count_big(hook, side):
    """count() on a big dense grid: the pool may grow by one chunk, not by the grid."""
    fresh()
    shape = (side, side, side)
    words = cp.zeros((side, side, bitgrid.words_along_x(side)), dtype=cp.uint32)
    words[::7, ::5, :] = 0x0F0F0F0F
    hook.reset()
    n = bitgrid.count(words)
    grew = hook.growth
    check(grew <= bitgrid.count_bytes(shape, cp) + (1 << 20),
          f"count() on {side}³ ({bitgrid.nbytes(shape) / 2**30:.1f} GiB grid) allocated "
          f"{grew / 2**20:.1f} MiB ≤ one chunk ({bitgrid.count_bytes(shape, cp) / 2**20:.0f} MiB); {n:,} set")
    del words


def liquid_grid(res, fill=0.5):
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / res, (res, res, res))
    g = DenseGrid(spec, cp)
    cell = np.zeros(spec.array_shape, np.uint8)
    cell[: int(res * fill)] = FLUID
    cell[0], cell[:, 0], cell[:, -1], cell[:, :, 0], cell[:, :, -1] = SOLID, SOLID, SOLID, SOLID, SOLID
    g.cell[...] = cp.asarray(cell)
    g.w[...] = cp.asarray(np.random.default_rng(0).standard_normal(g.w.shape).astype(np.float32)) * 0.1
    return spec, g


def bench_pressure(hook, resolutions):
    for res in resolutions:
        fresh()
        spec, g = liquid_grid(res)
        est = pressure.pressure_stage_bytes(spec.shape)
        hook.reset()
        p, stats = pressure.solve_pressure(g, 1 / 120, max_iterations=50)
        cp.cuda.Device().synchronize()
        record("pressure", f"{res}³ new solver", hook.growth, est, f"{stats['iterations']} its")
        del p
        hook.reset()  # the cached solver is alive now: a second solve peaks within it
        p, stats = pressure.solve_pressure(g, 1 / 120, max_iterations=50)
        cp.cuda.Device().synchronize()
        solver = pressure.pressure_memory_bytes(spec.shape)
        record("pressure", f"{res}³ cached solver", hook.growth + solver, est,
               f"+{solver / 2**20:.0f} MiB cached")
        del p, g


def bake(res, frames=2):
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / res, (res, res, res))
    v, t = box_mesh((0.05, 0.05, 0.05), (0.55, 0.95, 0.5))
    settings = FlipSettings(max_substeps=2, pressure_max_iterations=60)
    sim = FlipSimulation(spec, settings, v, t, xp=cp)
    particles = int(sim.pos.shape[0])
    for _ in range(frames):
        sim.step(1 / 24)
        sim.particles_host()
        sim.level_set()
        sim.cell_velocity()
    cp.cuda.Device().synchronize()
    return spec, particles, sim


def bench_flip(hook, resolutions):
    for res in resolutions:
        fresh()
        hook.reset()
        spec, particles, sim = bake(res)
        est = flip_memory(spec, particles, xp=cp)
        record("flip bake", f"{res}³, {particles:,} particles", hook.growth, est,
               f"reserved {hook.reserved / 2**20:,.0f} MiB")
        first = hook.growth
        del sim
        released = memory.release_gpu_pool()
        check(POOL.total_bytes() <= (64 << 20) and len(pressure._gpu_solvers) == 0,
              f"after a {res}³ bake release_gpu_pool gave back {released / 2**20:,.0f} MiB; pool holds "
              f"{POOL.total_bytes() / 2**20:.1f} MiB, {len(pressure._gpu_solvers)} cached solvers")
        hook.reset()
        spec, particles, sim = bake(res)
        check(abs(hook.growth - first) <= 0.05 * first,
              f"second {res}³ bake peaks at {hook.growth / 2**20:,.0f} MiB like the first ({first / 2**20:,.0f})")
        del sim
        fresh()


def bench_flip_trace(hook, res):
    """Where a small bake's peak comes from: growth per phase and every allocation of
    4 MiB or more with its caller (printed, not judged)."""
    from voxfx.kernels.flip.surface import WALL_CELLS

    fresh()
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / res, (res, res, res))
    v, t = box_mesh((0.05, 0.05, 0.05), (0.55, 0.95, 0.5))
    hook.trace = []
    hook.reset()
    phases = []

    def phase(name, fn):
        hook.phase = name
        out = fn()
        cp.cuda.Device().synchronize()
        phases.append((name, (hook.peak - hook.base) / 2**20, (POOL.used_bytes() - hook.base) / 2**20))
        return out

    sim = phase("construct", lambda: FlipSimulation(spec, FlipSettings(max_substeps=2, pressure_max_iterations=60),
                                                    v, t, xp=cp))
    for f in range(2):
        phase(f"step {f}", lambda: sim.step(1 / 24))
        phase(f"particles_host {f}", sim.particles_host)
        phase(f"level_set {f}", sim.level_set)
        phase(f"cell_velocity {f}", lambda: sim.cell_velocity(padding=WALL_CELLS))
    parts = flip_memory(spec, int(sim.pos.shape[0]), parts=True, xp=cp)
    print(f"trace | flip {res}³, {int(sim.pos.shape[0]):,} particles | estimate stages (MiB): "
          + ", ".join(f"{k} {b / 2**20:.1f}" for k, b in parts.items()))
    for name, peak, used in phases:
        print(f"trace | phase {name} | peak so far {peak:.1f} MiB | in use after {used:.1f} MiB")
    for ph, size, used, where in hook.trace:
        print(f"trace | alloc in {ph} | {size:.1f} MiB | in use {used:.1f} MiB | {where}")
    hook.trace = None
    sim = None  # free the bake before the next case
    fresh()


def bench_snow(hook, configs):
    """A snow bake (construct, three steps with drift, frame outputs) vs ``SnowDomain.nbytes``."""
    sys.path.insert(0, str(ROOT))
    from bench.sim_scenes import snow_scene
    from voxfx.kernels.snow.sim import SnowSimulation

    for flakes, wind, ground in configs:
        fresh()
        domain, settings, (v, t), (ov, ot) = snow_scene(flakes, wind, ground)
        est = domain.nbytes(flakes, xp=cp)
        hook.reset()
        sim = SnowSimulation(domain, settings, v, t, ov, ot, xp=cp)
        construct = hook.growth
        for _ in range(3):
            sim.step(1 / 48)
        sim.flakes_host()
        sim.snow_host()
        cp.cuda.Device().synchronize()
        nx, ny, nz = domain.wind.shape
        gx, gy = domain.ground_shape
        record("snow bake", f"{flakes:,} flakes, wind {nx}×{ny}×{nz}, ground {gx}×{gy}", hook.growth, est,
               f"construct {construct / 2**20:.0f} MiB")
        del sim
        fresh()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only (a minute)")
    ap.add_argument("--max-res", type=int, default=1024)
    ap.add_argument("--only", default="voxelize,count,pressure,flip,trace,snow",
                    help="comma-separated groups to run (default: all)")
    args = ap.parse_args(argv)
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    dev = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = dev["name"].decode() if isinstance(dev["name"], bytes) else str(dev["name"])
    free, total = cp.cuda.runtime.memGetInfo()
    print(f"# {name}, {total / 2**30:.1f} GiB, CuPy {cp.__version__}, {time.strftime('%Y-%m-%d')}")
    print("kind | case | measured MiB | estimate MiB | meas/est | note")
    print("--- | --- | --- | --- | --- | ---")
    vox = [r for r in ((128, 256) if args.quick else (256, 512, 1024)) if r <= args.max_res]
    prs = [r for r in ((64, 128) if args.quick else (128, 256, 384)) if r <= args.max_res]
    flp = [r for r in ((32, 64) if args.quick else (64, 128, 192)) if r <= args.max_res]
    t0 = time.time()
    with PeakHook() as hook:
        only = set(args.only.split(","))
        if "voxelize" in only:
            bench_voxelize(hook, vox)
        if "count" in only:
            bench_count_big(hook, 512 if args.quick else 2048)
        if "pressure" in only:
            bench_pressure(hook, prs)
        if "flip" in only:
            bench_flip(hook, flp)
        if "trace" in only:
            bench_flip_trace(hook, 64)
        if "snow" in only:
            bench_snow(hook, [(100_000, 32, 129), (1_000_000, 128, 513)] if args.quick else
                   [(100_000, 32, 129), (1_000_000, 128, 513), (4_000_000, 256, 1025), (10_000_000, 256, 2049)])
    result = {"device": name, "total_bytes": int(total), "cupy": cp.__version__, "rows": ROWS, "failed": FAILED,
              "seconds": time.time() - t0}
    (out / "memory_gpu.json").write_text(json.dumps(result, indent=1))
    print(f"{sum(r['ok'] for r in ROWS)}/{len(ROWS)} ratios within [{LOW}, {HIGH}]; "
          f"{len(FAILED)} failures{': ' + '; '.join(FAILED) if FAILED else ''}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
