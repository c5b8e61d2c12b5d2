"""Command line: ``blender -b scene.blend --command voxfx <sub-command> ...``.

Sub-commands are registered with ``add_command`` (effects add theirs); ``info`` is
built in. The same ``main(argv)`` is reachable without the Blender binary, through the
bpy module: ``python -m tools.cli info`` from a checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from typing import Callable

import bpy

from ..kernels import backend
from ..kernels.errors import VoxFXError
from . import addon_version, fsio

COMMAND_ID = "voxfx"

# name -> (help, configure(parser), run(args) -> int)
_commands: dict[str, tuple[str, Callable, Callable]] = {}
_handle = None


def ranged(kind, low, high=None, *, above=False):
    """An argparse type: *kind* (int or float) from *low* (excluded with *above*) to *high*.
    The error quotes what the user typed and names the allowed range."""
    import math

    what = "a whole number" if kind is int else "a number"
    allowed = (f"{'more than' if above else 'at least'} {low}" if high is None else
               f"from {low} to {high}" if not above else f"more than {low} and at most {high}")

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not {what}") from None
        if not math.isfinite(value) or value < low or (above and value == low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"'{text}' is out of range: use {what} {allowed}")
        return value

    return parse


def add_command(name: str, help: str, configure: Callable[[argparse.ArgumentParser], None],
                run: Callable[[argparse.Namespace], int]) -> None:
    _commands[name] = (help, configure, run)


def remove_command(name: str) -> None:
    _commands.pop(name, None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="blender -b [file.blend] --command voxfx",
        description="VoxFX: GPU voxel effects (voxelize, snow, FLIP liquids) from the command line.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, configure, _run) in sorted(_commands.items()):
        configure(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str]) -> int:
    """Entry point of the ``voxfx`` command; returns the process exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits on --help (0) and on bad arguments (2)
        return 0 if not e.code else 1  # one exit code for every error, as the README says
    if not args.command:
        parser.print_help()
        return 1
    try:
        return int(_commands[args.command][2](args) or 0)
    except VoxFXError as e:
        print(f"voxfx {args.command}: error: {e}", file=sys.stderr)
        return 1


# ------------------------------------------------------------------ info

def _info_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def info_facts() -> dict:
    import numpy

    facts = {
        "voxfx": addon_version(),
        "blender": bpy.app.version_string,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
    }
    try:
        b = backend.get_backend()
        dev = b.device_info()
        facts.update(backend=b.name, backend_reason=b.reason, device=dev.name,
                     memory_total=dev.total_bytes, memory_free=dev.free_bytes, **dev.versions)
    except backend.BackendError as e:
        facts.update(backend="unavailable", backend_reason=str(e))
    return facts


def _info_run(args) -> int:
    facts = info_facts()
    if args.json:
        print(json.dumps(facts, indent=1))
        return 0 if facts["backend"] != "unavailable" else 1
    print(f"VoxFX {facts['voxfx']} on Blender {facts['blender']} (Python {facts['python']}, numpy {facts['numpy']})")
    print(f"backend: {facts['backend']} - {facts['backend_reason']}")
    if "device" in facts:
        print(f"device:  {facts['device']}")
        print(f"memory:  {backend.format_bytes(facts['memory_free'])} free of "
              f"{backend.format_bytes(facts['memory_total'])}")
    for key in ("cupy", "cuda runtime", "driver", "compute capability"):
        if key in facts:
            print(f"{key + ':':9}{facts[key]}")
    return 0 if facts["backend"] != "unavailable" else 1


add_command("info", "print version, backend, device and memory", _info_configure, _info_run)


# ------------------------------------------------------------------ registration

def register():
    global _handle
    if _handle is None:
        _handle = bpy.utils.register_cli_command(COMMAND_ID, main)


def unregister():
    global _handle
    if _handle is not None:
        bpy.utils.unregister_cli_command(_handle)
        _handle = None


def is_registered() -> bool:
    return _handle is not None


# ------------------------------------------------------------------ voxelize

def _voxelize_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--objects", nargs="+", metavar="NAME",
                   help="objects to voxelize (default: every mesh, curve and text object in the scene "
                        "except those VoxFX made)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--voxel-size", type=ranged(float, 0.0, above=True), metavar="M",
                      help="voxel edge length in metres")
    size.add_argument("--resolution", type=ranged(int, 2, 8192), default=64,
                      help="voxels along the longest side, 2-8192 (default 64)")
    p.add_argument("--mode", choices=["surface", "thin", "solid", "solid+surface"], default="solid+surface")
    p.add_argument("--fill-holes", action="store_true", help="3-axis vote for meshes that are not closed")
    p.add_argument("--sparse", choices=["auto", "always", "never"], default="auto",
                   help="8x8x8 bricks covering only the object's voxels: auto (above 1024^3 voxels on the CPU or "
                        "where a dense grid does not fit), always or never (default auto)")
    p.add_argument("--no-edges", action="store_true", help="ignore loose edges and curves without bevel")
    p.add_argument("--separate", action="store_true", help="one result per object instead of one for all")
    p.add_argument("--out", required=True, metavar="PATH",
                   help="output: .vdb (density volume), .vox (MagicaVoxel) or .blend (scene with point "
                        "cloud, volume and block mesh objects)")
    art = p.add_argument_group("voxel art (the Voxelize panel's settings of the same names)")
    art.add_argument("--color-source", choices=sorted(COLOR_SOURCES), default="attribute",
                     help="Color Source: each voxel's colour from the mesh's colour attribute (else its "
                          "material's), its material, or its material's base-colour image through the UV map "
                          "(default attribute)")
    art.add_argument("--merge-block-faces", action="store_true",
                     help="Merge Block Faces: the block mesh's faces of one colour and material in a plane "
                          "merged into rectangles (.blend output)")
    art.add_argument("--vox-palette", choices=sorted(VOX_PALETTES),
                     help="VOX Palette: automatic (k-means in OKLab) or image (the nearest colour of "
                          "--palette-image) (default automatic; image when --palette-image is given)")
    art.add_argument("--palette-image", metavar="IMAGE",
                     help="Palette Image: an image of the .blend by name, or an image file (a MagicaVoxel "
                          "palette PNG, say)")


COLOR_SOURCES = {"attribute": "ATTRIBUTE", "material": "MATERIAL", "texture": "TEXTURE"}
VOX_PALETTES = {"auto": "AUTO", "image": "IMAGE"}


def _set_voxel_art(args, settings) -> None:
    """The voxel art options into the scene's Voxelize settings (what ``voxel_art.read``
    reads), as the panel would set them."""
    from ..kernels.errors import InputError

    settings.color_source = COLOR_SOURCES[args.color_source]
    settings.greedy_blocks = args.merge_block_faces
    palette = args.vox_palette or ("image" if args.palette_image else "auto")
    if palette == "image" and not args.palette_image:
        raise InputError("--vox-palette image needs --palette-image (an image of the .blend or an image file)")
    settings.vox_palette = VOX_PALETTES[palette]
    if args.palette_image:
        settings.vox_palette_image = _palette_image(args.palette_image)


def _palette_image(text: str):
    """The image named *text* in the .blend, else the image file *text*."""
    from ..kernels.errors import InputError

    image = bpy.data.images.get(text)
    if image is not None:
        return image
    if not os.path.isfile(text):
        raise InputError(f"--palette-image: no image named '{text}' in the .blend and no file '{text}'")
    try:
        image = bpy.data.images.load(os.path.abspath(text), check_existing=True)
    except RuntimeError as e:
        raise InputError(f"--palette-image: cannot read '{text}' as an image: "
                         f"{str(e).strip().splitlines()[-1]}") from None
    if image.size[0] == 0 or image.size[1] == 0:
        bpy.data.images.remove(image)
        raise InputError(f"--palette-image: cannot read '{text}' as an image (no pixels)")
    return image


def _voxelize_run(args) -> int:
    from ..kernels.errors import InputError
    from .jobs import JobRunner, console_progress
    from .operators.voxelize import Request, voxelize_job

    scene = bpy.context.scene
    _set_voxel_art(args, scene.voxfx.voxelize)
    if args.objects:
        missing = [n for n in args.objects if n not in bpy.data.objects]
        if missing:
            raise InputError(f"No object named {', '.join(missing)} in {bpy.data.filepath or 'the scene'}")
        objects = [bpy.data.objects[n] for n in args.objects]
    else:
        from .writeback import is_output

        objects = [o for o in scene.objects if o.type in {"MESH", "CURVE", "FONT", "SURFACE", "META", "CURVES"}
                   and not is_output(o)]  # not VoxFX's own earlier results (*_blocks, *_voxels, ...)
    out = os.path.abspath(args.out)
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".vdb", ".vox", ".blend"):
        raise InputError(f"--out must end in .vdb, .vox or .blend, not '{ext or out}'")
    outputs = {".vdb": {"volume"}, ".vox": {"vox"}, ".blend": {"points", "volume", "blocks"}}[ext]
    cache_dir = os.path.join(os.path.dirname(out), "voxfx_cache") + os.sep
    request = Request(mode=args.mode, resolution=None if args.voxel_size else args.resolution,
                      voxel_size=args.voxel_size, fill_holes=args.fill_holes, include_edges=not args.no_edges,
                      combine=not args.separate, outputs=outputs, vox_path=out if ext == ".vox" else "",
                      cache_dir=cache_dir, sparse=args.sparse)
    warnings: list[str] = []
    runner = JobRunner(voxelize_job(bpy.context, objects, request, warnings), title="voxelize")
    runner.run(console_progress("voxelize"))
    for w in warnings:
        print(f"voxfx voxelize: warning: {w}", file=sys.stderr)
    if runner.state != "FINISHED":
        raise InputError(runner.error or "voxelize was cancelled")
    results = runner.result
    if ext == ".vdb":
        for r in results:  # the volume was written into the cache folder: move it into place
            target = out if len(results) == 1 else out.replace(".vdb", f"_{r.name}.vdb")
            fsio.move_atomic(r.files[0], target)
            print(f"wrote {target}")
        for folder in (os.path.join(cache_dir, "voxelize"), cache_dir):
            try:
                os.rmdir(folder)  # only if nothing else is in it
            except OSError:
                pass
    elif ext == ".blend":
        bpy.ops.wm.save_as_mainfile(filepath=out)
        print(f"wrote {out}")
    else:
        for r in results:
            print(f"wrote {r.files[-1]}")
    for r in results:
        print(f"{r.name}: {r.count:,} voxels, grid {'×'.join(map(str, r.spec.shape))}, "
              f"voxel size {r.spec.voxel_size:.4g} m")
    return 0


add_command("voxelize", "voxelize objects into a volume (.vdb), MagicaVoxel (.vox) or a .blend",
            _voxelize_configure, _voxelize_run)


# ------------------------------------------------------------------ snow

def run_bake(job, title: str, save: bool) -> int:
    """Run a bake job to the end with console progress; report, optionally save."""
    from ..kernels.errors import InputError
    from .jobs import JobRunner, console_progress

    runner = JobRunner(job, title=title)
    runner.run(console_progress(title))
    if runner.state != "FINISHED":
        raise InputError(runner.error or f"{title} bake was cancelled")
    result = runner.result
    for note in result.notes:
        print(f"voxfx {title}: warning: {note}", file=sys.stderr)
    print(f"{result.summary} in {result.folder}" + (f"; {result.details}" if result.details else ""))
    if save:
        bpy.ops.wm.save_mainfile()
        print(f"saved {bpy.data.filepath}")
    return 0


def frame_range(text, scene) -> tuple[int, int]:
    """``--frames A-B`` (or the scene's range when not given)."""
    from ..kernels.errors import InputError

    if not text:
        return scene.frame_start, scene.frame_end
    try:
        start, end = (int(x) for x in text.split("-"))
    except ValueError:
        raise InputError(f"--frames must look like 1-250, not '{text}'") from None
    if end < start:
        raise InputError(f"--frames '{text}' ends before it starts")
    return start, end


def _snow_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--frames", metavar="A-B", help="frame range (default: the scene's)")
    p.add_argument("--receivers", metavar="COLLECTION", help="collection snow lands on (default: the scene setting)")
    p.add_argument("--flakes", type=ranged(int, 1, 2**31 - 1), help="flake count (at least 1)")
    p.add_argument("--rate", type=ranged(float, 0.0, above=True), metavar="CM_PER_H",
                   help="snowfall rate in cm of snow per hour (more than 0)")
    p.add_argument("--wind", type=ranged(float, 0.0), metavar="M_PER_S", help="wind speed (0 or more)")
    p.add_argument("--fresh", action="store_true", help="start over instead of resuming a previous bake")
    p.add_argument("--save", action="store_true", help="save the .blend afterwards (with the Snow objects)")
    _cache_format_option(p)


CACHE_FORMATS = {"compact": "COMPACT", "ply": "PLY_VDB"}


def _cache_format_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache-format", choices=sorted(CACHE_FORMATS),
                   help="particles as compact .vxp frames (under 8 bytes each) or PLY files other tools read "
                        "(default: the scene setting)")
    p.add_argument("--write-while-simulating", choices=["on", "off"],
                   help="write each frame's files while the next frame is simulated, its checkpoint saved "
                        "first (faster; a kill costs at most the frame being simulated, off: the frame in "
                        "flight; default: the scene setting)")


def _set_cache_format(args, scene) -> None:
    if args.cache_format:
        scene.voxfx.cache_format = CACHE_FORMATS[args.cache_format]
    if args.write_while_simulating:
        scene.voxfx.write_while_simulating = args.write_while_simulating == "on"


def _snow_run(args) -> int:
    from ..kernels.errors import InputError
    from .operators.snow import snow_job

    scene = bpy.context.scene
    s = scene.voxfx.snow
    if args.receivers:
        coll = bpy.data.collections.get(args.receivers)
        if coll is None:
            raise InputError(f"No collection named '{args.receivers}'")
        s.receivers = coll
    for attr, value in (("flake_count", args.flakes), ("snowfall_rate", args.rate), ("wind_speed", args.wind)):
        if value is not None:
            setattr(s, attr, value)
    _set_cache_format(args, scene)
    start, end = frame_range(args.frames, scene)
    return run_bake(snow_job(bpy.context, s, scene.voxfx.cache_directory, start, end, resume=not args.fresh),
                    "snow", args.save)


add_command("snow", "bake snowfall (flakes, snow cover, depth images) over a frame range", _snow_configure, _snow_run)


# ------------------------------------------------------------------ flip

def _flip_configure(p: argparse.ArgumentParser) -> None:
    from ..kernels.flip.grid import TIMINGS

    p.add_argument("--frames", metavar="A-B", help="frame range (default: the scene's)")
    p.add_argument("--resolution", type=ranged(int, 8, 2048),
                   help="grid cells along the domain's longest side (8-2048)")
    p.add_argument("--domain", metavar="OBJECT", help="domain object (default: the scene setting)")
    p.add_argument("--solver", choices=["auto", "dense", "sparse"],
                   help="auto: dense where its memory fits, sparse where it does not (default: the scene setting)")
    p.add_argument("--narrow-band", type=ranged(int, 0, 256), metavar="CELLS",
                   help="cells under the surface that keep particles, deeper liquid on the grid (sparse solver; "
                        "0 = off, else at least 2)")
    p.add_argument("--density-correction", type=ranged(float, 0.0, 1.0), metavar="ALPHA",
                   help="crowded cells' excess relaxed each substep, so the liquid keeps its volume (0 = off; "
                        "default: the scene's, 0.3 in a new one)")
    p.add_argument("--timing", choices=list(TIMINGS),
                   help="set CFL, Max Substeps, Max Time Step and Time-Centred Advection together: accurate "
                        "(the defaults), balanced (at most 8 cells a substep, up to 16) or fast (three substeps a "
                        "24 fps frame) (default: the scene's settings)")
    p.add_argument("--fresh", action="store_true", help="start over instead of resuming a previous bake")
    p.add_argument("--save", action="store_true", help="save the .blend afterwards (with the Liquid objects)")
    _cache_format_option(p)


def _flip_run(args) -> int:
    from ..kernels.errors import InputError
    from .operators.flip import flip_job, set_timing

    scene = bpy.context.scene
    f = scene.voxfx.flip
    if args.domain:
        if args.domain not in bpy.data.objects:
            raise InputError(f"No object named '{args.domain}'")
        f.domain = bpy.data.objects[args.domain]
    if args.resolution is not None:
        f.resolution = args.resolution
    if args.solver:
        f.solver = args.solver.upper()
    if args.narrow_band is not None:
        f.narrow_band = args.narrow_band
    if args.density_correction is not None:
        f.density_correction = args.density_correction
    if args.timing:
        set_timing(f, args.timing)
    _set_cache_format(args, scene)
    start, end = frame_range(args.frames, scene)
    return run_bake(flip_job(bpy.context, f, scene.voxfx.cache_directory, start, end, resume=not args.fresh),
                    "flip", args.save)


add_command("flip", "bake a FLIP liquid (particles, surface, VDB) over a frame range", _flip_configure, _flip_run)
