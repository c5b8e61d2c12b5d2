"""Voxel art options of Voxelize (issue 15): colour source, greedy block mesh, .vox palette.

The Voxelize job calls in at five places, each a line or two, so the voxelizer's own
flow stays as it is:

    art = voxel_art.read(context, group, depsgraph, soup, warnings, request.outputs)  # main thread
    compute_group_split(..., art=voxel_art.slab_art(art, soup, spec, request, table))  # split: per z-slab
    yield Kernel(lambda p: voxel_art.apply(arrays, soup, spec, request, art, table, p), ...)  # arrays only
    write_mesh(..., face_attributes=voxel_art.face_attributes(arrays)); voxel_art.show_colors(obj, art)
    voxel_art.write_vox(path, arrays, spec)                             # instead of write_vox(... colors=)

* **Color Source**: Attribute (a mesh's colour attribute, else its material's colour: as
  before), Material (material colours only) or Texture (the material's base-colour image
  at each voxel, ``kernels/voxelize/texture.py``; other materials keep their colour).
* **Merge Block Faces**: the block mesh's faces of one colour and material in a plane
  merged into rectangles (``kernels/voxelize/greedy.py``), a face ``color`` attribute
  keeping the look.

Dense, split (z-slabs) and sparse results get the same colours, merged mesh and .vox
(``kernels/voxelize/art_outputs.py``).
* **VOX Palette**: Automatic (k-means in OKLab, ``kernels/voxelize/palette.py``) or Image
  (each voxel takes the nearest colour of a palette image). .vox palettes are written as
  sRGB bytes, what MagicaVoxel shows; the point cloud keeps the full colour.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import backend
from ..kernels.errors import InputError
from ..kernels.progress import report, scaled
from ..kernels.voxelize.art_outputs import (ArtSettings, SlabArt, face_colors_wanted, greedy_from_faces, labels,
                                            palette_bytes, sparse_texture_colors)
from ..kernels.voxelize.outputs import colors_of
from ..kernels.voxelize.palette import nearest_in_palette, palette_from_image, quantize
from . import textures


@dataclass
class ArtInputs:
    color_source: str  # "ATTRIBUTE", "MATERIAL" or "TEXTURE"
    greedy: bool
    palette: np.ndarray | None  # (P, 4) linear palette from an image, or None: automatic
    textures: textures.TextureInputs | None
    textured_materials: list  # names of materials whose colour came from an image
    textured: object = None  # the kernels' TexturedMesh of the soup (prepared once), or None

    def settings(self) -> ArtSettings:
        """The kernels' side of these inputs (arrays only)."""
        return ArtSettings(self.color_source, self.greedy, self.palette, self.textured)


def read(context, objects, depsgraph, soup, warnings: list, outputs=None) -> ArtInputs:
    """The options and what they need from ``bpy`` (images, UVs): main thread. *outputs*
    (the request's; default: the panel's) says whether a .vox is written (the CLI's
    ``--out x.vox`` is, whatever the panel says)."""
    s = context.scene.voxfx.voxelize
    vox = s.output_vox if outputs is None else "vox" in outputs
    palette = None
    if vox and s.vox_palette == "IMAGE":
        if s.vox_palette_image is None:
            raise InputError("VOX Palette is Image: choose a Palette Image")
        palette = palette_from_image(textures.image_pixels(s.vox_palette_image))
    inputs, textured, mesh = None, [], None
    if s.color_source == "TEXTURE" and soup is not None:
        inputs = textures.read_textures(objects, depsgraph, soup, warnings)
        used = np.unique(soup.material_index[inputs.image_of_triangle >= 0])
        textured = [soup.materials[m] for m in used.tolist() if m >= 0]
        mesh = textures.textured_mesh(inputs, soup)
    return ArtInputs(s.color_source, bool(s.greedy_blocks), palette, inputs, textured, mesh)


def slab_art(art: ArtInputs, soup, spec, request, table):
    """The split job's voxel art (``kernels/voxelize/art_outputs.SlabArt``): colours,
    merged faces and the .vox palette per z-slab, as unsplit; None when the split
    outputs need none of it (blocks alone, without merging or texture colours)."""
    if art is None or soup is None:
        return None
    settings = art.settings()
    if "vox" not in request.outputs and not face_colors_wanted(settings, request.outputs):
        return None
    return SlabArt(settings, soup, spec, table, request.outputs)


def apply(arrays, soup, spec, request, art: ArtInputs, table, progress=None):
    """Colours, greedy blocks and the .vox palette of one group's *arrays*, in place:
    a dense group from its bit grid, a sparse one (``sparse_outputs.SparseGroup``) from
    its bricks a chunk at a time (``art_outputs``). Split groups had theirs slab by slab
    (``slab_art``). Arrays only (no bpy): may run on a worker thread."""
    if arrays.count == 0 or arrays.ijk is None or arrays.material is None:
        return arrays  # nothing per voxel (a volume alone, or a split job)
    wants_color = bool(request.outputs & {"points", "vox"}) or art.greedy or art.color_source == "TEXTURE"
    if not wants_color:
        return arrays
    bits = getattr(getattr(arrays, "grid", None), "bits", None)  # a dense bit grid; sparse groups have none
    sparse = getattr(arrays, "result", None) if bits is None else None
    rgba = arrays.rgba
    if rgba is None and art.color_source == "ATTRIBUTE" and bits is not None and _colour_attributes(soup):
        from ..kernels.voxelize.outputs import voxel_attributes  # blocks alone: their attribute colours

        rgba = voxel_attributes(soup, soup.vertices, soup.triangles, spec, bits, backend.xp(), len(arrays.ijk),
                                table)[1]
    if rgba is None or art.color_source != "ATTRIBUTE":
        rgba = colors_of(table, arrays.material).astype(np.float32)
    if art.color_source == "TEXTURE" and art.textured is not None:
        report(progress, 0.1, "texture colours")
        if bits is not None:
            from ..kernels.voxelize.attributes import owner_triangles

            xp = backend.xp()
            owner = owner_triangles(soup.vertices, soup.triangles, spec, bits, xp=xp)
            rgba = art.textured.recolor(spec, arrays.ijk, owner, rgba, xp)
        elif sparse is not None:
            rgba = sparse_texture_colors(sparse, soup, spec, art.textured, rgba, scaled(progress, 0.1, 0.5))
    arrays.rgba = rgba
    if "blocks" in request.outputs and arrays.blocks is not None:
        if art.greedy and (bits is not None or sparse is not None):
            from ..kernels.voxelize.greedy import greedy_faces

            report(progress, 0.5, "merging block faces")
            label = labels(arrays.material, rgba)
            if bits is not None:
                arrays.blocks = greedy_faces(bits, spec, labels=label).to_numpy()
            else:  # the sparse block mesh's faces, merged: the dense greedy mesh (art_outputs)
                arrays.blocks = greedy_from_faces(arrays.blocks, arrays.ijk, label, spec)
            arrays.warnings.append(f"Block mesh: {arrays.blocks.quad_count:,} faces "
                                   f"({arrays.blocks.faces_before:,} before merging)")
        voxel = _voxel_of_face(arrays.blocks)
        if voxel is not None:
            arrays.face_color = rgba[voxel]
    if "vox" in request.outputs:
        report(progress, 0.8, ".vox palette")
        if art.palette is not None:
            arrays.vox_palette, arrays.vox_index = art.palette, nearest_in_palette(rgba, art.palette)
        else:
            arrays.vox_palette, arrays.vox_index = quantize(rgba)
    return arrays


def _colour_attributes(soup) -> bool:
    return soup is not None and soup.corner_colors is not None and any(soup.colored_objects or ())


def _voxel_of_face(blocks):
    return getattr(blocks, "voxel_of_face", None)  # GreedyMesh has it too (voxel_of_quad)


def face_attributes(arrays) -> dict:
    """The block mesh's face ``color`` when ``apply`` made one."""
    color = getattr(arrays, "face_color", None)
    return {} if color is None else {"color": color}


def show_colors(obj, art: ArtInputs) -> None:
    """Texture colours: the slots of textured materials show the voxels' ``color``
    (``VoxFX Voxel Color``); the image needs UVs the voxels do not have."""
    if not art.textured_materials:
        return
    from . import materials

    data = obj.data
    for i, mat in enumerate(data.materials):
        if mat is not None and mat.name in art.textured_materials:
            data.materials[i] = materials.voxel_color()


def write_vox(path, arrays, spec):
    """The .vox file with ``apply``'s palette (sRGB bytes), or as before without it."""
    from .vox_export import write_vox as write

    if getattr(arrays, "vox_index", None) is None:
        return write(path, arrays.ijk, spec.shape, colors=arrays.rgba)
    return write(path, arrays.ijk, spec.shape, color_indices=arrays.vox_index + 1,
                 palette=palette_bytes(arrays.vox_palette))
