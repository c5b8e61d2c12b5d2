"""MagicaVoxel ``.vox`` files → voxels: a careful reader for untrusted files. No ``bpy``.

    scene = read_vox_bytes(data)             # or read_vox(path)
    ijk, index = scene.voxels()              # world voxel (x, y, z) and colour index 1..255
    rgba = scene.palette[index - 1]          # (N, 4) uint8

Format (the public description MagicaVoxel ships, version 150/200): ``'VOX '``, int32
version, then a ``MAIN`` chunk whose children are the models (``SIZE`` + ``XYZI`` pairs,
after an optional ``PACK``), the scene graph (``nTRN`` transform, ``nGRP`` group, ``nSHP``
shape nodes, ``LAYR`` layers), the palette (``RGBA``, colour index i is entry i − 1) and
materials (``MATL``). A chunk is id, content bytes, children bytes (int32 each), content,
children; integers little-endian; strings int32 length + bytes; dicts int32 count + pairs.
Unknown chunks (cameras, notes, render settings) are skipped.

Placement: a shape node's models are placed by the transforms above it. A frame's ``_t``
is a translation and ``_r`` a rotation byte (the format text's ROTATION type: bits 0–1
column of row 0's non-zero entry, bits 2–3 row 1's, bits 4/5/6 sign of rows 0/1/2; the
matrix applies to column vectors, v' = R v + t). The format text does not say where the
pivot is; MagicaVoxel's is the lattice point ``s // 2`` of a model of size s (the grid
vertex at or just below its centre), so voxel v, the unit cube [v, v + 1), lands at the
cube around ``R (v + ½ − s // 2) + t``: voxel ``floor(R (v + ½ − s // 2) + t)``
(tests/unit/test_voxfile.py names the evidence). Without rotation that is
``v − s // 2 + t``, exactly what ``addon/vox_export`` writes, so its files come back at
the grid coordinates they left. Hidden nodes and layers are skipped. Only the first
animation frame is read.

Untrusted input: every length is checked against the bytes that hold it before anything
is allocated, model sizes are 1..256 per axis, voxels must lie in their model, the scene
graph must be a tree reachable from node 0 of depth ≤ ``MAX_DEPTH`` (cycles and repeated
ids are refused), and the total voxel count is capped (``max_voxels``). Every failure is
one ``InputError`` line naming the file and what is wrong with it.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import InputError

MAX_MODEL_SIZE = 256
MAX_DEPTH = 64  # nesting of transforms and groups below node 0
MAX_NODES = 1 << 20
MAX_DICT_ENTRIES = 4096
DEFAULT_MAX_VOXELS = 1 << 26  # 67 million: 256 MiB in the file, some 3 GiB once placed
DEFAULT_MAX_BYTES = 1 << 31


def default_palette() -> np.ndarray:
    """(256, 4) uint8 MagicaVoxel's palette for files without ``RGBA``: entry i − 1 for
    colour index i. The 6×6×6 cube (channel steps ff, cc, 99, 66, 33, 00; blue fastest,
    black left out) for indices 1..215, then ten-step red, green, blue and grey ramps
    (ee dd bb aa 88 77 55 44 22 11); the last entry is unused."""
    steps = [0xFF, 0xCC, 0x99, 0x66, 0x33, 0x00]
    cube = [(r, g, b) for r in steps for g in steps for b in steps][:-1]
    ramp = [0xEE, 0xDD, 0xBB, 0xAA, 0x88, 0x77, 0x55, 0x44, 0x22, 0x11]
    rgb = cube + [(v, 0, 0) for v in ramp] + [(0, v, 0) for v in ramp] + [(0, 0, v) for v in ramp]
    rgb += [(v, v, v) for v in ramp]
    palette = np.zeros((256, 4), np.uint8)
    palette[:255, :3] = rgb
    palette[:255, 3] = 255
    return palette


@dataclass
class Model:
    size: np.ndarray  # (3,) int64, 1..256 per axis
    xyzi: np.ndarray  # (n, 4) uint8 local x, y, z and colour index 1..255


@dataclass
class Instance:
    model: int  # index into VoxScene.models
    rotation: np.ndarray  # (3, 3) int64 signed permutation
    translation: np.ndarray  # (3,) int64 world voxels
    name: str = ""


@dataclass
class VoxScene:
    version: int
    models: list
    instances: list  # where models appear (one per model, at the origin, without a scene graph)
    palette: np.ndarray  # (256, 4) uint8; colour index i is entry i − 1
    materials: dict = field(default_factory=dict)  # colour index → MATL properties (str → str)

    def voxels(self):
        """(ijk (N, 3) int64 world voxels, colour index (N,) uint8 1..255), one entry per
        voxel: where instances overlap, the later one's colour wins."""
        parts, colours = [], []
        for inst in self.instances:
            model = self.models[inst.model]
            # floor(R (v + ½ − s // 2) + t) in integers: twice it is R (2v + 1 − 2 (s // 2)) + 2t, exact
            centred = 2 * model.xyzi[:, :3].astype(np.int64) + 1 - 2 * (model.size // 2)
            twice = centred @ inst.rotation.T + 2 * inst.translation
            parts.append(twice // 2)
            colours.append(model.xyzi[:, 3])
        if not parts:
            return np.zeros((0, 3), np.int64), np.zeros(0, np.uint8)
        ijk, colour = np.concatenate(parts), np.concatenate(colours)
        if len(ijk) == 0:
            return ijk, colour
        lo = ijk.min(axis=0)
        span = ijk.max(axis=0) - lo + 1
        key = ((ijk[:, 2] - lo[2]) * span[1] + (ijk[:, 1] - lo[1])) * span[0] + (ijk[:, 0] - lo[0])
        # last occurrence of each key: unique of the reversed keys finds first-in-reverse
        _, first_reversed = np.unique(key[::-1], return_index=True)
        keep = np.sort(len(key) - 1 - first_reversed)
        return ijk[keep], colour[keep]


def read_vox(path, max_voxels: int = DEFAULT_MAX_VOXELS, max_bytes: int = DEFAULT_MAX_BYTES) -> VoxScene:
    """Read a ``.vox`` file; ``InputError`` (one line naming the file) if it is not one
    VoxFX can read safely."""
    path = Path(os.fspath(path))
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise InputError(f"'{path.name}' is {size:,} bytes, more than a MagicaVoxel file VoxFX reads "
                             f"({max_bytes:,})")
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read '{path}': {error.strerror or error}") from error
    return read_vox_bytes(data, path.name, max_voxels)


def read_vox_bytes(data: bytes, name: str = "the .vox file", max_voxels: int = DEFAULT_MAX_VOXELS) -> VoxScene:
    try:
        return _Parser(data, max_voxels).scene()
    except _Bad as bad:
        raise InputError(f"'{name}' is not a readable MagicaVoxel file: {bad}") from None


class _Bad(Exception):
    pass


def _name(chunk_id: bytes) -> str:
    return "'" + chunk_id.decode("ascii", errors="replace") + "'"


class _Cursor:
    """Reads from data[at:end], refusing to step past *end*."""

    def __init__(self, data: bytes, at: int, end: int, what: str):
        self.data, self.at, self.end, self.what = data, at, end, what

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > self.end:
            raise _Bad(f"{self.what} is cut short (needs {n} more bytes at offset {self.at})")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def int32(self) -> int:
        return struct.unpack("<i", self.take(4))[0]

    def string(self) -> str:
        return self.take(self.int32()).decode("utf-8", errors="replace")

    def dict(self) -> dict:
        count = self.int32()
        if not 0 <= count <= MAX_DICT_ENTRIES or count * 8 > self.end - self.at:
            raise _Bad(f"{self.what} has a dictionary of {count} entries")
        return {self.string(): self.string() for _ in range(count)}


class _Parser:
    def __init__(self, data: bytes, max_voxels: int):
        self.data, self.max_voxels = data, int(max_voxels)
        self.sizes, self.models, self.nodes = [], [], {}
        self.palette, self.materials, self.hidden_layers = None, {}, set()
        self.voxel_total = 0

    def scene(self) -> VoxScene:
        head = _Cursor(self.data, 0, len(self.data), "the header")
        if head.take(4) != b"VOX ":
            raise _Bad("it does not start with 'VOX '")
        version = head.int32()
        chunk_id, content, children = self.chunk_header(head)
        if chunk_id != b"MAIN":
            raise _Bad(f"its first chunk is {_name(chunk_id)}, not MAIN")
        head.take(content)
        body = _Cursor(self.data, head.at, head.at + children, "the MAIN chunk")
        head.take(children)  # checks the MAIN chunk fits the file
        while body.at < body.end:
            chunk_id, content, children = self.chunk_header(body)
            self.read_chunk(chunk_id, _Cursor(self.data, body.at, body.at + content, f"chunk {_name(chunk_id)}"))
            body.take(content)
            body.take(children)
        if self.sizes:
            raise _Bad("a SIZE chunk has no XYZI chunk after it")
        if not self.models:
            raise _Bad("it holds no model")
        palette = self.palette if self.palette is not None else default_palette()
        return VoxScene(version, self.models, self.instances(), palette, self.materials)

    @staticmethod
    def chunk_header(cursor: _Cursor):
        chunk_id = cursor.take(4)
        content, children = cursor.int32(), cursor.int32()
        if content < 0 or children < 0 or content + children > cursor.end - cursor.at:
            raise _Bad(f"chunk {_name(chunk_id)} at offset {cursor.at - 12} claims {content}+{children} bytes, "
                       f"more than its parent holds")
        return chunk_id, content, children

    def read_chunk(self, chunk_id: bytes, c: _Cursor) -> None:
        if chunk_id == b"SIZE":
            size = np.array([c.int32() for _ in range(3)], np.int64)
            if size.min() < 1 or size.max() > MAX_MODEL_SIZE:
                raise _Bad(f"model {len(self.models)} has size {size.tolist()} (1..{MAX_MODEL_SIZE} per axis)")
            self.sizes.append(size)
        elif chunk_id == b"XYZI":
            if not self.sizes:
                raise _Bad(f"XYZI chunk of model {len(self.models)} has no SIZE chunk before it")
            size = self.sizes.pop()
            count = c.int32()
            if count < 0 or count * 4 > c.end - c.at:
                raise _Bad(f"model {len(self.models)} claims {count} voxels, more than its chunk holds")
            self.voxel_total += count
            if self.voxel_total > self.max_voxels:
                raise _Bad(f"it holds more than {self.max_voxels:,} voxels")
            xyzi = np.frombuffer(c.take(4 * count), np.uint8).reshape(-1, 4)
            if count and (xyzi[:, :3] >= size).any():
                raise _Bad(f"model {len(self.models)} has voxels outside its {size.tolist()} box")
            self.models.append(Model(size, xyzi[xyzi[:, 3] != 0].copy()))  # index 0 is empty
        elif chunk_id == b"RGBA":
            raw = np.frombuffer(c.take(1024), np.uint8).reshape(256, 4)
            self.palette = raw.copy()
        elif chunk_id == b"MATL":
            index = c.int32()
            props = c.dict()
            if 0 <= index <= 255:
                self.materials[index] = props
        elif chunk_id == b"LAYR":
            layer = c.int32()
            if c.dict().get("_hidden") == "1":
                self.hidden_layers.add(layer)
        elif chunk_id in (b"nTRN", b"nGRP", b"nSHP"):
            self.read_node(chunk_id, c)

    def read_node(self, chunk_id: bytes, c: _Cursor) -> None:
        node = c.int32()
        attrs = c.dict()
        if node in self.nodes:
            raise _Bad(f"scene graph node {node} appears twice")
        if len(self.nodes) >= MAX_NODES:
            raise _Bad(f"its scene graph has more than {MAX_NODES:,} nodes")
        hidden = attrs.get("_hidden") == "1"
        if chunk_id == b"nTRN":
            child, _reserved, layer, frames = c.int32(), c.int32(), c.int32(), c.int32()
            if frames < 1 or frames * 4 > c.end - c.at:
                raise _Bad(f"transform node {node} claims {frames} frames")
            frame = c.dict()
            rotation, translation = _frame_transform(frame, node)
            self.nodes[node] = ("T", [child], rotation, translation, attrs.get("_name", ""), hidden, layer)
        elif chunk_id == b"nGRP":
            count = c.int32()
            if count < 0 or count * 4 > c.end - c.at:
                raise _Bad(f"group node {node} claims {count} children")
            self.nodes[node] = ("G", [c.int32() for _ in range(count)], None, None, "", hidden, -1)
        else:
            count = c.int32()
            if count < 0 or count * 8 > c.end - c.at:
                raise _Bad(f"shape node {node} claims {count} models")
            models = []
            for _ in range(count):
                models.append(c.int32())
                c.dict()
            self.nodes[node] = ("S", models, None, None, "", hidden, -1)

    def instances(self) -> list:
        if not self.nodes:  # the plain layout: every model at the origin (pivot at its centre)
            return [Instance(m, np.eye(3, dtype=np.int64), model.size // 2) for m, model in enumerate(self.models)]
        if 0 not in self.nodes:
            raise _Bad("its scene graph has no root node 0")
        out = []
        # depth-first with an explicit stack: (node, rotation, translation, name, path of ids)
        stack = [(0, np.eye(3, dtype=np.int64), np.zeros(3, np.int64), "", (0,))]
        while stack:
            node, rotation, translation, name, path = stack.pop()
            if len(path) > MAX_DEPTH:
                raise _Bad(f"its scene graph is nested deeper than {MAX_DEPTH}")
            if node not in self.nodes:
                raise _Bad(f"its scene graph refers to a missing node {node}")
            kind, children, r, t, node_name, hidden, layer = self.nodes[node]
            if hidden or layer in self.hidden_layers:
                continue
            if kind == "T":
                rotation, translation = rotation @ r, rotation @ t + translation
                name = node_name or name
            if kind == "S":
                for m in children:
                    if not 0 <= m < len(self.models):
                        raise _Bad(f"shape node {node} refers to a missing model {m}")
                    out.append(Instance(m, rotation, translation, name))
                continue
            for child in reversed(children):
                if child in path:
                    raise _Bad(f"its scene graph has a cycle through node {child}")
                stack.append((child, rotation, translation, name, path + (child,)))
        return out


def _frame_transform(frame: dict, node: int):
    """(rotation (3, 3) int64, translation (3,) int64) of a transform frame's ``_r``, ``_t``."""
    try:
        translation = np.array([int(v) for v in frame.get("_t", "0 0 0").split()], np.int64)
        r = int(frame.get("_r", "4"))  # 4: the identity (row 1's entry in column 1)
    except ValueError:
        raise _Bad(f"transform node {node} has a malformed _t or _r") from None
    if translation.shape != (3,) or np.abs(translation).max() > 1 << 24:
        raise _Bad(f"transform node {node} has translation {frame.get('_t')!r}")
    first, second = r & 3, (r >> 2) & 3
    if not 0 <= r < 128 or first == second or first > 2 or second > 2:
        raise _Bad(f"transform node {node} has an invalid rotation {r}")
    third = 3 - first - second
    rotation = np.zeros((3, 3), np.int64)
    for row, column in enumerate((first, second, third)):
        rotation[row, column] = -1 if (r >> (4 + row)) & 1 else 1
    return rotation, translation
