"""The child of ``test_cache_faults``' kill test: a bake that ``fault_point`` ends with
``os._exit(137)`` at write step *k*. It runs in a ``forkserver`` process, forked from a
server that imported this module once (not a new Python a step, and not forked from a
test process that may hold Blender's threads)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.package import load  # noqa: E402

load()

from tests.unit.test_cache_faults import bake  # noqa: E402 - imported once, by the server
from voxfx.addon import fsio  # noqa: E402


def bake_until_killed(folder, k, background, log, mode=""):
    os.environ[fsio.FAULT_ENV] = f"{k}:exit"
    if mode:  # VOXFX_CHECKPOINT (the server's environment is the one it started with)
        os.environ["VOXFX_CHECKPOINT"] = mode
    else:
        os.environ.pop("VOXFX_CHECKPOINT", None)
    fsio.reset_faults()  # a step count of its own, from zero, as a fresh process has
    bake(folder, background=background, log=log)
