"""The Snow and Liquid panels' properties are the kernels' settings fields (issue 19):
same names, defaults and limits, read back into the kernels by name."""

import math

import bpy
import pytest

from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.settings import default_of, ui_fields
from voxfx.kernels.snow.domain import SnowSettings

from .helpers import voxfx_registered


@pytest.mark.parametrize("group,cls", [("snow", SnowSettings), ("flip", FlipSettings)])
def test_each_kernel_field_is_a_panel_property_with_its_default_and_limits(group, cls):
    with voxfx_registered():
        props = getattr(bpy.context.scene.voxfx, group)
        rna = props.bl_rna.properties
        for f in ui_fields(cls):
            meta = f.metadata["ui"]
            assert f.name in rna, f.name
            p = rna[f.name]
            assert p.name == meta["name"] and p.description == meta["description"]
            d = default_of(f)
            if p.type == "FLOAT":
                assert p.default == pytest.approx(d, rel=1e-6), f.name
                assert getattr(props, f.name) == pytest.approx(d, rel=1e-6)
            else:
                assert getattr(props, f.name) == d, f.name
            if "min" in meta:
                assert p.hard_min == pytest.approx(meta["min"]), f.name
            if "subtype" in meta:
                assert p.subtype == meta["subtype"], f.name


def test_panel_values_reach_the_kernels_by_name():
    from voxfx.addon.operators import flip as flip_op
    from voxfx.addon.operators import snow as snow_op

    with voxfx_registered():
        scene = bpy.context.scene
        s = scene.voxfx.snow
        s.snowfall_rate, s.repose_angle, s.wind_direction, s.flake_count = 7.5, math.radians(33), 1.0, 4321
        s.drift_threshold, s.preset = 3.0, "wet"
        k = snow_op.kernel_settings(s, scene)
        assert (k.snowfall_rate, k.flake_count, k.drift_threshold, k.preset) == (7.5, 4321, 3.0, "wet")
        assert k.repose_angle == pytest.approx(math.radians(33)) and k.wind_direction == pytest.approx(1.0)
        f = scene.voxfx.flip
        f.flip_ratio, f.particles_per_cell, f.apic, f.cfl = 0.5, 4, True, 2.0
        scene.use_gravity, scene.gravity = True, (0.0, 0.0, -3.0)
        kf = flip_op.kernel_settings(f, scene)
        assert (kf.flip_ratio, kf.particles_per_cell, kf.apic, kf.cfl) == (0.5, 4, True, 2.0)
        assert kf.gravity == pytest.approx((0.0, 0.0, -3.0))
