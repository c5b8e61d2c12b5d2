"""The REAL liquid bake frame loop without Blender (issue 24): ``sim_bake.run`` over a
``FlipBake`` of the dam break (``bench/flip.py``; sparse solver, particles on the device,
compact cache format), a ``BakeCache`` in a temporary folder and the operator's own
particle writers (``addon/liquid_files.writers_of``), Write While Simulating on (the
writer thread). The VDB writer needs ``bpy``: with ``--vdb`` (and ``bpy`` importable) it is
the operator's ``writeback.write_vdb``; without, the frame's grids are still computed
(``frame_arrays``: the closed level set and the cell velocity copied to the host) but
not written.

Per frame it prints, in ms: the step (``FlipBake.step``, device synchronised), the
outputs (level set, cell velocity: host arrays), the encode on the bake's thread
(``writers_of``: the device work and the raw block's copy, plus the compression with
``VOXFX_DEFER_COMPRESSION=0``), the checkpoint (``sim.checkpoint()``, host copies), its
durable write on the bake's thread (``BakeCache.write_state``: ``VOXFX_CHECKPOINT``
``before_step`` or ``legacy``), the wait for the writer thread's frame before
(``FrameWriter.write`` less ``write_state``), the writer thread's own time for the
frame's files (compression when deferred, write, fsync), the checkpoint's file on
whichever thread writes it (``cache_state``: staged and committed, or the legacy write)
with its CRC-32 and fsync, and the frame's wall time (one step's start to the next:
what the user waits per frame).

``--ways`` runs the same bake once per way (environment variables, e.g. the old way
``"VOXFX_CHECKPOINT=legacy"`` and the new ``""``) in one process, one after the other, so
old and new are timed on one machine in one call.

    python bench/bake_frames.py --row 8m --frames 6 --ways "VOXFX_CHECKPOINT=legacy" "" "VOXFX_CHECKPOINT=overlap"
    python bench/bake_frames.py --res 32 --particles 40000 --frames 3 --cpu   # the loop on NumPy (a smoke run)

Measured (H100 80GB HBM3, one call, ``--row 8m --frames 5``, 8,000,033 particles at 256³,
Fast timing, Zstandard level 1 from a carried wheel, 5.82 bytes a particle, no VDB;
medians of frames 3–5, ms):

| way | step | level set | cell vel | encode | checkpoint | ckpt write | wait | writer | frame |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| old (legacy, compressed on the bake's thread) | 34.7 | 4.4 | 317.7 | 245.5 | 158.9 | 545.6 | 0.7 | 38.2 | 1302 |
| new (the defaults) | 33.8 | 4.1 | 42.5 | 90.4 | 161.3 | 470.5 | 0.7 | 233.5 | 836 |

The checkpoint without waiting (issue 24; H100 80GB HBM3, driver 580.159.04, one call,
``--row 8m --frames 6``, the three ways above; a 247 MB checkpoint: positions and
velocities 192 MB, the grid velocity's bricks 23 MB, the carried pressure 15 MB, the kept
faces 17 MB; ext4; medians of frames 3–6, ms; "state file" is the checkpoint's file on
whichever thread writes it, of which "crc" and "fsync"):

| way | step | encode | checkpoint | ckpt write | wait | writer | state file | crc | fsync | frame |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| legacy (as before) | 31.3 | 95.9 | 123.6 | 349.5 | 0.6 | 162.1 | 348.2 | - | - | 655 |
| before_step (the default) | 31.0 | 97.9 | 10.4 | 223.9 | 72.6 | 192.3 | 222.7 | 35.7 | 119.4 | 485 |
| overlap (opt-in) | 37.7 | 98.6 | 10.3 | - | 162.3 | 265.5 | 262.4 | 36.6 | 150.5 | 379 |

The gather (``kernels.checkpoint.gather``: one device → page-locked copy per array into
a block reused in turn) took the checkpoint 124 → 10 ms; the one-pass file (CRC-32 on 8
threads, 96 MB in 15 ms against 47 ms on one; no read-back) its write 348 → 223 ms, of
which the fsync, 119 ms (~2 GB/s of disk), is now half; on the writer thread beside the
frame's files (``overlap``, opt-in: a kill may then cost one frame more than issue 21
§1 allows) the bake no longer waits for it but for the writer thread, which does both at
once (files 266 ms, checkpoint 262 ms, each slower than alone: 16 cores and one disk
shared), so the frame is 379 ms, the bake's own part ~190 ms (step, outputs, encode,
gather) and the rest the wait. The default stays ``before_step`` (485 ms). The level set and cell velocity columns are
unchanged (4.0–4.4, 38–40 ms).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
import numpy as np  # noqa: E402

from voxfx.addon import cache_state, cache_writer, compact_points, liquid_files, sim_bake  # noqa: E402
from voxfx.addon.cache import BakeCache  # noqa: E402
from voxfx.addon.jobs import run_inline  # noqa: E402
from voxfx.kernels.flip.bake import FlipBake  # noqa: E402
from voxfx.kernels.flip.grid import TIMINGS, FlipSettings  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402

ROWS = {"1m": (128, 1_000_000), "4m": (192, 4_000_000), "8m": (256, 8_000_000)}
COLUMNS = ["step", "level set", "cell vel", "encode", "checkpoint", "ckpt write", "wait", "writer", "state file",
           "state crc", "state fsync", "frame"]


def _sync(xp):
    if xp is not np:
        xp.cuda.Device().synchronize()


class Timed:
    """Per-frame stage times (ms) of one bake: what the wrappers below record."""

    def __init__(self):
        self.frames: dict[int, dict] = {}
        self.current = None
        self.starts: dict[int, float] = {}

    def add(self, frame, key, ms):
        row = self.frames.setdefault(frame, {})
        row[key] = row.get(key, 0.0) + ms


def timed_bake(bake, timed, xp):
    """*bake* with its step, outputs and its simulation's level set, cell velocity and
    checkpoint timed (the same calls, the device synchronised after each)."""

    class Bake:
        first_frame_is_initial = bake.first_frame_is_initial

        def new_simulation(self, progress=None):
            sim = bake.new_simulation(progress)
            for name, key in (("level_set", "level set"), ("cell_velocity", "cell vel"),
                              ("checkpoint", "checkpoint")):
                setattr(sim, name, _timed_method(getattr(sim, name), timed, key, xp))
            return sim

        def step(self, sim, frame, progress=None, **inputs):
            timed.current = frame
            timed.starts[frame] = time.perf_counter()
            a = time.perf_counter()
            line = bake.step(sim, frame, progress=progress, **inputs)
            _sync(xp)
            timed.add(frame, "step", (time.perf_counter() - a) * 1e3)
            return line

        def outputs(self, sim, progress=None):
            if timed.current is None:  # the initial frame (the plan's first)
                timed.current = 1
                timed.starts[1] = time.perf_counter()
            return bake.outputs(sim, progress)

    return Bake()


def _timed_method(method, timed, key, xp):
    def call(*args, **kwargs):
        a = time.perf_counter()
        out = method(*args, **kwargs)
        _sync(xp)
        timed.add(timed.current, key, (time.perf_counter() - a) * 1e3)
        return out
    return call


def writers(spec, timed, xp, write_vdb=None):
    """The operator's writers (``liquid_files.writers_of``, compact), the encode on the
    bake's thread timed, each file's writer timed on the thread that runs it."""

    def of(arrays):
        frame = timed.current
        a = time.perf_counter()
        files = liquid_files.writers_of(arrays, spec, compact=True, write_vdb=write_vdb)
        _sync(xp)
        timed.add(frame, "encode", (time.perf_counter() - a) * 1e3)
        return {suffix: _timed_writer(w, timed, frame) for suffix, w in files.items()}

    return of


def _timed_writer(write, timed, frame):
    def run(path):
        a = time.perf_counter()
        write(path)
        timed.add(frame, "writer", (time.perf_counter() - a) * 1e3)
    return run


def bake_once(n, particles, frames, timing, xp, way, folder, write_vdb=None):
    """One bake of *frames* frames after the initial one under the environment *way*
    (NAME=value …); returns its Timed."""
    saved = {k: os.environ.get(k) for k in (kv.split("=", 1)[0] for kv in way.split())}
    for kv in way.split():
        key, value = kv.split("=", 1)
        os.environ[key] = value
    timed = Timed()
    real_write, real_state = cache_writer.FrameWriter.write, BakeCache.write_state
    real_files = (cache_state.stage, cache_state.commit, cache_state.legacy_write, cache_state.write_npz, os.fsync,
                  cache_state.parallel_crc32)
    in_npz = threading.local()

    def write(self, frame, files, state=None):  # the hand-over: the wait for the frame before + write_state
        a = time.perf_counter()
        if state is not None:  # the last frame's
            timed.state_bytes = {k: np.asarray(v).nbytes for k, v in state.items()}
        real_write(self, frame, files, state)
        timed.add(frame if frame in timed.frames else timed.current, "hand-over", (time.perf_counter() - a) * 1e3)

    def write_state(self, frame, state):
        a = time.perf_counter()
        real_state(self, frame, state)
        timed.add(timed.current, "ckpt write", (time.perf_counter() - a) * 1e3)

    def state_file(fn, frame_at):  # the checkpoint's file on whichever thread writes it
        def run(*args):
            a = time.perf_counter()
            out = fn(*args)
            timed.add(args[frame_at], "state file", (time.perf_counter() - a) * 1e3)
            return out
        return run

    def write_npz(temporary, frame, state):
        in_npz.frame = frame
        try:
            return real_files[3](temporary, frame, state)
        finally:
            in_npz.frame = None

    def fsync(fd):
        a = time.perf_counter()
        real_files[4](fd)
        if getattr(in_npz, "frame", None) is not None:
            timed.add(in_npz.frame, "state fsync", (time.perf_counter() - a) * 1e3)

    def parallel_crc32(data):
        a = time.perf_counter()
        out = real_files[5](data)
        timed.add(in_npz.frame, "state crc", (time.perf_counter() - a) * 1e3)
        return out

    try:
        cache_writer.FrameWriter.write, BakeCache.write_state = write, write_state
        cache_state.parallel_crc32 = parallel_crc32
        cache_state.stage, cache_state.commit = state_file(real_files[0], 1), state_file(real_files[1], 2)
        cache_state.legacy_write, cache_state.write_npz, os.fsync = state_file(real_files[2], 1), write_npz, fsync
        spec, v, t = dam_break(n, particles)
        settings = FlipSettings(sparse=True, **dict(TIMINGS[timing]))
        bake = FlipBake(spec, settings, (v, t), xp=xp, fps=24.0, particles_on_device=xp is not np)
        cache = BakeCache(folder, "liquid", kind="flip")
        plan = cache.begin({"bench": way}, 1, frames + 1, resume=False)
        start = time.perf_counter()
        written, sim = run_inline(sim_bake.run(cache, plan, timed_bake(bake, timed, xp), writers(spec, timed, xp,
                                                                                                    write_vdb)))
        timed.total = time.perf_counter() - start
        timed.particles, timed.shape = len(sim.pos), spec.shape
        timed.bytes = [cache.frame_path(f, compact_points.SUFFIX).stat().st_size for f in written]
    finally:
        cache_writer.FrameWriter.write, BakeCache.write_state = real_write, real_state
        (cache_state.stage, cache_state.commit, cache_state.legacy_write, cache_state.write_npz, os.fsync,
         cache_state.parallel_crc32) = real_files
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    order = sorted(timed.starts)
    for a, b in zip(order, order[1:]):
        timed.add(a, "frame", (timed.starts[b] - timed.starts[a]) * 1e3)
    for row in timed.frames.values():
        row["wait"] = row.get("hand-over", 0.0) - row.get("ckpt write", 0.0)
    return timed


def report(timed, way):
    print(f"way '{way or 'defaults'}': {timed.particles:,} particles on {'×'.join(map(str, timed.shape))}, codec "
          f"{'zstd' if compact_points.best_codec() == compact_points.CODEC_ZSTD else 'zlib'}, "
          f"{statistics.mean(timed.bytes) / timed.particles:.2f} bytes a particle, whole bake {timed.total:.1f} s")
    state = getattr(timed, "state_bytes", {})
    print(f"checkpoint {sum(state.values()) / 1e6:.1f} MB: " + ", ".join(
        f"{k} {b / 1e6:.1f}" for k, b in sorted(state.items(), key=lambda kv: -kv[1]) if b >= 1e5))
    print("frame | " + " | ".join(COLUMNS))
    print("--- | " + " | ".join("---" for _ in COLUMNS))
    for f in sorted(timed.frames):
        row = timed.frames[f]
        print(f"{f} | " + " | ".join(f"{row[c]:.1f}" if c in row else "-" for c in COLUMNS))
    steady = [timed.frames[f] for f in sorted(timed.frames)[2:] if "frame" in timed.frames[f]]
    if steady:
        print("median from the 2nd stepped frame: " + ", ".join(
            f"{c} {statistics.median(r.get(c, 0.0) for r in steady):.1f}" for c in COLUMNS))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--row", choices=sorted(ROWS), help="dam break: 1m (128³), 4m (192³), 8m (256³)")
    ap.add_argument("--res", type=int)
    ap.add_argument("--particles", type=float)
    ap.add_argument("--frames", type=int, default=6, help="frames stepped after the initial one")
    ap.add_argument("--timing", default="fast", choices=sorted(TIMINGS))
    ap.add_argument("--ways", nargs="+", default=[""], help="environment settings per bake ('' the defaults)")
    ap.add_argument("--cpu", action="store_true", help="NumPy (a smoke run of the loop)")
    ap.add_argument("--vdb", action="store_true", help="also write the VDB (needs bpy)")
    ap.add_argument("--folder", help="where the temporary caches go (default: the system's)")
    args = ap.parse_args()
    n, particles = ROWS[args.row or "8m"]
    n, particles = args.res or n, int(args.particles or particles)
    if args.cpu:
        xp = np
        print("device: CPU (NumPy)")
    else:
        import cupy as xp

        print(f"device: {xp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    write_vdb = None
    if args.vdb:
        from voxfx.addon import writeback

        write_vdb = writeback.write_vdb
    for way in args.ways:
        folder = tempfile.mkdtemp(prefix="voxfx-bake-", dir=args.folder)
        try:
            report(bake_once(n, particles, args.frames, args.timing, xp, way, folder, write_vdb), way)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
