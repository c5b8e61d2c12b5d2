"""One definition of each effect's settings (issue 19).

An effect's settings are one dataclass in ``kernels/`` (``SnowSettings``,
``FlipSettings``). A field that an artist sets is declared with :func:`setting`, which
keeps what Blender needs to show it (label, tooltip, limits, unit) as plain data in the
field's metadata; the add-on builds its property group from those fields
(``addon/properties.py``), so the panel property and the kernel field are one thing with
one name, one default and one unit. Fields declared the plain way are kernel-only
(physical constants of the model an artist does not set).

Units are SI unless the field's docstring says otherwise; angles are radians (Blender's
own angle unit).

The kernels' A/B switches are no artist's settings: environment variables read per call
(``VOXFX_SPARSE_BINNING`` and the like), each one of a few named ways, the first the default;
:func:`env_choice` reads and checks one. Inside :class:`env_scope` (a simulation's frame step and
its level set) each variable is read from the environment once and kept until the outermost scope
ends: a change made between frames is the next frame's way, one made inside a frame is not seen
before the frame ends (helper h21h: ~190 reads a frame of the 8M Fast frames, 1.2 µs each on the
H100 machine's host, most of them on stretches where the device waits for the host).
"""

from __future__ import annotations

import os
import threading
from dataclasses import MISSING, field, fields

UI_KEYS = {"name", "description", "min", "max", "soft_min", "soft_max", "step", "precision", "subtype",
           "unit", "items", "size"}


def setting(default, name: str, description: str, **ui):
    """A field an artist sets: *default*, the panel's label *name*, its tooltip
    *description* (with the unit), and Blender's property options (``min``, ``max``,
    ``soft_min``, ``soft_max``, ``step``, ``precision``, ``subtype``, ``unit``, ``items``
    for a choice)."""
    bad = set(ui) - UI_KEYS
    if bad:
        raise TypeError(f"unknown property options: {', '.join(sorted(bad))}")
    meta = {"name": name, "description": description, **ui}
    if isinstance(default, (list, tuple)):
        return field(default_factory=lambda: type(default)(default), metadata={"ui": meta})
    return field(default=default, metadata={"ui": meta})


def ui_fields(cls) -> list:
    """The fields of settings class *cls* that an artist sets, in declaration order."""
    return [f for f in fields(cls) if "ui" in f.metadata]


def default_of(f):
    return f.default_factory() if f.default is MISSING else f.default


def from_source(cls, source, **overrides):
    """*cls* with every artist-set field read from *source* by the same name (a Blender
    property group, or any object with those attributes); *overrides* replace fields."""
    values = {f.name: getattr(source, f.name) for f in ui_fields(cls) if f.name not in overrides}
    for name, value in values.items():  # Blender gives bpy_prop_array for vectors
        if not isinstance(value, (bool, int, float, str)):
            values[name] = tuple(value)
    return cls(**values, **overrides)


class _Kept(threading.local):
    depth = 0  # env_scope's depth in this thread (0: every read goes to the environment)

    def __init__(self):
        self.read = {}  # variable → its raw value, read once inside the thread's outermost env_scope


_kept = _Kept()


class env_scope:
    """``with env_scope():`` — inside, :func:`env_choice` reads each variable from ``os.environ``
    once and keeps the raw value (module notes); the kept values are dropped when the thread's
    outermost scope ends (nested scopes share them), so nothing is kept between frames. Each
    thread has its own scope and values."""

    def __enter__(self):
        _kept.depth += 1
        return self

    def __exit__(self, *exc):
        kept = _kept
        kept.depth -= 1
        if kept.depth <= 0:
            kept.depth = 0
            kept.read.clear()
        return False


def env_value(variable: str) -> str:
    """``os.environ.get(variable, "")``, read once inside an :class:`env_scope` (module notes)."""
    kept = _kept
    if not kept.depth:
        return os.environ.get(variable, "")
    value = kept.read.get(variable)
    if value is None:
        value = kept.read[variable] = os.environ.get(variable, "")
    return value


def env_choice(variable: str, choices, given=None, default=None) -> str:
    """The way an A/B switch picks: *given*, else the environment variable *variable*
    (stripped, lower case; read once inside an :class:`env_scope`), else *default*
    (``choices[0]`` unless named); a ValueError naming *variable* and *choices* for any other."""
    mode = given or env_value(variable).strip().lower() or (choices[0] if default is None else default)
    if mode not in choices:
        raise ValueError(f"{variable} must be one of {', '.join(choices)}, not {mode!r}")
    return mode
