"""MagicaVoxel export: every file is read back by a small parser written here from the
public format description (RIFF-like chunk walk, scene graph with ``_t`` translations and
MagicaVoxel's centre pivot), so a wrong offset, axis or palette shift shows as a wrong
voxel or colour."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from voxfx.addon import vox_export
from voxfx.addon.vox_export import quantize_colors, write_vox
from voxfx.kernels.errors import InputError, VoxFXError

# ---------------------------------------------------------------------------------------
# An independent reader


class Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        assert self.at + n <= len(self.data), "read past the end of a chunk"
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def int32(self) -> int:
        return struct.unpack("<i", self.take(4))[0]

    def string(self) -> str:
        return self.take(self.int32()).decode("utf-8")

    def dict(self) -> dict:
        return {self.string(): self.string() for _ in range(self.int32())}

    def done(self) -> bool:
        return self.at == len(self.data)


def walk_chunks(data: bytes):
    """[(id, content, children bytes)] of consecutive chunks filling *data* exactly."""
    chunks, at = [], 0
    while at < len(data):
        chunk_id = data[at:at + 4].decode("ascii")
        content_size, children_size = struct.unpack("<ii", data[at + 4:at + 12])
        content = data[at + 12:at + 12 + content_size]
        children = data[at + 12 + content_size:at + 12 + content_size + children_size]
        assert len(content) == content_size and len(children) == children_size
        chunks.append((chunk_id, content, children))
        at += 12 + content_size + children_size
    assert at == len(data)
    return chunks


def read_vox(path):
    """{'models': [(size, xyzi)], 'palette': (256, 4), 'nodes': {id: node}, 'voxels': (N, 3)
    world voxel positions, 'colour_index': (N,)} of a .vox file."""
    data = open(path, "rb").read()
    assert data[:4] == b"VOX "
    assert struct.unpack("<i", data[4:8])[0] == 150
    (main,) = walk_chunks(data[8:])
    assert main[0] == "MAIN" and main[1] == b""
    models, palette, nodes, pending_size = [], None, {}, None
    for chunk_id, content, children in walk_chunks(main[2]):
        assert children == b""
        r = Reader(content)
        if chunk_id == "SIZE":
            pending_size = (r.int32(), r.int32(), r.int32())
        elif chunk_id == "XYZI":
            n = r.int32()
            xyzi = np.frombuffer(r.take(4 * n), dtype=np.uint8).reshape(n, 4)
            assert pending_size is not None, "XYZI without a SIZE before it"
            models.append((pending_size, xyzi))
            pending_size = None
        elif chunk_id == "RGBA":
            palette = np.frombuffer(r.take(1024), dtype=np.uint8).reshape(256, 4)
        elif chunk_id == "nTRN":
            node_id, attributes = r.int32(), r.dict()
            child, reserved, layer, frames = r.int32(), r.int32(), r.int32(), r.int32()
            assert reserved == -1 and frames == 1
            nodes[node_id] = ("T", child, r.dict(), attributes, layer)
        elif chunk_id == "nGRP":
            node_id, attributes = r.int32(), r.dict()
            nodes[node_id] = ("G", [r.int32() for _ in range(r.int32())])
        elif chunk_id == "nSHP":
            node_id, attributes = r.int32(), r.dict()
            count = r.int32()
            assert count == 1
            nodes[node_id] = ("S", r.int32(), r.dict())
        elif chunk_id == "LAYR":
            r.int32(), r.dict(), r.int32()
        else:
            raise AssertionError(f"unexpected chunk {chunk_id}")
        assert r.done(), f"{chunk_id} content has {len(content) - r.at} unread bytes"
    assert palette is not None
    placed = place_models(models, nodes)
    voxels = np.concatenate([p for p, _ in placed]) if placed else np.empty((0, 3), int)
    colour_index = np.concatenate([c for _, c in placed]) if placed else np.empty(0, int)
    return {"models": models, "palette": palette, "nodes": nodes, "voxels": voxels,
            "colour_index": colour_index}


def place_models(models, nodes):
    """[(world voxel positions, colour indices)] per model instance. Without a scene graph a
    model sits at the origin; in one, a model's centre (size // 2) goes to the sum of the
    ``_t`` translations above it."""
    if not nodes:
        return [(xyzi[:, :3].astype(int), xyzi[:, 3]) for _, xyzi in models]
    placed, seen = [], set()

    def visit(node_id, translation):
        assert node_id not in seen, "scene graph is not a tree"
        seen.add(node_id)
        node = nodes[node_id]
        if node[0] == "T":
            t = np.array([int(v) for v in node[2].get("_t", "0 0 0").split()])
            assert "_r" not in node[2]
            visit(node[1], translation + t)
        elif node[0] == "G":
            for child in node[1]:
                visit(child, translation)
        else:
            size, xyzi = models[node[1]]
            corner = translation - np.array(size) // 2
            placed.append((xyzi[:, :3].astype(int) + corner, xyzi[:, 3]))

    visit(0, np.zeros(3, dtype=int))
    assert seen == set(nodes), "scene graph has unreachable nodes"
    return placed


def as_rows(ijk):
    return {tuple(int(v) for v in row) for row in ijk}


def colours_by_voxel(read):
    """{(i, j, k): RGBA tuple} of a read-back file (colour index i → palette entry i − 1)."""
    colours = read["palette"][read["colour_index"].astype(int) - 1]
    return {tuple(map(int, v)): tuple(map(int, c)) for v, c in zip(read["voxels"], colours)}


def random_voxels(rng, shape, count):
    shape = np.asarray(shape)
    linear = rng.choice(int(np.prod(shape)), size=count, replace=False)
    i = linear % shape[0]
    j = (linear // shape[0]) % shape[1]
    k = linear // (shape[0] * shape[1])
    return np.stack([i, j, k], axis=1)


# ---------------------------------------------------------------------------------------
# Round trips


def test_single_model_round_trips_coordinates_size_and_colours(tmp_path):
    rng = np.random.default_rng(0)
    shape = (20, 12, 7)
    ijk = random_voxels(rng, shape, 300)
    swatches = rng.integers(0, 256, size=(9, 4), dtype=np.uint8)
    rgba = swatches[rng.integers(0, 9, size=300)]
    path = write_vox(tmp_path / "model.vox", ijk, shape, colors=rgba)
    read = read_vox(path)
    assert len(read["models"]) == 1 and read["nodes"] == {}
    assert read["models"][0][0] == shape
    assert as_rows(read["voxels"]) == as_rows(ijk)
    assert (read["colour_index"] >= 1).all()
    expected = {tuple(map(int, v)): tuple(map(int, c)) for v, c in zip(ijk, rgba)}
    assert colours_by_voxel(read) == expected


def test_float_rgb_colours_become_opaque_srgb_bytes(tmp_path):
    """Float colours are Blender's linear ones: MagicaVoxel's palette bytes are sRGB."""
    ijk = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 1]])
    rgb = np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 1.0], [0.2, 0.2, 0.2]], dtype=np.float32)
    read = read_vox(write_vox(tmp_path / "c.vox", ijk, (2, 2, 2), colors=rgb))
    got = colours_by_voxel(read)
    assert got[(0, 0, 0)] == (255, 0, 0, 255)
    assert got[(1, 0, 0)] == (0, 188, 255, 255)  # linear 0.5 is sRGB 0.735
    assert got[(0, 1, 1)] == (124, 124, 124, 255)  # linear 0.2 is sRGB 0.485


def test_colour_indices_pick_palette_entry_index_minus_one(tmp_path):
    palette = np.zeros((255, 4), dtype=np.uint8)
    palette[:, 0] = np.arange(255)  # entry p has red p: colour index i must show red i − 1
    palette[:, 3] = 255
    ijk = np.array([[0, 0, 0], [3, 1, 2], [2, 2, 2]])
    indices = np.array([1, 17, 255])
    read = read_vox(write_vox(tmp_path / "i.vox", ijk, (4, 3, 3), color_indices=indices, palette=palette))
    assert dict(zip(map(tuple, read["voxels"].tolist()), read["colour_index"].tolist())) == {
        (0, 0, 0): 1, (3, 1, 2): 17, (2, 2, 2): 255}
    assert (read["palette"][:255, 0] == np.arange(255)).all()
    assert {c[0] for c in colours_by_voxel(read).values()} == {0, 16, 254}


def test_uncoloured_voxels_use_colour_index_one(tmp_path):
    read = read_vox(write_vox(tmp_path / "u.vox", np.array([[1, 1, 1]]), (3, 3, 3)))
    assert read["colour_index"].tolist() == [1]
    assert read["palette"][0, 3] == 255


def test_empty_voxel_set_still_writes_a_readable_file(tmp_path):
    read = read_vox(write_vox(tmp_path / "e.vox", np.empty((0, 3), int), (300, 4, 4)))
    assert len(read["voxels"]) == 0 and read["models"][0][0] == (256, 4, 4)


# ---------------------------------------------------------------------------------------
# Palette quantisation


def test_more_than_255_colours_are_quantised_to_nearby_palette_entries(tmp_path):
    rng = np.random.default_rng(4)
    lattice = np.stack(np.meshgrid(*[np.arange(40, 201, 40)] * 3), -1).reshape(-1, 3)
    centres = lattice[rng.choice(len(lattice), 40, replace=False)]  # 40 apart: clusters separate
    cluster = rng.integers(0, 40, size=2000)
    rgb = np.clip(centres[cluster] + rng.integers(-6, 7, size=(2000, 3)), 0, 255).astype(np.uint8)
    assert len(np.unique(rgb, axis=0)) > 255
    ijk = random_voxels(rng, (30, 30, 30), 2000)
    path = write_vox(tmp_path / "q.vox", ijk, (30, 30, 30), colors=rgb)
    read = read_vox(path)
    used = np.unique(read["colour_index"])
    assert used.min() >= 1 and used.max() <= 255
    got = colours_by_voxel(read)
    error = np.array([np.abs(np.array(got[tuple(v)][:3]) - c.astype(int)).max() for v, c in zip(ijk, rgb)])
    assert error.max() <= 12  # within one cluster's spread: never mapped to another cluster
    # Deterministic: the same input gives the same bytes.
    again = write_vox(tmp_path / "q2.vox", ijk, (30, 30, 30), colors=rgb)
    assert path.read_bytes() == again.read_bytes()


def test_quantisation_is_exact_up_to_255_colours_and_bounded_beyond():
    rng = np.random.default_rng(8)
    exact = rng.integers(0, 256, size=(255, 4), dtype=np.uint8)
    exact = np.unique(exact, axis=0)
    colours = exact[rng.integers(0, len(exact), size=1000)]
    palette, index = quantize_colors(colours)
    assert (palette[index] == colours).all()

    many = rng.integers(0, 256, size=(5000, 4), dtype=np.uint8)
    palette, index = quantize_colors(many)
    assert len(palette) == 255 and index.min() >= 0 and index.max() < 255
    # Median cut on 5000 uniform colours: boxes are about 256 / 255^(1/4) ≈ 64 wide per
    # channel, so no colour moves by more than a box width.
    assert np.abs(palette[index].astype(int) - many.astype(int)).max() <= 80
    assert len(quantize_colors(many, max_colors=16)[0]) == 16


# ---------------------------------------------------------------------------------------
# Splitting into models


def test_grid_wider_than_256_is_split_into_models_placed_by_the_scene_graph(tmp_path):
    shape = (300, 10, 10)
    rng = np.random.default_rng(2)
    ijk = np.concatenate([random_voxels(rng, shape, 500),
                          [[0, 0, 0], [255, 9, 9], [256, 0, 0], [299, 9, 9], [299, 0, 5]]])
    ijk = np.unique(ijk, axis=0)
    rgba = rng.integers(0, 256, size=(len(ijk), 4), dtype=np.uint8)
    rgba[:, :3] = (ijk * [0, 20, 20]) % 256  # few distinct colours: exact palette
    rgba[:, 0] = ijk[:, 0] >= 256
    rgba[:, 3] = 255
    read = read_vox(write_vox(tmp_path / "wide.vox", ijk, shape, colors=rgba))
    sizes = sorted(size for size, _ in read["models"])
    assert sizes == [(44, 10, 10), (256, 10, 10)]
    for size, xyzi in read["models"]:
        assert max(size) <= 256
        assert (xyzi[:, :3] < np.array(size)).all()
    assert len(read["voxels"]) == len(ijk)
    assert as_rows(read["voxels"]) == as_rows(ijk)
    expected = {tuple(map(int, v)): tuple(map(int, c)) for v, c in zip(ijk, rgba)}
    assert colours_by_voxel(read) == expected


def test_split_along_every_axis_with_small_models(tmp_path):
    shape = (11, 9, 7)
    rng = np.random.default_rng(6)
    ijk = random_voxels(rng, shape, 250)
    indices = rng.integers(1, 256, size=250)
    read = read_vox(write_vox(tmp_path / "tiles.vox", ijk, shape, color_indices=indices, model_size=4))
    assert all(max(size) <= 4 for size, _ in read["models"])
    # Tiles of 4: x 4+4+3, y 4+4+1, z 4+3; 250 of 693 voxels leave none of the 18 empty.
    assert len(read["models"]) == 18
    assert sorted({size for size, _ in read["models"]}) == sorted(
        {(x, y, z) for x in (4, 3) for y in (4, 1) for z in (4, 3)})
    got = dict(zip(map(tuple, read["voxels"].tolist()), read["colour_index"].tolist()))
    assert got == dict(zip(map(tuple, ijk.tolist()), indices.tolist()))


# ---------------------------------------------------------------------------------------
# Bad input and failing writes


@pytest.mark.parametrize("ijk, shape, kwargs, match", [
    ([[0, 0, 4]], (4, 4, 4), {}, "outside"),
    ([[-1, 0, 0]], (4, 4, 4), {}, "outside"),
    ([[1, 1, 1], [1, 1, 1]], (4, 4, 4), {}, "repeat"),
    ([[1, 1, 1]], (4, 4, 4), {"color_indices": [0]}, "1..255"),
    ([[1, 1, 1]], (4, 0, 4), {}, "positive"),
    ([[1, 1, 1]], (4, 4, 4), {"colors": [[1.0, 0.0]]}, "RGB"),
])
def test_bad_input_is_refused_before_writing(tmp_path, ijk, shape, kwargs, match):
    with pytest.raises(InputError, match=match):
        write_vox(tmp_path / "bad.vox", np.array(ijk), shape, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_failed_write_names_the_path_and_leaves_no_temporary_file(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a regular file")
    target = blocker / "model.vox"
    with pytest.raises(VoxFXError, match="not_a_folder/model.vox"):
        write_vox(target, np.array([[0, 0, 0]]), (1, 1, 1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_folder"]
    assert blocker.read_text() == "a regular file"


def test_failed_rename_removes_the_temporary_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "model.vox"
    target.write_bytes(b"VOX old")

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", str(dst))

    monkeypatch.setattr(vox_export.os, "replace", refuse)
    with pytest.raises(VoxFXError, match="model.vox"):
        write_vox(target, np.array([[0, 0, 0]]), (1, 1, 1))
    assert [p.name for p in tmp_path.iterdir()] == ["model.vox"]
    assert target.read_bytes() == b"VOX old"


def test_written_file_replaces_an_old_one_with_plain_permissions(tmp_path):
    target = tmp_path / "model.vox"
    target.write_bytes(b"VOX old")
    write_vox(target, np.array([[0, 0, 0]]), (1, 1, 1))
    assert target.read_bytes()[:4] == b"VOX "
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("name, content", [("notes.vox", b"my notes"), (".bashrc", None), ("model.txt", None)])
def test_never_overwrites_what_is_not_a_magicavoxel_file(tmp_path, name, content):
    """The path comes from a .blend's settings: a crafted one must not reach other files."""
    target = tmp_path / name
    if content is not None:
        target.write_bytes(content)
    with pytest.raises(InputError, match="not a MagicaVoxel file|must end in .vox"):
        write_vox(target, np.array([[0, 0, 0]]), (1, 1, 1))
    assert (target.read_bytes() if content is not None else not target.exists()) in (content, True)


def test_never_writes_through_a_symlink(tmp_path):
    victim = tmp_path / "victim.vox"
    victim.write_bytes(b"VOX precious")
    (tmp_path / "out.vox").symlink_to(victim)
    with pytest.raises(InputError, match="not a MagicaVoxel file"):
        write_vox(tmp_path / "out.vox", np.array([[0, 0, 0]]), (1, 1, 1))
    assert victim.read_bytes() == b"VOX precious"
