"""``sparse_pressure_workspace._Views`` and ``_Up``: the workspace set-up's ``up`` and ``down``
lists whose entries are made when first read (``VIEWS`` "lazy"), once each, and read as the
lists of views they stand for (indices, slices, iteration, concatenation, deletion)."""

from voxfx.kernels.flip.sparse_pressure_workspace import _Up, _Views


def test_views_are_made_once_when_read():
    made = []

    def entry(value):
        def make():
            made.append(value)
            return value
        return make
    views = _Views([entry("a"), entry("b"), entry("c")])
    assert made == []
    assert views[1] == "b" and views[1] == "b" and made == ["b"]
    assert views[-1] == "c" and views[0:2] == ["a", "b"] and made == ["b", "c", "a"]
    assert list(views) == ["a", "b", "c"] and views + ["d"] == ["a", "b", "c", "d"]
    assert ["z"] + views == ["z", "a", "b", "c"] and len(made) == 3
    del views[-1]
    assert len(views) == 2 and list(views) == ["a", "b"]


def test_up_makes_level0s_table_only_when_read():
    class Level0:
        calls = 0

        def up(self):
            Level0.calls += 1
            return "up0"
    up = _Up([lambda: "up1"], Level0())
    assert Level0.calls == 0 and len(up) == 2
    assert up[1] == "up1" and Level0.calls == 0
    assert up[0] == "up0" and up[0] == "up0" and Level0.calls == 1
