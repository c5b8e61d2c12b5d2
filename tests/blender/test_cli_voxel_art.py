"""The ``voxfx voxelize`` command's voxel art options (Color Source, Merge Block Faces, VOX
Palette, Palette Image): the panel's settings under the same names and defaults, run
through the command's own ``main(argv)`` on real scenes and files."""

from __future__ import annotations

import subprocess
import sys

import bpy
import numpy as np
import pytest

from voxfx.kernels.voxfile import read_vox

from .helpers import ROOT, voxfx_registered
from .test_textures_blender import CELLS, checker_image, quad, textured_material

PALETTE_BYTES = np.array([[255, 0, 0, 255], [0, 255, 0, 255], [0, 0, 255, 255]], np.uint8)


def run_cli(argv):
    with voxfx_registered():
        from voxfx.addon import cli

        return cli.main(argv)


def palette_png(path):
    """A 3 × 1 palette PNG written by Blender, then removed from the .blend (the command
    must load it from the file)."""
    image = bpy.data.images.new("pal", 3, 1, alpha=True)
    image.pixels.foreach_set((PALETTE_BYTES / 255.0).astype(np.float32).ravel())
    image.filepath_raw = str(path)
    image.file_format = "PNG"
    image.save()
    bpy.data.images.remove(image)
    return path


def over_the_quad(scene):
    """(cell (i, j, layer), palette bytes) of the voxels whose centres lie over the 2 m quad
    of ``quad``: the grid has one voxel of margin (6 × 6 × 3 at 4 cells), and the quad lies
    on a voxel boundary (two layers); the margin voxels' closest points are on its edges."""
    ijk, index = scene.voxels()
    assert ijk.max(axis=0).tolist() == [CELLS + 1, CELLS + 1, 1]
    over = (ijk[:, :2] >= 1).all(1) & (ijk[:, :2] <= CELLS).all(1)
    assert over.sum() == 2 * CELLS * CELLS
    return ijk[over] - (1, 1, 0), scene.palette[index[over] - 1]


def test_cli_defaults_are_the_panel_defaults():
    with voxfx_registered():
        from voxfx.addon import cli

        args = cli.build_parser().parse_args(["voxelize", "--out", "x.vox"])
        rna = bpy.context.scene.voxfx.voxelize.bl_rna.properties
        assert cli.COLOR_SOURCES[args.color_source] == rna["color_source"].default
        assert args.merge_block_faces == rna["greedy_blocks"].default
        assert cli.VOX_PALETTES[args.vox_palette or "auto"] == rna["vox_palette"].default
        # every panel choice has its command-line spelling
        assert set(cli.COLOR_SOURCES.values()) == {i.identifier for i in rna["color_source"].enum_items}
        assert set(cli.VOX_PALETTES.values()) == {i.identifier for i in rna["vox_palette"].enum_items}


def test_texture_colours_into_a_vox_through_the_cli(tmp_path):
    image, cells = checker_image()
    quad(textured_material(image))
    out = tmp_path / "quad.vox"
    assert run_cli(["voxelize", "--resolution", str(CELLS), "--mode", "surface", "--color-source", "texture",
                    "--out", str(out)]) == 0
    ijk, got = over_the_quad(read_vox(out))
    expected = cells[ijk[:, 1], ijk[:, 0]]  # voxel (i, j) over cell (u = i, v = j): its sRGB bytes
    np.testing.assert_array_equal(got, expected.astype(np.uint8))


def test_material_colour_source_ignores_the_texture(tmp_path):
    image, _ = checker_image()
    mat = textured_material(image)
    mat.diffuse_color = (0.5, 0.25, 0.125, 1.0)
    quad(mat)
    out = tmp_path / "quad.vox"
    assert run_cli(["voxelize", "--resolution", str(CELLS), "--mode", "surface", "--color-source", "material",
                    "--out", str(out)]) == 0
    _, index = read_vox(out).voxels()
    assert len(np.unique(index)) == 1  # one material colour, not the checker's 16


def test_palette_image_file_gives_the_vox_palette(tmp_path):
    image, _ = checker_image()
    quad(textured_material(image))
    png = palette_png(tmp_path / "palette.png")
    out = tmp_path / "quad.vox"
    assert run_cli(["voxelize", "--resolution", str(CELLS), "--mode", "surface", "--color-source", "texture",
                    "--palette-image", str(png), "--out", str(out)]) == 0  # implies --vox-palette image
    scene = read_vox(out)
    np.testing.assert_array_equal(scene.palette[:3], PALETTE_BYTES)
    _, index = scene.voxels()
    assert set(index.tolist()) <= {1, 2, 3} and len(set(index.tolist())) > 1


def test_palette_image_of_the_blend_by_name(tmp_path):
    bpy.ops.mesh.primitive_cube_add(size=2)
    mat = bpy.data.materials.new("Reddish")
    mat.diffuse_color = (0.8, 0.1, 0.1, 1.0)
    if mat.node_tree is None:
        mat.use_nodes = True
    mat.node_tree.nodes["Principled BSDF"].inputs["Base Color"].default_value = (0.8, 0.1, 0.1, 1.0)
    bpy.context.active_object.data.materials.append(mat)
    pal = bpy.data.images.new("MyPalette", 3, 1, alpha=True)
    pal.pixels.foreach_set((PALETTE_BYTES / 255.0).astype(np.float32).ravel())
    out = tmp_path / "cube.vox"
    assert run_cli(["voxelize", "--resolution", "6", "--vox-palette", "image", "--palette-image", "MyPalette",
                    "--out", str(out)]) == 0
    scene = read_vox(out)
    np.testing.assert_array_equal(scene.palette[:3], PALETTE_BYTES)
    _, index = scene.voxels()
    assert set(index.tolist()) == {1}  # reddish: nearest to red


def test_merge_block_faces_into_a_blend(tmp_path):
    bpy.ops.mesh.primitive_cube_add(size=2)
    for merge in (False, True):
        out = tmp_path / f"cube_{merge}.blend"
        argv = ["voxelize", "--resolution", "8", "--out", str(out)] + (["--merge-block-faces"] if merge else [])
        assert run_cli(argv) == 0
        bpy.ops.wm.open_mainfile(filepath=str(out))
        blocks = bpy.data.objects["Cube_blocks"]
        faces = len(blocks.data.polygons)
        assert faces == (6 if merge else 6 * 10 * 10)  # 10 voxels a side: the faces lie on voxel boundaries
        assert sum(p.area for p in blocks.data.polygons) == pytest.approx(6 * 2.5**2, rel=1e-5)
        if merge:
            color = np.empty(4 * faces, np.float32)
            blocks.data.attributes["color"].data.foreach_get("color", color)
            np.testing.assert_allclose(color.reshape(-1, 4), np.tile([0.8, 0.8, 0.8, 1.0], (6, 1)), atol=1e-6)
        bpy.ops.wm.read_homefile(use_empty=True)
        bpy.ops.mesh.primitive_cube_add(size=2)


@pytest.mark.parametrize("argv, says", [
    (["--vox-palette", "image"], "--vox-palette image needs --palette-image"),
    (["--palette-image", "nowhere.png"], "--palette-image: no image named 'nowhere.png' in the .blend and no file"),
    (["--color-source", "paint"], "argument --color-source: invalid choice: 'paint'"),
])
def test_bad_voxel_art_options_are_one_line(tmp_path, capsys, argv, says):
    bpy.ops.mesh.primitive_cube_add(size=2)
    assert run_cli(["voxelize", "--resolution", "4", "--out", str(tmp_path / "x.vox")] + argv) == 1
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not (tmp_path / "x.vox").exists()


def test_palette_file_that_is_not_an_image_is_one_line(tmp_path, capsys):
    bpy.ops.mesh.primitive_cube_add(size=2)
    bogus = tmp_path / "palette.png"
    bogus.write_bytes(b"not a png at all")
    assert run_cli(["voxelize", "--resolution", "4", "--palette-image", str(bogus),
                    "--out", str(tmp_path / "x.vox")]) == 1
    err = capsys.readouterr().err
    assert "--palette-image: cannot read" in err and "Traceback" not in err


def test_voxel_art_options_through_the_module_entry_point(tmp_path):
    """The command as a user types it (a separate process, a saved .blend)."""
    image, cells = checker_image()
    image.filepath_raw = str(tmp_path / "checker.png")
    image.file_format = "PNG"
    image.save()
    quad(textured_material(image))
    blend = tmp_path / "q.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    out = tmp_path / "q.vox"
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", str(blend), "voxelize", "--resolution",
                        str(CELLS), "--mode", "surface", "--color-source", "texture", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode == 0, r.stderr
    ijk, got = over_the_quad(read_vox(out))
    np.testing.assert_array_equal(got, cells[ijk[:, 1], ijk[:, 0]].astype(np.uint8))
