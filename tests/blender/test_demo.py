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
        for ext in (".ply", ".vdb"):
            files = sorted((cache / {"snow": "snow", "liquid": "flip"}[kind] / kind).glob(f"{kind}_*{ext}"))
            assert len(files) == frames and all(p.stat().st_size > 0 for p in files), (kind, ext)
    assert "Suzanne+2_voxels" in r.stdout and "_volume" in r.stdout and "_blocks" in r.stdout
