#!/usr/bin/env bash
# Quick start for a fresh clone: a virtual environment with headless Blender (bpy from
# PyPI), then the demo: three small scenes baked and rendered. No Blender install, no GPU needed.
#   bash tools/quickstart.sh                      # picks Python 3.11 (bpy 5.0.1) or 3.13 (bpy 5.2)
#   PYTHON=/path/to/python3.11 bash tools/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# bpy wheels exist for one Python each: 5.0.x for 3.11, 5.2.x for 3.13.
requirements_for() {
  case "$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" in
    3.11) echo requirements-dev.txt ;;
    3.13) [ -f requirements-blender52.txt ] && echo requirements-blender52.txt ;;
  esac
}

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import bpy, pytest, tinyvdb" 2>/dev/null; then
  PY="" REQ=""
  for candidate in ${PYTHON:-} python3.11 python3 python3.13 "$(command -v pyenv >/dev/null && echo "$(pyenv root)/versions/3.13.0/bin/python")"; do
    [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 || continue
    REQ=$(requirements_for "$candidate") && [ -n "$REQ" ] && PY=$candidate && break
  done
  if [ -z "$PY" ]; then
    echo "VoxFX's quick start needs Python 3.11 (for bpy 5.0.1) or 3.13 (for bpy 5.2); none was found." >&2
    echo "Install one, or point the script at it: PYTHON=/path/to/python3.11 bash tools/quickstart.sh" >&2
    exit 1
  fi
  echo "== setting up .venv with $PY ($REQ: headless Blender from PyPI, about 1.1 GB on disk) =="
  "$PY" -m venv --clear .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r "$REQ"
fi

echo "== voxfx info =="
.venv/bin/python -m tools.cli info
echo "== demo: build, bake and render the Voxelize, Snow and Liquid scenes (out/) =="
.venv/bin/python -m tools.demo --out out
