"""Voxelize split into z-slabs under a real memory limit (issue 21 §6): the Volume
voxelized slab by slab, or the Block mesh / MagicaVoxel attributes computed slab by slab.

Each case runs in a fresh headless-Blender (bpy) subprocess: a 1 m cube (or Suzanne,
optionally with *materials* alternating over its faces, or voxel art: *texture* colours
from an image (``"random"``: two images and a plain material, face by face at random),
*greedy* Merge Block Faces; *old_plan* plans the split without the art's
bytes, as before they were counted), the operator's job
(``voxelize_job``) with the given *outputs* (default Volume), under ``RLIMIT_AS`` =
*limit* (absolute, bytes) or VmSize + *headroom*, set just before the job. Optionally the
same job first runs without a limit (*unsplit*), for the test that compares the two VDB
files. Prints the state, the report lines (the split's), the peak RSS (VmHWM) and the
output files (the block mesh's arrays as .npz).

    /work/envs/v50/bin/python bench/voxelize_split.py --res 1024 --limit-gib 16 [--mode surface]
    /work/envs/v50/bin/python bench/voxelize_split.py --res 1024 --limit-gib 16 --mode solid+surface --outputs blocks
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from memory import CHILD_SETUP  # noqa: E402 - the shared start of a bench child

CHILD = textwrap.dedent(CHILD_SETUP + """
    import resource, shutil, time

    for n in range(case.get("materials", 0)):  # faces of several materials: owners decide colours
        mat = bpy.data.materials.new(f"M{{n}}")
        mat.diffuse_color = (0.2 + 0.3 * n, 0.7 - 0.2 * n, 0.4, 1.0)
        obj.data.materials.append(mat)
    for poly in obj.data.polygons if case.get("materials") else ():
        poly.material_index = poly.index % case["materials"]

    def textured_material(name, seed):
        image = bpy.data.images.new(name, 128, 128, alpha=True)
        image.pixels.foreach_set(np.random.default_rng(seed).random(128 * 128 * 4).astype(np.float32))
        mat = bpy.data.materials.new(name)
        if mat.node_tree is None:
            mat.use_nodes = True
        tex = mat.node_tree.nodes.new("ShaderNodeTexImage")
        tex.image = image
        bsdf = next(n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
        mat.node_tree.links.new(tex.outputs["Color"], bsdf.inputs["Base Color"])
        return mat

    if case.get("texture"):  # voxel art: texture colours from an image on the object's UVs
        obj.data.materials.clear()
        obj.data.materials.append(textured_material("noise", 5))
        if case["texture"] == "random":  # two images and a plain material, face by face at random
            obj.data.materials.append(textured_material("noise2", 6))
            plain = bpy.data.materials.new("Plain")
            plain.diffuse_color = (0.8, 0.3, 0.2, 1.0)
            obj.data.materials.append(plain)
            pick = np.random.default_rng(7).integers(0, 3, len(obj.data.polygons)).astype(np.int32)
            obj.data.polygons.foreach_set("material_index", pick)
        bpy.context.scene.voxfx.voxelize.color_source = "TEXTURE"
    bpy.context.scene.voxfx.voxelize.greedy_blocks = bool(case.get("greedy"))
    if case.get("old_plan"):  # the split plan as it was before it counted the voxel art's bytes
        op._with_art = lambda request, art, soup: request

    if case.get("bake"):  # an animated object for Bake Frames: it moves along x
        bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, case["bake"]
        obj.keyframe_insert("location", frame=1)
        obj.location = (0.7, 0.0, 0.2)
        obj.keyframe_insert("location", frame=case["bake"])

    def bake(tag):
        from pathlib import Path
        request = op.Request(mode=case["mode"], resolution=case["res"], fill_holes=case.get("fill_holes", False),
                             include_edges=False, outputs={{"volume_sequence"}}, cache_dir=tmp + "/")
        t0 = time.perf_counter()
        runner = JobRunner(op.bake_frames_job(bpy.context, [obj], request, Path(tmp) / tag, 1, case["bake"]))
        state = runner.run()
        result = runner.result
        return {{"state": state, "error": runner.error, "warnings": list(result.notes) if result else [],
                 "files": sorted(str(p) for p in (Path(tmp) / tag).glob("*.vdb")), "count": 0,
                 "seconds": time.perf_counter() - t0, "estimate": dict(op.LAST_ESTIMATE)}}

    def run(tag):
        if case.get("bake"):
            return bake(tag)
        request = op.Request(mode=case["mode"], resolution=case["res"], fill_holes=case.get("fill_holes", False),
                             include_edges=False, outputs=set(case.get("outputs", ["volume"])),
                             vox_path=os.path.join(tmp, tag + ".vox"), cache_dir=tmp + "/")
        warnings = []
        t0 = time.perf_counter()
        runner = JobRunner(op.voxelize_job(bpy.context, [obj], request, warnings))
        state = runner.run()
        seconds = time.perf_counter() - t0
        files = [f for r in (runner.result or []) for f in r.files]
        kept = []
        for f in files:  # a later run deletes earlier files of the same result: keep a copy
            kept.append(os.path.join(tmp, tag + "_" + os.path.basename(f)))
            shutil.copyfile(f, kept[-1])
        for name in [o for r in (runner.result or []) for o in r.objects]:
            mesh = bpy.data.objects[name].data
            if isinstance(mesh, bpy.types.Mesh):  # the block mesh's arrays, to compare
                co = np.empty(3 * len(mesh.vertices), np.float32)
                mesh.vertices.foreach_get("co", co)
                loops = np.empty(len(mesh.loops), np.int32)
                mesh.loops.foreach_get("vertex_index", loops)
                mats = np.empty(len(mesh.polygons), np.int32)
                mesh.polygons.foreach_get("material_index", mats)
                kept.append(os.path.join(tmp, tag + "_blocks.npz"))
                np.savez(kept[-1], co=co, loops=loops, materials=mats)
        return {{"state": state, "error": runner.error, "warnings": warnings, "files": kept,
                 "count": sum(r.count for r in (runner.result or [])), "seconds": seconds,
                 "estimate": dict(op.LAST_ESTIMATE)}}

    out = {{}}
    if case.get("unsplit"):
        out["unsplit"] = run("unsplit")
    import gc
    gc.collect()
    before = status()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    limit = case.get("limit") or before["VmSize"] + case["headroom"]
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
    out["limited"] = run("limited")
    after = status()
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    out["limited"].update({{"limit": limit, "rss_before": before["VmRSS"], "peak_rss": after["VmHWM"],
                            "measured": after["VmHWM"] - before["VmRSS"]}})
    print("RESULT", json.dumps(out))
""")


def run_case(case: dict, timeout: float = 1800) -> dict:
    code = CHILD.format(root=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code, json.dumps(case)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"case {case} failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--res", type=int, default=1024)
    ap.add_argument("--limit-gib", type=float, default=16.0)
    ap.add_argument("--mode", default="surface")
    ap.add_argument("--shape", default="cube")
    ap.add_argument("--outputs", default="volume", help="comma-separated: volume, blocks, vox")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = run_case({"shape": args.shape, "mode": args.mode, "res": args.res, "limit": int(args.limit_gib * 2 ** 30),
                    "outputs": args.outputs.split(",")})
    r = out["limited"]
    print(json.dumps(r, indent=1))
    print(f"{args.shape} {args.mode} res {args.res} under RLIMIT_AS {args.limit_gib} GiB: {r['state']}, "
          f"{r['count']:,} voxels, peak RSS {r['peak_rss'] / 2**30:.2f} GiB (job +{r['measured'] / 2**30:.2f} GiB), "
          f"estimate {r['estimate'].get('total', 0) / 2**30:.2f} GiB, job {r['seconds']:.0f} s "
          f"(wall {time.perf_counter() - t0:.0f} s)")
    return 0 if r["state"] == "FINISHED" else 1


if __name__ == "__main__":
    sys.exit(main())
