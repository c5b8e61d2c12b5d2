"""One settings definition per effect (issue 19): the kernel dataclasses declare the
artist-set fields once, with what Blender needs to show them."""

import math
from dataclasses import dataclass, fields

import pytest

from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.settings import default_of, from_source, setting, ui_fields
from voxfx.kernels.snow.domain import SnowSettings


@pytest.mark.parametrize("cls", [SnowSettings, FlipSettings])
def test_every_artist_field_has_a_label_a_tooltip_and_a_default_inside_its_limits(cls):
    ui = ui_fields(cls)
    assert len(ui) >= 7
    for f in ui:
        meta = f.metadata["ui"]
        assert meta["name"] and meta["description"], f.name
        d = default_of(f)
        lo, hi = meta.get("min", -math.inf), meta.get("max", math.inf)
        if isinstance(d, (int, float)) and not isinstance(d, bool):
            assert lo <= d <= hi, (f.name, d, lo, hi)
        if "items" in meta:
            assert d in [item[0] for item in meta["items"]], f.name
    cls().check() if hasattr(cls, "check") else cls()


def test_angles_are_radians_and_the_snowfall_rate_is_in_cm_per_hour():
    s = SnowSettings(snowfall_rate=3.6, repose_angle=math.radians(30.0))
    assert s.snowfall_rate_m_per_s == pytest.approx(3.6 / 100 / 3600)
    s.check()
    with pytest.raises(Exception, match="between 0° and 90°, not 100°"):
        SnowSettings(repose_angle=math.radians(100.0)).check()
    meta = {f.name: f.metadata["ui"] for f in ui_fields(SnowSettings)}
    assert meta["repose_angle"]["subtype"] == "ANGLE" and meta["wind_direction"]["subtype"] == "ANGLE"


def test_from_source_reads_every_artist_field_by_name_and_keeps_kernel_only_fields():
    class Panel:  # any object with the fields' names, as a property group has
        pass

    panel = Panel()
    for f in ui_fields(SnowSettings):
        setattr(panel, f.name, default_of(f))
    panel.flake_count, panel.preset, panel.seed = 1234, "wet", 7
    s = from_source(SnowSettings, panel, wind_speed=9.0)
    assert (s.flake_count, s.preset, s.seed, s.wind_speed) == (1234, "wet", 7, 9.0)
    assert s.gust_period == SnowSettings().gust_period  # kernel-only: the dataclass default
    del panel.seed
    with pytest.raises(AttributeError):
        from_source(SnowSettings, panel)


def test_setting_refuses_unknown_property_options_and_copies_vector_defaults():
    with pytest.raises(TypeError, match="unknown property options: colour"):
        setting(1.0, "X", "x", colour="red")

    @dataclass
    class S:
        v: tuple = setting((0.0, 0.0, 1.0), "V", "a vector")
        plain: int = 3

    assert [f.name for f in ui_fields(S)] == ["v"] and len(fields(S)) == 2
    assert S().v == (0.0, 0.0, 1.0)
