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
:func:`env_choice` reads and checks one.
"""

from __future__ import annotations

import os
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


def env_choice(variable: str, choices, given=None, default=None) -> str:
    """The way an A/B switch picks: *given*, else the environment variable *variable*
    (stripped, lower case), else *default* (``choices[0]`` unless named); a ValueError naming
    *variable* and *choices* for any other. The variable is read from ``os.environ`` on every
    call, as its raw stored value (one dict lookup, ``_env_raw``), and a (variable, raw value)
    seen before gives its checked way from ``_CHOSEN``: no decode, strip, lower or check a call
    (the topology stage reads ~11 switches a substep: ~1.3 µs each the plain way on the H100
    host, i24t7). A test's ``monkeypatch.setenv``, a bench's ``--ab`` way or ``del os.environ[...]``
    is seen by the next call: nothing to refresh. ``VOXFX_ENV_CHOICE`` set (to anything, e.g.
    ``plain``): the A/B baseline, each call reading and checking its variable as before i24h."""
    if given:
        return _checked(variable, choices, given)
    if _env_raw("VOXFX_ENV_CHOICE") is not None:  # the A/B baseline (any value): read and checked every call
        return _checked(variable, choices, os.environ.get(variable, "").strip().lower()
                        or (choices[0] if default is None else default))
    raw = _env_raw(variable)
    try:
        return _CHOSEN[(variable, raw, choices, default)]
    except KeyError:
        cache = True
    except TypeError:  # unhashable choices: nothing kept
        cache = False
    text = "" if raw is None else raw if isinstance(raw, str) else os.fsdecode(raw)  # os.environ's decoding
    mode = _checked(variable, choices, text.strip().lower() or (choices[0] if default is None else default))
    if cache and len(_CHOSEN) < _CHOSEN_MOST:
        _CHOSEN[(variable, raw, choices, default)] = mode
    return mode


_CHOSEN: dict = {}  # env_choice's (variable, raw value, choices, default) → the checked way
_CHOSEN_MOST = 4096  # a bound on it (a process that sets a switch to ever new values stops caching)
_ENV_KEYS: dict = {}  # variable → its key in os.environ's stored mapping


def _checked(variable: str, choices, mode: str) -> str:
    if mode not in choices:
        raise ValueError(f"{variable} must be one of {', '.join(choices)}, not {mode!r}")
    return mode


def _env_raw(variable: str):
    """*variable*'s value as ``os.environ`` stores it (bytes on POSIX, str on Windows; None where
    unset): its stored mapping read with its encoded key (kept), ~0.1 µs against ~1 for
    ``os.environ.get``'s encode and decode. An ``os.environ`` without that mapping (replaced by a
    plain dict) is read the plain way."""
    env = os.environ
    data = getattr(env, "_data", None)
    if data is None:
        return env.get(variable)
    key = _ENV_KEYS.get(variable)
    if key is None:
        key = _ENV_KEYS[variable] = env.encodekey(variable)
    return data.get(key)
