"""docs/switches.md, the reference of every VOXFX_* environment variable, is made from the code
(tools/switches.py) and stays the code's: a switch added, removed or given another default
without the page written again fails here; the scan itself is checked against the switches
test_env_choices sets one by one and against a made-up module of every read it must find."""

import re
import textwrap
from pathlib import Path

from tools import switches
from tests.unit.test_env_choices import SWITCHES

ROOT = Path(__file__).resolve().parents[2]


def test_the_switches_page_is_the_codes():
    page = (ROOT / "docs" / "switches.md").read_text(encoding="utf-8")
    assert page == switches.markdown(), "docs/switches.md is stale: python tools/switches.py --write"


def test_the_scan_gives_each_tested_switch_its_ways_and_default():
    found = {}
    for s in switches.scan():
        if s.ways is not None:
            found.setdefault(s.variable, set()).add((s.ways, s.default))
    for _, variable, ways, default in SWITCHES:
        if variable == "VOXFX_TEST_SWITCH":  # the test's own made-up variable
            continue
        assert found.get(variable) == {(tuple(ways), default)}, variable


def test_every_voxfx_name_in_the_python_is_a_read_the_scan_finds_or_a_cuda_define():
    literal = re.compile(r"[\"'](VOXFX_[A-Z0-9_]+)[\"']")
    names = {m for top in ("kernels", "addon") for p in (ROOT / top).rglob("*.py")
             for m in literal.findall(p.read_text(encoding="utf-8"))}
    cuda = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "kernels" / "cuda").rglob("*.cu*"))
    read = {s.variable for s in switches.scan()}
    missed = {n for n in names - read if not re.search(rf"\b{n}\b", cuda)}
    assert not missed, f"VOXFX_ names neither read through a known call nor CUDA defines: {sorted(missed)}"
    assert len(read) > 100


def test_the_scan_finds_each_kind_of_read_with_its_ways_default_and_words(tmp_path):
    module = tmp_path / "kernels" / "made_up.py"
    module.parent.mkdir()
    module.write_text(textwrap.dedent('''
        """A made-up module. Its words."""
        import os
        from voxfx.kernels.settings import env_choice, env_value

        SWITCH = "VOXFX_MADE_CONSTANT"  # a constant's own words. More.
        WAYS = ("on", "off")
        # The free one's words above it.
        LIMIT = int(os.environ.get("VOXFX_MADE_FREE", "64"))
        OTHER = {"VOXFX_MADE_NOT_READ": 1}.get("VOXFX_MADE_NOT_READ")


        def first(given=None):
            """First way. Then more."""
            return env_choice("VOXFX_MADE_FIRST", ("a", "b", "c"), given)


        def named(given=None):
            """Named default | a bar."""
            return env_choice(SWITCH, WAYS, given, default="off")


        def positional(given=None):
            return env_choice("VOXFX_MADE_POSITIONAL", WAYS, given, "off")


        def plain():
            return env_value("VOXFX_MADE_VALUE") or os.getenv("VOXFX_MADE_GETENV", "x") or os.getenv("HOME")
    '''), encoding="utf-8")
    found = {s.variable: s for s in switches._reads(module, tmp_path)}
    assert set(found) == {"VOXFX_MADE_CONSTANT", "VOXFX_MADE_FREE", "VOXFX_MADE_FIRST", "VOXFX_MADE_POSITIONAL",
                          "VOXFX_MADE_VALUE", "VOXFX_MADE_GETENV"}
    first, named, free = found["VOXFX_MADE_FIRST"], found["VOXFX_MADE_CONSTANT"], found["VOXFX_MADE_FREE"]
    assert (first.ways, first.default, first.where) == (("a", "b", "c"), "a", "kernels/made_up.py::first")
    assert first.summary == "First way."
    assert (named.ways, named.default, named.summary) == (("on", "off"), "off", "Named default \\| a bar.")
    assert found["VOXFX_MADE_POSITIONAL"].default == "off"
    assert found["VOXFX_MADE_POSITIONAL"].summary == ""  # no docstring, no comments at the read or its constant
    assert (free.ways, free.default, free.where) == (None, "64", "kernels/made_up.py::<module>")
    assert free.summary == "The free one's words above it."
    assert (found["VOXFX_MADE_VALUE"].default, found["VOXFX_MADE_GETENV"].default) == ("", "x")
    row = switches.markdown([free, named])
    assert "| `VOXFX_MADE_FREE` | free-form (the module's notes) | `64` |" in row
    assert "| `VOXFX_MADE_CONSTANT` | `on`, `off` | `off` |" in row
