"""Import this checkout as the package ``voxfx`` whatever its folder is called.

Blender imports the extension as ``bl_ext.<repo>.voxfx``; tests, benchmarks and the
command-line shim import the same files as ``voxfx`` through this loader.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "voxfx"


def load(name: str = PACKAGE):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, ROOT / "__init__.py", submodule_search_locations=[str(ROOT)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
