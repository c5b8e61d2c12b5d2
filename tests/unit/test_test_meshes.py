"""The test meshes' bunny (tests/meshes.py): a fetch that failed is not tried again in the same
process (an offline device's pip download waited out its retries for every bunny test)."""

from tests import meshes


def test_a_failed_bunny_fetch_is_remembered(monkeypatch, tmp_path):
    calls = []

    def offline(target):
        calls.append(target)
        return None, "offline"

    monkeypatch.setattr(meshes, "CACHE", tmp_path)  # no cached PLY here
    monkeypatch.setattr(meshes, "_BUNNY_MISSING", [])
    monkeypatch.setattr(meshes, "_fetch_bunny", offline)
    assert meshes.bunny() == (None, "offline") and meshes.bunny_path() == (None, "offline")
    assert calls == [tmp_path / "StanfordBunny.ply"]  # fetched once
    (tmp_path / "StanfordBunny.ply").write_bytes(b"ply")
    assert meshes.bunny_path() == (tmp_path / "StanfordBunny.ply", None)  # a cached file wins
