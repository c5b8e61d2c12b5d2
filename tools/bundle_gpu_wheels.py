"""Build VoxFX extension zips with GPU support inside, one per platform, for studios
whose machines cannot reach PyPI.

    python -m tools.bundle_gpu_wheels --wheels WHEELS_DIR --out dist [--platforms linux-x64 ...]

WHEELS_DIR holds the wheels to bundle (CuPy, its dependencies, NVIDIA's CUDA libraries),
e.g. made on a connected machine with ``pip download --only-binary=:all:
--python-version 3.11 --platform manylinux2014_x86_64 -d WHEELS_DIR ...`` (README, "GPU
set-up"). The tool copies what the extension ships into a staging folder, adds the
wheels and a manifest with ``wheels = [...]`` and ``platforms = [...]``, has Blender's
own extension tool ``validate`` it, then ``build --split-platforms``: one zip per
platform holding only that platform's wheels. Blender installs those wheels into its
extensions' site-packages when the zip is installed. Exit code 0 on success, 1 with a
one-line error otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("__init__.py", "blender_manifest.toml", "README.md", "addon", "kernels")


class BundleError(Exception):
    pass


def blender_ext_tool() -> Path:
    """Blender's own extension tool, from the bpy module (or a Blender next to it)."""
    import bpy  # noqa: PLC0415 - only to find the tool

    return Path(bpy.utils.system_resource("SCRIPTS")) / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"


def wheel_platforms(wheels: list[Path], tool: Path) -> list[str]:
    """Blender platform names (linux-x64, windows-x64, ...) the wheels are built for,
    by Blender's own rule (blender_platforms_from_wheel_platform)."""
    spec = importlib.util.spec_from_file_location("voxfx_blender_ext", tool)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    found = set()
    for wheel in wheels:
        platform_tag = wheel.name[: -len(".whl")].split("-")[-1]
        for tag in platform_tag.split("."):
            if tag != "any":
                found.update(ext.blender_platforms_from_wheel_platform(tag))
    return sorted(found)


def manifest_with_wheels(text: str, wheels: list[str], platforms: list[str]) -> str:
    """The manifest with top-level ``wheels`` and ``platforms`` (before the first table)."""
    lines = text.splitlines()
    if any(line.split("=")[0].strip() in ("wheels", "platforms") for line in lines):
        raise BundleError("blender_manifest.toml already lists wheels or platforms")
    first_table = next(i for i, line in enumerate(lines) if line.startswith("["))
    added = ["platforms = [" + ", ".join(f'"{p}"' for p in platforms) + "]",
             "wheels = ["] + [f'  "./wheels/{w}",' for w in wheels] + ["]", ""]
    return "\n".join(lines[:first_table] + added + lines[first_table:]) + "\n"


def run_tool(tool: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(tool), *args], capture_output=True, text=True, timeout=600)


def bundle(wheels_dir: Path, out_dir: Path, platforms: list[str] | None = None, tool: Path | None = None) -> list[Path]:
    tool = tool or blender_ext_tool()
    wheels = sorted(Path(wheels_dir).glob("*.whl"))
    if not wheels:
        raise BundleError(f"no .whl files in {wheels_dir}")
    platforms = platforms or wheel_platforms(wheels, tool)
    if not platforms:
        raise BundleError("the wheels are all pure Python: name the platforms with --platforms")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="voxfx-bundle-") as tmp:
        stage = Path(tmp) / "voxfx"
        stage.mkdir()
        for name in SHIPPED:
            src = ROOT / name
            if src.is_dir():
                shutil.copytree(src, stage / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(src, stage / name)
        (stage / "wheels").mkdir()
        for wheel in wheels:
            shutil.copy2(wheel, stage / "wheels" / wheel.name)
        manifest = stage / "blender_manifest.toml"
        manifest.write_text(manifest_with_wheels(manifest.read_text(encoding="utf-8"),
                                                 [w.name for w in wheels], platforms), encoding="utf-8")
        checked = run_tool(tool, "validate", str(stage))
        if checked.returncode != 0 or "Success" not in checked.stdout:
            raise BundleError("Blender's extension validate refused the bundle: "
                              + (checked.stdout + checked.stderr).strip().replace("\n", " | "))
        before = set(out_dir.glob("*.zip"))
        built = run_tool(tool, "build", "--source-dir", str(stage), "--output-dir", str(out_dir),
                         "--split-platforms")
        if built.returncode != 0:
            raise BundleError("Blender's extension build failed: "
                              + (built.stdout + built.stderr).strip().replace("\n", " | "))
    return sorted(set(out_dir.glob("*.zip")) - before)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, required=True, help="folder of .whl files to bundle")
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the zips go (default: dist)")
    parser.add_argument("--platforms", nargs="*", help="Blender platforms (default: from the wheels' tags)")
    parser.add_argument("--blender-ext", type=Path, help="path of Blender's blender_ext.py (default: from bpy)")
    args = parser.parse_args(argv)
    try:
        for zip_path in bundle(args.wheels, args.out, args.platforms, args.blender_ext):
            print(zip_path)
    except (BundleError, OSError) as e:
        print(f"bundle_gpu_wheels: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
