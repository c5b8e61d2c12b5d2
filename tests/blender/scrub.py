"""Fake snow and liquid bakes for the scrub-memory test and bench (issue 21): per-frame
files written by VoxFX's own writers, attached by the add-on's own ``attach_outputs``.

Frames differ in content and point count; to keep the writing quick, the VDB files
repeat a few distinct grids under each frame's own name (Blender caches by path, so a
copy costs as much memory as a new grid)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np

from voxfx.addon.cache import BakeCache
from voxfx.addon.ply import write_points
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.snow.domain import SnowDomain

DISTINCT_GRIDS = 4


def rss_mb() -> float:
    """This process's resident memory (Linux /proc), in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def count(base: int, frame: int) -> int:
    """Points in *frame*: a little different every frame (so each frame is recognisable)."""
    return base - 7 * (frame % 11)


def _points(rng, n, lo, hi):
    return rng.uniform(lo, hi, (n, 3)).astype(np.float32)


def write_snow_bake(folder, frames: int, flakes: int, ground: int = 128, seed: int = 0):
    """A snow cache of *frames* frames in *folder*: flakes PLY (velocity, size, spin) and a
    depth VDB per frame, as the bake writes them. Returns (cache, terrain, domain)."""
    from voxfx.addon import writeback
    from voxfx.addon.operators.snow import depth_spec

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    domain = SnowDomain.from_box((0, 0, 0), (10, 10, 4), 16, ground)
    gx, gy = domain.ground_shape
    terrain = np.zeros((gy, gx), np.float32)
    grids = []
    for g in range(DISTINCT_GRIDS):
        path = folder / f".depth_{g}.vdb"
        depth = (0.05 + 0.02 * g) * rng.random((1, gy, gx)).astype(np.float32)
        writeback.write_vdb(path, {"depth": depth}, depth_spec(domain))
        grids.append(path)
    cache = BakeCache(folder, "snow", kind="snow")
    cache.begin({"fake": seed}, 1, frames)  # written through the cache: the loader reads only what it vouches for
    for frame in range(1, frames + 1):
        n = count(flakes, frame)
        cache.write_frame(frame, {
            ".ply": lambda p, n=n: write_points(p, _points(rng, n, 0, 10), {
                "velocity": rng.normal(0, 1, (n, 3)).astype(np.float32), "size": np.full(n, 0.003, np.float32),
                "spin": rng.integers(0, 9, n).astype(np.int32)}),
            ".vdb": lambda p, frame=frame: shutil.copyfile(grids[frame % DISTINCT_GRIDS], p)})
    return cache, terrain, domain


def write_liquid_bake(folder, frames: int, particles: int, resolution: int = 32, seed: int = 0):
    """A liquid cache of *frames* frames: particles PLY (velocity, size) and a VDB with the
    ``surface`` level set of a ball and a dense ``velocity`` grid. Returns the cache."""
    from voxfx.addon import writeback

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    h = 1.0 / resolution
    spec = GridSpec((0.0, 0.0, 0.0), h, (resolution,) * 3)
    k, j, i = np.meshgrid(*(np.arange(resolution) + 0.5,) * 3, indexing="ij")
    grids = []
    for g in range(DISTINCT_GRIDS):
        radius = 0.2 + 0.05 * g
        phi = np.sqrt((i * h - 0.5) ** 2 + (j * h - 0.5) ** 2 + (k * h - 0.45) ** 2) - radius
        phi = np.clip(phi, -3 * h, 3 * h).astype(np.float32)
        velocity = rng.normal(0, 1, (resolution,) * 3 + (3,)).astype(np.float32)
        path = folder / f".liquid_{g}.vdb"
        writeback.write_vdb(path, {"surface": phi, "velocity": velocity}, spec,
                            grid_class={"surface": "LEVEL_SET", "velocity": "FOG_VOLUME"},
                            background={"surface": 3 * h, "velocity": 0.0})
        grids.append(path)
    cache = BakeCache(folder, "liquid", kind="flip")
    cache.begin({"fake": seed}, 1, frames)
    for frame in range(1, frames + 1):
        n = count(particles, frame)
        cache.write_frame(frame, {
            ".ply": lambda p, n=n: write_points(p, _points(rng, n, 0.1, 0.9), {
                "velocity": rng.normal(0, 1, (n, 3)).astype(np.float32), "size": np.full(n, 0.25 * h, np.float32)}),
            ".vdb": lambda p, frame=frame: shutil.copyfile(grids[frame % DISTINCT_GRIDS], p)})
    return cache


def frame_bytes(folder, frame: int) -> int:
    """Bytes of one frame's files (all of them: .ply and .vdb) in a cache folder."""
    return sum(p.stat().st_size for p in Path(folder).glob(f"*_{frame:04d}.*"))


def attach_bakes(snow, liquid, frames: int):
    """Attach a fake snow bake (cache, terrain, domain) and liquid bake as the add-on does
    after a bake; returns the objects that show frames."""
    from voxfx.addon.operators import flip, snow as snow_op

    cache, terrain, domain = snow
    flakes, cover = snow_op.attach_outputs(cache, terrain, domain, math.radians(38.0))
    particles, surface, _volume = flip.attach_outputs(liquid, 1, frames)
    return {"flakes": flakes, "cover": cover, "particles": particles, "surface": surface}
