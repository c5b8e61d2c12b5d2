"""Run the ``voxfx`` command through the bpy module (no Blender binary needed).

    python -m tools.cli info                 # from the checkout's root
    python -m tools.cli --blend f.blend info  # --blend FILE opens a .blend first, like `blender -b f.blend`

It enables this checkout as an add-on in headless bpy and calls the same ``main(argv)``
that ``blender -b --command voxfx ...`` calls.
"""

import os
import sys


def run(argv: list[str]) -> int:
    import bpy

    from tools.package import load

    voxfx = load()
    if argv[:1] in (["-h"], ["--help"], []):
        print("usage: python -m tools.cli [--blend FILE.blend] COMMAND ...\n"
              "  --blend FILE.blend  open this .blend first, as `blender -b FILE.blend` would\n")
    if argv[:1] == ["--blend"]:
        if len(argv) < 2 or not os.path.isfile(argv[1]):
            print(f"voxfx: error: --blend needs an existing .blend file, not '{argv[1] if len(argv) > 1 else ''}'",
                  file=sys.stderr)
            return 1
        try:
            bpy.ops.wm.open_mainfile(filepath=argv[1])
        except RuntimeError as e:
            print(f"voxfx: error: cannot open '{argv[1]}': {str(e).strip().splitlines()[-1]}", file=sys.stderr)
            return 1
        argv = argv[2:]
    voxfx.register()
    try:
        from voxfx.addon import cli

        return cli.main(argv)
    finally:
        voxfx.unregister()


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
