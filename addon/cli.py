"""Command line: ``blender -b scene.blend --command voxfx <sub-command> ...``.

Sub-commands are registered with ``add_command`` (effects add theirs); ``info`` is
built in. The same ``main(argv)`` is reachable without the Blender binary, through the
bpy module: ``python -m tools.cli info`` from a checkout.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Callable

import bpy

from ..kernels import backend
from ..kernels.errors import VoxFXError
from . import addon_version

COMMAND_ID = "voxfx"

# name -> (help, configure(parser), run(args) -> int)
_commands: dict[str, tuple[str, Callable, Callable]] = {}
_handle = None


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
    except SystemExit as e:  # argparse exits on --help and on bad arguments
        return int(e.code or 0)
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
