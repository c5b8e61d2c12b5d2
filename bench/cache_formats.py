"""Cache formats (issue 17): bytes per particle and per active voxel, write and read time
per frame, compact (.vxp, Zstandard and zlib) next to PLY.

The particles are a real liquid frame: the benches' dam break (``sim_scenes.liquid_scene``,
a 32³ grid, NumPy path) after a quarter second, tiled side by side until the frame holds
1M and 8M particles (each tile keeps the real frame's spacing and velocity field, with
fresh noise in the lowest bits: ``tiled``). *write*: encode + durable
write (temp, fsync, rename); *read*: the file to arrays; *load*: what the frame loader
does on a frame change (read + the mesh's vertices and attributes set), in Blender.
The volumes are that frame's liquid VDB (level set + velocity), float and half.

    python bench/cache_formats.py                # 1M and 8M particles
    python bench/cache_formats.py --counts 1e6   # quicker
    python bench/cache_formats.py --no-blender   # on a GPU machine without bpy: write/read rows

With CuPy and a GPU, a "compact zstd GPU" row encodes from device arrays (what a GPU
bake holds before ``particles_host``; the bake does not feed them yet).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from tools.package import load  # noqa: E402

load()

from sim_scenes import liquid_scene  # noqa: E402


def real_frame(res=32, frames=6):
    from voxfx.kernels.flip.bake import frame_arrays
    from voxfx.kernels.flip.sim import FlipSimulation

    spec, settings, (v, t) = liquid_scene(res)
    sim = FlipSimulation(spec, settings, v, t, xp=np)
    for _ in range(frames):
        sim.step(1 / 24)
    return spec, frame_arrays(sim, spec)


def tiled(positions, velocity, count, cell, seed=0):
    """*count* particles: copies of the frame side by side along x and y (1 m apart), each
    copy's particles moved by up to half a cell and its velocities by up to 1/16 relative
    (the size of FLIP's own particle noise), so no two copies share the bits a compressor
    would otherwise find repeated (exact copies pack to 0.5 byte a particle: not a real
    frame; copies moved by only one quantization step still to 5.1)."""
    rng = np.random.default_rng(seed)
    n = len(positions)
    tiles = -(-count // n)
    side = int(np.ceil(np.sqrt(tiles)))
    pos, vel = np.empty((tiles * n, 3), np.float32), np.empty((tiles * n, 3), np.float32)
    for i in range(tiles):
        jitter = rng.uniform(-0.5, 0.5, (n, 3)) * cell
        pos[i * n:(i + 1) * n] = positions + jitter + np.array([i % side, i // side, 0.0])
        vel[i * n:(i + 1) * n] = velocity * (1.0 + rng.uniform(-1.0, 1.0, (n, 3)) / 16)
    return pos[:count], vel[:count]


def timed(fn, repeat):
    """(median wall ms, the last value); ``timed_cpu`` also gives the median CPU ms of the
    process (all threads): on a shared machine the wall time is what the others left."""
    return timed_cpu(fn, repeat)[::2]


def timed_cpu(fn, repeat):
    walls, cpus = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(1000 * (time.perf_counter() - t))
        cpus.append(1000 * (time.process_time() - c))
    return statistics.median(walls), statistics.median(cpus), out


def write_frame(path, codec, pos, vel, size, cell, device=False):
    """One frame written as the bake writes it: the file made durable (fsync). *device*:
    encoded from CuPy arrays (the arrays already on the GPU, as a GPU bake holds them)."""
    from voxfx.addon import compact_points, ply

    path.unlink(missing_ok=True)
    if codec is None:
        ply.write_points(path, pos, {"velocity": vel, "size": size})
        return
    data = compact_points.encode(pos, {"velocity": vel, "size": size}, cell=cell, codec=codec)
    if device:
        import cupy

        cupy.cuda.Device().synchronize()
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def _device_arrays(pos, vel, size):
    """The frame's arrays on the GPU, or None without a usable CuPy."""
    try:
        import cupy

        return cupy.asarray(pos), cupy.asarray(vel), cupy.asarray(size)
    except Exception:  # noqa: BLE001  (no CuPy or no device: the CPU rows only)
        return None


def bench_particles(pos, vel, cell, folder, repeat, blender=True):
    from voxfx.addon import compact_points, ply

    n = len(pos)
    size = np.full(n, 0.25 * cell, np.float32)
    rows = []
    formats = [("compact zstd", ".vxp", compact_points.CODEC_ZSTD), ("compact zlib", ".vxp", compact_points.CODEC_ZLIB),
               ("PLY", ".ply", None)]
    device = _device_arrays(pos, vel, size)
    if device is not None:
        formats.insert(0, ("compact zstd GPU", ".vxp", compact_points.CODEC_ZSTD))
    for label, suffix, codec in formats:
        path = folder / f"frame{suffix}"
        read = ply.read_points if codec is None else compact_points.read_points
        arrays = device if label.endswith("GPU") else (pos, vel, size)
        write_ms, write_cpu, _ = timed_cpu(lambda: write_frame(path, codec, *arrays, cell, arrays is device),  # noqa: B023
                                           repeat)
        read_ms, read_cpu, _ = timed_cpu(lambda: read(path), repeat)  # noqa: B023  (called here, in this iteration)
        first_ms = load_ms = float("nan")
        if blender:  # the frame loader's mesh (no Blender: write and read rows only)
            import bpy

            from voxfx.addon import frame_loader

            mesh = bpy.data.meshes.new(f"bench {label}")
            first_ms, _ = timed(lambda: frame_loader._load_points(mesh, path), 1)  # noqa: B023  (sizes the mesh)
            load_ms, _ = timed(lambda: frame_loader._load_points(mesh, path), repeat)  # noqa: B023
            assert len(mesh.vertices) == n
            bpy.data.meshes.remove(mesh)
        rows.append((label, path.stat().st_size / n, write_ms, write_cpu, read_ms, read_cpu, first_ms, load_ms))
        path.unlink()
    return rows


BAKE_FRAMES = 4
STEP_SECONDS = 2.0  # a GPU step of an 8M-particle liquid is of this order (bench/flip.py)


def bench_bake_loop(pos, vel, cell, folder, background):
    """Seconds for BAKE_FRAMES frames through the real cache and frame loop
    (``sim_bake.simulate``): each step waits STEP_SECONDS without the CPU (a GPU step),
    each frame a compact particle file and its checkpoint; the files written inline or on
    the writer thread while the next frame steps."""
    from voxfx.addon import compact_points, sim_bake
    from voxfx.addon.cache import BakeCache
    from voxfx.addon.jobs import run_inline

    size = np.full(len(pos), 0.25 * cell, np.float32)

    class Frames:
        def __init__(self, progress=None):
            self.frame = 0

        def checkpoint(self):
            return {"frame": np.int64(self.frame)}

    def advance(sim, frame):
        time.sleep(STEP_SECONDS)
        sim.frame = frame
        return ""

    def writers(sim, progress=None):
        return {".vxp": lambda p: compact_points.write_points(p, pos, {"velocity": vel, "size": size}, cell=cell)}

    cache = BakeCache(folder, "liquid", kind="flip")
    plan = cache.begin({"bench": 1}, 1, BAKE_FRAMES)
    t = time.perf_counter()
    run_inline(sim_bake.simulate(cache, plan, Frames, advance, writers, first_frame_is_initial=False,
                                 background=background))
    seconds = time.perf_counter() - t
    cache.free()
    return seconds


def bench_volumes(spec, arrays, folder):
    from voxfx.addon import writeback

    out = []
    for half in (False, True):
        grids = {"surface": arrays["surface"], "velocity": arrays["cell_velocity"]}
        path = writeback.write_vdb(folder / f"v{half}.vdb", grids, arrays["surface_spec"],
                                   grid_class={"surface": "LEVEL_SET", "velocity": "FOG_VOLUME"},
                                   background={"surface": 3.0 * spec.voxel_size, "velocity": 0.0}, half=half)
        vdb = writeback.openvdb_module()
        active = sum(vdb.read(str(path), n).activeVoxelCount() for n in ("surface", "velocity"))
        out.append(("half" if half else "float", path.stat().st_size, active))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=float, nargs="+", default=[1e6, 8e6])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bake", action="store_true", help="also time a bake's frame loop, files written inline "
                        "and on the writer thread (sim_bake.simulate)")
    parser.add_argument("--no-blender", action="store_true", help="without bpy (a GPU machine): no VDB and no "
                        "load rows, the write and read rows only")
    args = parser.parse_args()
    if not args.no_blender:
        import bpy  # noqa: F401  (the frame loader's mesh)

    spec, arrays = real_frame()
    n0 = len(arrays["position"])
    print(f"real frame: {n0:,} particles, cell {spec.voxel_size:.4f} m, {os.cpu_count()} CPU cores")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for label, size, active in ([] if args.no_blender else bench_volumes(spec, arrays, folder)):
            print(f"VDB {label:5s}: {size:,} bytes, {active:,} active voxels, {size / active:.2f} bytes/active voxel")
        print(f"{'particles':>10s} {'format':16s} {'B/particle':>10s} {'write ms':>9s} {'(CPU)':>6s} {'read ms':>8s} "
              f"{'(CPU)':>6s} {'load ms (first)':>15s} {'load ms':>8s}")
        for count in args.counts:
            pos, vel = tiled(arrays["position"], arrays["velocity"], int(count), spec.voxel_size)
            for label, bpp, w, wc, r, rc, first, ld in bench_particles(pos, vel, spec.voxel_size, folder,
                                                                       args.repeat, not args.no_blender):
                print(f"{len(pos):>10,d} {label:16s} {bpp:10.2f} {w:9.0f} {wc:6.0f} {r:8.0f} {rc:6.0f} {first:15.0f} "
                      f"{ld:8.0f}")
            if args.bake:
                for background in (False, True):
                    seconds = bench_bake_loop(pos, vel, spec.voxel_size, folder / f"bake{background}", background)
                    print(f"{len(pos):>10,d} bake loop, {BAKE_FRAMES} frames of a {STEP_SECONDS:.1f} s step, files "
                          f"{'on the writer thread' if background else 'written inline'}: {seconds:.2f} s")


if __name__ == "__main__":
    main()
