"""The README's first command ends in this demo: it must produce its outputs."""

import subprocess
import sys

from .helpers import ROOT


def test_demo_writes_blend_vdb_and_vox(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tools.demo", "--out", str(tmp_path), "--resolution", "16"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, env={"PATH": "", "VOXFX_BACKEND": "cpu"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "voxelize_demo.blend").stat().st_size > 10_000
    assert (tmp_path / "voxelize_demo.vox").stat().st_size > 100
    vdbs = list((tmp_path / "voxfx_cache" / "voxelize").glob("*.vdb"))
    assert len(vdbs) == 1 and vdbs[0].stat().st_size > 100
    assert not list(tmp_path.glob("*.blend1"))
    assert "_voxels" in r.stdout and "_volume" in r.stdout and "_blocks" in r.stdout
