"""Run the ``voxfx`` command through the bpy module (no Blender binary needed).

    python -m tools.cli info                 # from the checkout's root
    python -m tools.cli --blend f.blend info  # open a .blend first, like `blender -b f.blend`

It enables this checkout as an add-on in headless bpy and calls the same ``main(argv)``
that ``blender -b --command voxfx ...`` calls.
"""

import sys


def run(argv: list[str]) -> int:
    import bpy

    from tools.package import load

    voxfx = load()
    if len(argv) >= 2 and argv[0] == "--blend":
        bpy.ops.wm.open_mainfile(filepath=argv[1])
        argv = argv[2:]
    voxfx.register()
    try:
        from voxfx.addon import cli

        return cli.main(argv)
    finally:
        voxfx.unregister()


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
