"""The README's first command ends in this demo: build, bake and render all three effects."""

import subprocess
import sys

from .helpers import ROOT


def test_demo_bakes_and_renders_every_effect(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tools.demo", "--out", str(tmp_path), "--size", "tiny"],
                       cwd=ROOT, capture_output=True, text=True, timeout=110,
                       env={"PATH": "", "VOXFX_BACKEND": "cpu"})
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("voxelize", "snow", "flip"):
        assert (tmp_path / f"{name}.blend").stat().st_size > 10_000, name
        assert (tmp_path / f"{name}.png").stat().st_size > 1_000, name
        assert f"demo: {name} baked" in r.stdout
    assert (tmp_path / "voxelize.vox").stat().st_size > 100
    assert not list(tmp_path.glob("*.blend1"))
    cache = tmp_path / "voxfx_cache"
    vdbs = list((cache / "voxelize" / "voxelize").glob("*.vdb"))  # <.blend name>/<bake>
    assert len(vdbs) == 1 and vdbs[0].stat().st_size > 100
    for kind, frames in (("snow", 4), ("liquid", 4)):
        for ext in (".vxp", ".vdb"):  # the default cache format: compact particles
            files = sorted((cache / {"snow": "snow", "liquid": "flip"}[kind] / kind).glob(f"{kind}_*{ext}"))
            assert len(files) == frames and all(p.stat().st_size > 0 for p in files), (kind, ext)
    assert "Suzanne+2_voxels" in r.stdout and "_volume" in r.stdout and "_blocks" in r.stdout


def test_demo_water_is_the_addons_clear_water(tmp_path):
    """The quick start renders the liquid with the add-on's own material: transmission 1,
    IOR 1.33, a near-white base colour (issue 23: the demo used to repaint it navy)."""
    r = subprocess.run([sys.executable, "-m", "tools.demo", "--out", str(tmp_path), "--size", "tiny", "--only", "flip"],
                       cwd=ROOT, capture_output=True, text=True, timeout=110,
                       env={"PATH": "", "VOXFX_BACKEND": "cpu"})
    assert r.returncode == 0, r.stdout + r.stderr
    probe = (
        "import bpy, json; o = bpy.data.objects['Liquid Surface']; "
        "m = [s.material for s in o.material_slots if s.material]; "
        "b = next(n for n in m[0].node_tree.nodes if n.type == 'BSDF_PRINCIPLED'); "
        "w = 'Transmission Weight' if 'Transmission Weight' in b.inputs else 'Transmission'; "
        "print('PROBE', json.dumps([m[0].name, list(b.inputs['Base Color'].default_value), "
        "b.inputs[w].default_value, b.inputs['IOR'].default_value, len(m)]))"
    )
    code = f"import bpy; bpy.ops.wm.open_mainfile(filepath={str(tmp_path / 'flip.blend')!r}); {probe}"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    line = next(x for x in out.stdout.splitlines() if x.startswith("PROBE "))
    import json

    name, base, transmission, ior, count = json.loads(line[6:])
    assert name == "VoxFX Liquid" and count == 1
    assert min(base[:3]) >= 0.8  # clear, not tinted navy
    assert transmission == 1.0 and abs(ior - 1.33) < 1e-6
