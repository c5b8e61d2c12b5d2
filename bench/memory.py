"""Host memory of Voxelize Selected, measured against the guard's estimate (issue 21 §6).

Each case runs in a fresh headless-Blender (bpy) subprocess: build the scene (a 1 m
cube or Suzanne), register VoxFX, note VmRSS, reset the RSS high-water mark
(``/proc/self/clear_refs`` ← 5), run the operator's job (``voxelize_job``: extraction,
voxelization, attributes, outputs written into the scene and to disk) and read VmHWM.
*measured* = VmHWM − VmRSS before; *virtual* = VmPeak − VmSize before (what RLIMIT_AS
counts; only valid when the run raised VmPeak). *estimate* is what the guard computes
(``addon.operators.voxelize.peak_estimate``) with the exact voxel count; for the Bake
Frames cases (``volume_sequence ×3``: an object moving over three frames, each frame's
density VDB written to the cache) it is ``guard.bake_estimate``, and *measured* the peak
over the whole bake.

    /work/main/.venv/bin/python bench/memory.py [--quick] [--json out.json] [--max-res 256] [--bake-only]
    /work/main/.venv/bin/python bench/memory.py --coverage-slabs
    /work/main/.venv/bin/python bench/memory.py --art

Exits non-zero if any estimate/measured ratio falls outside [0.67, 1.5] (cases whose
measured peak is below 32 MiB are shown but not judged: there the peak is interpreter
and allocator noise, not arrays).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOW, HIGH = 0.67, 1.5
MIN_JUDGED = 32 << 20  # below this the peak is allocator and interpreter noise: shown, not judged

# The start of every bench child (also bench/voxelize_split.py): a fresh headless Blender
# with VoxFX registered, a saved .blend in *tmp*, the case's mesh selected as *obj*, and
# status() reading /proc/self/status. Doubled braces: the text goes through str.format.
CHILD_SETUP = """
    import json, os, sys, tempfile
    sys.path.insert(0, {root!r})
    os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="voxfx-bench-"))
    os.environ["VOXFX_BACKEND"] = os.environ.get("VOXFX_BACKEND", "cpu")
    from tools.package import load
    load()
    import bpy, numpy as np
    import voxfx
    from voxfx.addon.jobs import JobRunner
    from voxfx.addon.operators import voxelize as op
    case = json.loads(sys.argv[1])
    tmp = case.get("folder") or tempfile.mkdtemp(prefix="voxfx-bench-case-")
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.wm.save_as_mainfile(filepath=os.path.join(tmp, "m.blend"))
    voxfx.register()
    if case["shape"] == "cube":
        bpy.ops.mesh.primitive_cube_add(size=1.0)
    else:
        bpy.ops.mesh.primitive_monkey_add()
    obj = bpy.context.active_object
    obj.select_set(True)

    def status():
        out = {{}}
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "VmSize", "VmPeak"):
                    out[k] = int(v.split()[0]) * 1024
        return out
"""

CHILD = textwrap.dedent(CHILD_SETUP + """
    request = op.Request(mode=case["mode"], resolution=case["res"], fill_holes=case.get("fill_holes", False),
                         include_edges=False, outputs=set(case["outputs"]),
                         vox_path=os.path.join(tmp, "out.vox"), cache_dir=tmp + "/",
                         sparse=case.get("sparse", "never"))  # the dense guard's own peaks
    if case.get("bake"):  # Bake Frames: the object moves along x over *bake* frames
        from pathlib import Path
        bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, case["bake"]
        obj.keyframe_insert("location", frame=1)
        obj.location = (0.3, 0.0, 0.1)
        obj.keyframe_insert("location", frame=case["bake"])
        request.outputs, request.combine = {{"volume_sequence"}}, True
        job = lambda: op.bake_frames_job(bpy.context, [obj], request, Path(tmp) / "bake", 1, case["bake"])
    else:
        job = lambda: op.voxelize_job(bpy.context, [obj], request, warnings)

    import gc
    gc.collect()
    before = status()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    if case.get("headroom"):  # a real ulimit -v: this much address space left for the job
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (before["VmSize"] + case["headroom"], resource.RLIM_INFINITY))
    warnings = []
    runner = JobRunner(job())
    state = runner.run()
    after = status()
    res = runner.result or []
    if case.get("bake"):
        warnings, res = list(res.notes) if res else [], []
    print("RESULT", json.dumps({{"state": state, "error": runner.error,
        "measured": after["VmHWM"] - before["VmRSS"],
        "virtual": after["VmPeak"] - before["VmSize"] if after["VmPeak"] > before["VmPeak"] else None,
        "count": sum(r.count for r in res), "grid": list(res[0].spec.shape) if res else None,
        "warnings": warnings, "estimate": getattr(op, "LAST_ESTIMATE", {{}}).get("total"),
        "parts": getattr(op, "LAST_ESTIMATE", {{}})}}))
""")


# Coverage slabs alone (``coverage.coverage_slabs``, the 3-axis vote): RSS high-water mark
# over the first *slabs* slabs of *layers* rows against ``coverage_slab_bytes``.
COVERAGE_CHILD = textwrap.dedent(CHILD_SETUP + """
    from voxfx.addon import scene_io
    from voxfx.kernels.voxelize import coverage as C
    from voxfx.kernels.voxelize.request import Request, grid_for

    soup = scene_io.extract_triangles([obj], bpy.context.evaluated_depsgraph_get())
    spec = grid_for(*soup.bounds, Request(mode="solid", resolution=case["res"]))
    estimate = C.coverage_slab_bytes(spec, case["layers"], len(soup.vertices), len(soup.triangles), case["vote"],
                                     xp=np)
    import gc
    gc.collect()
    before = status()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    slabs = 0
    for k0, k1, part in C.coverage_slabs(soup.vertices, soup.triangles, spec, layers=case["layers"],
                                         vote=case["vote"], xp=np):
        del part
        slabs += 1
        if slabs == case.get("slabs", 10 ** 9):
            break
    after = status()
    print("RESULT", json.dumps({{"estimate": estimate, "measured": after["VmHWM"] - before["VmRSS"],
                                "slabs": slabs, "grid": list(spec.shape)}}))
""")


def run_coverage_case(case: dict, timeout: float = 900) -> dict:
    """*case*: shape, res, layers, vote, optionally slabs (the first ones only)."""
    r = subprocess.run([sys.executable, "-c", COVERAGE_CHILD.format(root=str(ROOT)), json.dumps(case)],
                       capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return {**case, **json.loads(line[7:])}
    raise RuntimeError(f"case {case} failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")


def coverage_rows() -> int:
    """Suzanne 256 with the vote (she is open), slabs of 1 to 60 rows."""
    print("coverage slabs (vote) | res | rows | slabs | estimate MiB | measured MiB | est/meas")
    print("--- | --- | --- | --- | --- | --- | ---")
    bad = 0
    for layers in (1, 4, 14, 30, 60):
        r = run_coverage_case({"shape": "suzanne", "res": 256, "layers": layers, "vote": True})
        ratio = r["estimate"] / r["measured"]
        bad += not LOW <= ratio <= HIGH
        print(f"suzanne | 256 | {layers} | {r['slabs']} | {r['estimate'] / 2**20:.0f} | {r['measured'] / 2**20:.0f} | "
              f"{ratio:.2f}", flush=True)
    return bad


def art_rows() -> dict:
    """Per-item host bytes of the voxel art on split results (``art_cost``'s ART_*,
    GREEDY_*, FACE_COLOR_*, HISTOGRAM_* and TEXTURE_PER_CANDIDATE), traced with
    tracemalloc in this process: a solid sphere at 200³ in 20-row slabs with random
    colours (no face merges: the most runs), 2M distinct colours in 8 parts, a slab of
    5k and of 40k rows added to 400k kept colours (the add's per row and per kept colour), and texture
    colours of 2^16–2^19 voxels on a 79k-triangle mesh of shared vertices (valence 6)."""
    import tracemalloc

    import numpy as np

    sys.path.insert(0, str(ROOT))
    from tools.package import load

    load()
    from voxfx.kernels.grid import GridSpec, bitgrid
    from voxfx.kernels.voxelize.art_outputs import labels, slab_exposed_faces
    from voxfx.kernels.voxelize.greedy import GreedyBuilder
    from voxfx.kernels.voxelize.palette import ColorHistogram
    from voxfx.kernels.voxelize.texture import CANDIDATES_PER_BLOCK, TexturedMesh

    def traced(fn):
        tracemalloc.start()
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        value = fn()
        now, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return value, now - start, peak - start

    rng = np.random.default_rng(0)
    r = 200
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / r, (r, r, r))
    z, y, x = np.mgrid[0:r, 0:r, 0:r]
    inside = ((x - r / 2 + 0.5) ** 2 + (y - r / 2 + 0.5) ** 2 + (z - r / 2 + 0.5) ** 2) < (0.45 * r) ** 2
    bits = bitgrid.pack(inside)
    slabs = []
    for k0 in range(0, r, 20):
        n = int(inside[k0:k0 + 20].sum())
        rgba = rng.random((n, 4)).astype(np.float32)
        slabs.append((rgba, labels(np.zeros(n, np.int64), rgba), list(slab_exposed_faces(bits, spec, k0, k0 + 20))))
    del x, y, z, inside
    F = sum(len(rank) for _, _, faces in slabs for _, _, rank in faces)

    def greedy():
        builder, base = GreedyBuilder(spec), 0
        for rgba, label, faces in slabs:
            for d, ijk, rank in faces:
                builder.add(d, ijk, label[rank], rank + base, rgba[rank])
            base += len(rgba)
        return builder

    builder, kept, _ = traced(greedy)
    _, _, finish = traced(builder.finish)

    def face_colors():
        parts, directions = [], []
        for rgba, _, faces in slabs:
            for d, _, rank in faces:
                parts.append(rgba[rank])
                directions.append(np.full(len(rank), d, np.int8))
        return np.concatenate(parts)[np.argsort(np.concatenate(directions), kind="stable")]

    _, face_kept, face_peak = traced(face_colors)
    colors = rng.random((1 << 21, 4)).astype(np.float32)

    def histogram():
        h = ColorHistogram()
        for part in np.array_split(colors, 8):
            h.add(part)
        return h

    h, hist_kept, hist_peak = traced(histogram)
    colours = len(h.keys)
    del h

    def merge(kept, rows):  # one slab's *rows* random colours added to *kept* distinct colours
        h = ColorHistogram()
        h.add(rng.random((kept, 4)).astype(np.float32))
        part = rng.random((rows, 4)).astype(np.float32)
        return traced(lambda: h.add(part))[2]

    small, large = merge(400_000, 5_000), merge(400_000, 40_000)
    merge_per_row = (large - small) / 35_000
    merge_per_kept = (small - merge_per_row * 5_000) / 400_000
    m = 200
    yy, xx = np.mgrid[0:m, 0:m]
    verts = np.stack([xx.ravel() / m, yy.ravel() / m, 0.1 * np.sin(xx.ravel() / 7.0)], 1).astype(np.float32)
    idx = (yy * m + xx)[:-1, :-1].ravel()
    tris = np.concatenate([np.stack([idx, idx + 1, idx + m + 1], 1), np.stack([idx, idx + m + 1, idx + m], 1)])
    t = len(tris)
    candidates = 1 + np.bincount(tris.ravel())[tris].sum(1).mean()
    textured = TexturedMesh(verts, tris, rng.random((t, 3, 2)).astype(np.float32), np.zeros(t, np.int32),
                            [rng.random((64, 64, 4)).astype(np.float32)])
    tspec = GridSpec((0.0, 0.0, 0.0), 1.0 / 256, (256, 256, 64))
    texture = {}
    for n in (1 << 16, 1 << 18, 1 << 19):
        args = (tspec, rng.integers(0, 64, (n, 3)).astype(np.int64), rng.integers(0, t, n),
                rng.random((n, 4)).astype(np.float32))
        texture[n] = traced(lambda args=args: textured.recolor(*args, xp=np))[2]
    per_voxel = (texture[1 << 19] - texture[1 << 18]) / (1 << 18)  # the second block reuses the first's room
    # a block holds CANDIDATES_PER_BLOCK candidates (2^18 voxels fill several)
    per_candidate = (texture[1 << 18] - per_voxel * (1 << 18)) / min(candidates * (1 << 18), CANDIDATES_PER_BLOCK)
    # the image filter: one block of 2^16 voxels with 1 and 6 images at random: b + c = x1,
    # b + c·kept6 = x6 (b per candidate, c per kept candidate; recolor's own 96 B a voxel aside)
    from voxfx.kernels.voxelize import texture as texture_module

    per_image = {}
    n = 1 << 16
    for images in (1, 6):
        image = rng.integers(0, images, t).astype(np.int32)
        mesh = TexturedMesh(verts, tris, rng.random((t, 3, 2)).astype(np.float32), image,
                            [rng.random((64, 64, 4)).astype(np.float32) for _ in range(images)])
        owner = rng.integers(0, t, n)
        K = int(texture_module.candidates_per_triangle(mesh.mesh[1], mesh.mesh[2])[owner].sum())
        S = int(texture_module.survivors_per_triangle(tris, image)[owner].sum())
        args = (tspec, rng.integers(0, 64, (n, 3)).astype(np.int64), owner, rng.random((n, 4)).astype(np.float32))
        kept_block, texture_module.CANDIDATES_PER_BLOCK = texture_module.CANDIDATES_PER_BLOCK, 1 << 30
        try:
            peak = traced(lambda args=args, mesh=mesh: mesh.recolor(*args, xp=np))[2]
        finally:
            texture_module.CANDIDATES_PER_BLOCK = kept_block
        per_image[images] = ((peak - 96 * n) / K, S / K)
    (x1, _), (x6, f6) = per_image[1], per_image[6]
    per_kept = (x1 - x6) / (1 - f6)
    rows = {"faces": F, "greedy kept B/face": kept / F, "greedy finish B/face beyond kept": finish / F,
            "face colours kept B/face": face_kept / F, "face colours peak B/face": face_peak / F,
            "histogram colours": colours, "histogram kept B/colour": hist_kept / colours,
            "histogram peak B/colour": hist_peak / colours, "histogram add B/row": merge_per_row,
            "histogram merge B/kept colour": merge_per_kept,
            "texture candidates/voxel": candidates, "texture B/voxel": per_voxel,
            "texture B/candidate": per_candidate, "texture B/candidate, 6 images": x6,
            "texture share kept, 6 images": f6, "texture B/candidate before the filter": x1 - per_kept,
            "texture B/kept candidate": per_kept}
    print("voxel art item | measured")
    print("--- | ---")
    for k, v in rows.items():
        print(f"{k} | {v:,.1f}")
    return rows


def run_case(case: dict, timeout: float = 900) -> dict:
    """One case in a fresh subprocess; ``case["headroom"]`` (bytes) runs it under an
    RLIMIT_AS of the process's VmSize plus that much, set just before the job."""
    code = CHILD.format(root=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code, json.dumps(case)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return {**case, **json.loads(line[7:])}
    raise RuntimeError(f"case {case} failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")


MODES = [("surface", False), ("solid", False), ("solid+surface", False), ("solid+surface", True)]
OUTPUTS = [["points"], ["volume"], ["blocks"], ["vox"]]


def cases(quick: bool, max_res: int):
    res_list = [r for r in ((64, 160) if quick else (64, 128, 192, 256)) if r <= max_res]
    for shape in ("cube", "suzanne"):
        for outputs in OUTPUTS:
            for mode, holes in MODES:
                for res in res_list:
                    yield {"shape": shape, "outputs": outputs, "mode": mode, "fill_holes": holes, "res": res}
    # every output at once
    yield {"shape": "cube", "outputs": ["points", "volume", "blocks", "vox"], "mode": "solid+surface",
           "fill_holes": False, "res": res_list[-1]}
    if quick and max_res >= 256:  # two large cases (1–2 GB)
        yield {"shape": "cube", "outputs": ["points"], "mode": "solid+surface", "fill_holes": False, "res": 256}
        yield {"shape": "suzanne", "outputs": ["volume"], "mode": "solid", "fill_holes": False, "res": 256}
    yield from bake_cases(quick, max_res)


def bake_cases(quick: bool, max_res: int):
    """Bake Frames (a volume sequence of an object moving over 3 frames), each frame whole;
    with --quick and --max-res 384 also two large ones, where write_vdb's copies and the
    tree, not the coverage's slab, set the peak."""
    for shape in ("cube", "suzanne"):
        for mode, holes in MODES:
            for res in [r for r in ((64, 160) if quick else (64, 128, 192, 256)) if r <= max_res]:
                yield {"shape": shape, "outputs": ["volume_sequence"], "mode": mode, "fill_holes": holes,
                       "res": res, "bake": 3}
    if quick and max_res >= 384:
        for mode, res in (("solid", 256), ("solid+surface", 384), ("surface", 384)):
            yield {"shape": "cube", "outputs": ["volume_sequence"], "mode": mode, "fill_holes": False, "res": res,
                   "bake": 2}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--max-res", type=int, default=256)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--bake-only", action="store_true", help="only the Bake Frames cases")
    ap.add_argument("--coverage-slabs", action="store_true", help="only the coverage slab rows (vote)")
    ap.add_argument("--art", action="store_true", help="only the voxel art's per-item bytes (art_cost constants)")
    args = ap.parse_args(argv)
    if args.coverage_slabs:
        return 1 if coverage_rows() else 0
    if args.art:
        art_rows()
        return 0
    rows, bad = [], 0
    print("shape | outputs | mode | res | voxels set | estimate MiB | measured MiB | virtual MiB | est/meas")
    print("--- | --- | --- | --- | --- | --- | --- | --- | ---")
    for case in bake_cases(args.quick, args.max_res) if args.bake_only else cases(args.quick, args.max_res):
        r = run_case(case)
        rows.append(r)
        ratio = (r["estimate"] / r["measured"]) if r.get("estimate") and r["measured"] > 0 else float("nan")
        ok = LOW <= ratio <= HIGH or r["measured"] < MIN_JUDGED
        bad += not ok
        mode = r["mode"] + (" +holes" if r["fill_holes"] else "")
        virt = f"{r['virtual'] / 2**20:.0f}" if r.get("virtual") else "-"
        est = f"{r['estimate'] / 2**20:.0f}" if r.get("estimate") else "-"
        outputs = "+".join(r["outputs"]) + (f" ×{r['bake']}" if r.get("bake") else "")
        print(f"{r['shape']} | {outputs} | {mode} | {r['res']} | {r['count']:,} | {est} | "
              f"{r['measured'] / 2**20:.0f} | {virt} | {ratio:.2f}{'' if ok else ' !'}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(f"{len(rows) - bad}/{len(rows)} within [{LOW}, {HIGH}] (or below {MIN_JUDGED >> 20} MiB measured)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
