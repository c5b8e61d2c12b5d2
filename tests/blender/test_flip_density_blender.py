"""Density Correction on the Liquid panel and the CLI (issue 24): 0.3 by default, in the
kernels' settings the bake uses, set by ``flip --density-correction`` (saved with --save), a
value outside [0, 1] refused in one line."""

import subprocess
import sys

import bpy

from .helpers import ROOT
from .test_flip_narrow_band_blender import tank  # noqa: F401  (the fixture)


def test_the_panels_density_correction_reaches_the_kernels(tank):  # noqa: F811
    from voxfx.addon.operators.flip import kernel_settings

    scene, f, _ = tank
    assert abs(f.density_correction - 0.3) < 1e-6  # on by default
    f.density_correction = 0.0
    assert kernel_settings(f, scene).density_correction == 0.0
    f.density_correction = 0.55
    assert abs(kernel_settings(f, scene).density_correction - 0.55) < 1e-6


def test_cli_density_correction_option(tank):  # noqa: F811
    scene, f, folder = tank
    bpy.ops.wm.save_mainfile()
    path = bpy.data.filepath
    args = [sys.executable, "-m", "tools.cli", "--blend", path, "flip", "--frames", "1-2"]
    r = subprocess.run(args + ["--density-correction", "0.7", "--save"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert (folder / "liquid_0002.vxp").exists()
    bpy.ops.wm.open_mainfile(filepath=path)
    assert abs(bpy.context.scene.voxfx.flip.density_correction - 0.7) < 1e-6  # saved by --save
    r = subprocess.run(args + ["--density-correction", "1.5"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "Traceback" not in r.stderr and "--density-correction" in r.stderr
