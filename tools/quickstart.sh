#!/usr/bin/env bash
# Quick start for a fresh clone: a virtual environment with headless Blender (bpy from
# PyPI), then the demo: three small scenes baked and rendered. No Blender install, no GPU needed.
#   bash tools/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import bpy, pytest, tinyvdb" 2>/dev/null; then
  echo "== setting up .venv (bpy 5.0.1 from PyPI, about 400 MB) =="
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r requirements-dev.txt
fi

echo "== voxfx info =="
.venv/bin/python -m tools.cli info
echo "== demo: build, bake and render the Voxelize, Snow and Liquid scenes (out/) =="
.venv/bin/python -m tools.demo --out out
