"""``bench/flip_sparse_pressure_profile.py --variants``: a variant ``SETUP:TAIL[:SCAN[:…]]``
set on the sparse pressure solver's modules (``use_variant``), one field a module attribute
or environment variable (``FIELDS``); that bench's module notes say what each field chooses."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import (sparse_pressure, sparse_pressure_cells, sparse_pressure_gpu,  # noqa: E402
                                sparse_pressure_setup, sparse_pressure_workspace)


def _flag(text):
    return text != "0"


def _warm(text):
    os.environ["VOXFX_PRESSURE_WARM"] = text  # read at each solve


# --variants' fields after SETUP:TAIL, in order: (module, attribute or None, parse)
FIELDS = (
    (sparse_pressure_setup, "SCAN", str),  # the set-up's scans: "kernel" or "cupy"
    (sparse_pressure, "PROJECT", str),  # the projection: "kernel" or "reference"
    (sparse_pressure_gpu, "PREDICT", _flag),  # the PCG's first iterations as the last solve's count
    (sparse_pressure_setup, "TAIL_BOUND", int),  # the set-up's one-block coarse levels: their finer bound, 0 off
    (sparse_pressure_setup, "BRICKS", _flag),  # level 1 by brick look-ups
    (None, None, _warm),  # the warm start: "1" or "0"
    (sparse_pressure_setup, "ONE_READ", _flag),  # the set-up's sealed count read with the unknowns' sizes
    (sparse_pressure_setup, "RANKS", _flag),  # level 1 in key order by ranks ("1") or a sort ("0")
    (sparse_pressure_cells, "LINK_INIT", _flag),  # the labels' union-find trees start at a lower FLUID neighbour
    (sparse_pressure_gpu, "PERSIST", _flag),  # the PCG's persistent buffers
    (sparse_pressure_gpu, "CLUSTER_UNKNOWNS", int),  # the V-cycle's levels above the tail in one cluster, 0 off
    (sparse_pressure_gpu, "FIRST2_UNKNOWNS", int),  # the first sweep and the second's red pass in one launch, 0 off
    (sparse_pressure_workspace, "MODE", str),  # the set-up's buffers: "fresh" or "workspace"
    (sparse_pressure_workspace, "AHEAD", _flag),  # the coarse levels launched before the unknowns' read
    (sparse_pressure_cells, "HOOK", str),  # the labels' union-find: "bricks" or "cells"
    (sparse_pressure_setup, "RESTRICT", str),  # the workspace's coarse restrictions: "search" or "scatter"
)


def use_variant(variant):
    """Set *variant* (SETUP:TAIL[:field…], the fields in ``FIELDS``' order) on the solver's modules."""
    setup, tail, *rest = variant.split(":")
    sparse_pressure.SETUP_KERNELS = setup
    sparse_pressure_gpu.TAIL_UNKNOWNS = int(tail)
    for (module, name, parse), text in zip(FIELDS, rest):
        value = parse(text)
        if module is not None:
            setattr(module, name, value)
