"""The reference of VoxFX's environment variables (``docs/switches.md``), made from the code.

    python tools/switches.py            # print the page
    python tools/switches.py --write    # write docs/switches.md
    python tools/switches.py --check    # exit 1 where docs/switches.md is not the code's

Every read of a ``VOXFX_*`` variable in ``kernels/`` and ``addon/`` is found in the source
(``settings.env_choice``, ``settings.env_value``, ``os.environ.get`` / ``os.getenv``), with
the variable given as a literal or as a module constant. For an ``env_choice`` the page
lists its ways and its default as the call resolves them (the module's constants, read from
its source, else from the imported module); for a plain read, the default the call gives
(free-form values: the module's notes). The summary is the first sentence of the docstring
of the function that reads it. Nothing here imports ``bpy``: add-on modules are read, not
imported.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "switches.md"
READERS = {"env_choice", "env_value", "get", "getenv"}  # env_choice(var, ways, given, default); others (var, default)
AREAS = (  # (path prefix, heading): the first that matches
    ("kernels/flip/surface", "Liquid: the surface's level set"),
    ("kernels/flip/", "Liquid (FLIP): the simulation's ways"),
    ("kernels/grid/", "The sparse grid core"),
    ("kernels/voxelize/", "Voxelizer"),
    ("kernels/snow/", "Snow"),
    ("kernels/", "Kernels: backend, caches, checkpoints"),
    ("addon/", "Add-on (Blender side)"),
)


@dataclass(frozen=True)
class Switch:
    variable: str
    ways: tuple | None  # env_choice's ways; None for a free-form read
    default: str | None
    where: str  # path::function
    summary: str


def _assignments(tree: ast.Module) -> dict:
    """The module's top-level NAME = value statements, by name."""
    return {n.targets[0].id: n for n in tree.body
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}


def _constants(assigned: dict) -> dict:
    """Of *assigned*, the NAME = literal ones, as their values."""
    out = {}
    for name, node in assigned.items():
        try:
            out[name] = ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
    return out


def _module(path: Path):
    """The imported kernel module of *path* (``voxfx.kernels...``), or None (add-on modules and files outside
    this checkout are not imported)."""
    if not path.is_relative_to(ROOT) or path.relative_to(ROOT).parts[0] != "kernels":
        return None
    rel = path.relative_to(ROOT)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tools.package import load

    load()
    return importlib.import_module("voxfx." + ".".join(rel.with_suffix("").parts))


def _value(node, constants: dict, path: Path):
    """A call argument's value: a literal, a module constant (from the source, else the imported module)."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        pass
    if isinstance(node, ast.Name):
        if node.id in constants:
            return constants[node.id]
        module = _module(path)
        if module is not None and hasattr(module, node.id):
            return getattr(module, node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        module = _module(path)
        owner = getattr(module, node.value.id, None) if module is not None else None
        if owner is not None and hasattr(owner, node.attr):
            return getattr(owner, node.attr)
    return None


def _summary(doc: str | None) -> str:
    """The text's first sentence (to its first full stop before a space or its first blank line), in
    Markdown's code marks."""
    text = " ".join((doc or "").split("\n\n")[0].split())
    cut = text.find(". ")
    text = text if cut < 0 else text[:cut + 1]
    return text.replace("``", "`").replace("|", "\\|")


def _comments(lines: list, statement: ast.stmt) -> str:
    """The comment lines just above *statement* and the comments on its own lines, joined."""
    above, row = [], statement.lineno - 2
    while row >= 0 and lines[row].lstrip().startswith("#"):
        above.insert(0, lines[row].lstrip()[1:].strip())
        row -= 1
    own = [line.split("  # ", 1)[1].strip() for line in lines[statement.lineno - 1:statement.end_lineno]
           if "  # " in line]
    return " ".join(above + own)


def _reads(path: Path, root: Path = ROOT):
    """The ``Switch`` of every VOXFX_ read in the Python file *path* (named relative to *root*)."""
    source = path.read_text(encoding="utf-8")
    tree, lines = ast.parse(source), source.splitlines()
    assigned = _assignments(tree)
    constants = _constants(assigned)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name not in READERS:
            continue
        if name == "get" and not (isinstance(f, ast.Attribute) and ast.unparse(f.value).endswith("environ")):
            continue
        variable = _value(node.args[0], constants, path)
        if not (isinstance(variable, str) and variable.startswith("VOXFX_")):
            continue
        owner = node
        while owner in parents and not isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            owner = parents[owner]
        function = getattr(owner, "name", "<module>")
        statement = node
        while not isinstance(statement, ast.stmt):
            statement = parents[statement]
        # the function's docstring; at module level, or where it has none, the comments at the read
        doc = (ast.get_docstring(owner) if hasattr(owner, "name") else None) or _comments(lines, statement)
        if not doc and isinstance(node.args[0], ast.Name) and node.args[0].id in assigned:  # the constant's comments
            doc = _comments(lines, assigned[node.args[0].id])
        where = f"{path.relative_to(root).as_posix()}::{function}"
        if name == "env_choice":
            ways = _value(node.args[1], constants, path) if len(node.args) > 1 else None
            ways = tuple(str(w) for w in ways) if isinstance(ways, (tuple, list)) else None
            given = {k.arg: k.value for k in node.keywords}
            default_node = given.get("default", node.args[3] if len(node.args) > 3 else None)
            default = _value(default_node, constants, path) if default_node is not None else (ways[0] if ways else None)
            yield Switch(variable, ways, None if default is None else str(default), where, _summary(doc))
        else:
            default = _value(node.args[1], constants, path) if len(node.args) > 1 else ""
            yield Switch(variable, None, None if default is None else str(default), where, _summary(doc))


def scan() -> list:
    """Every read of a VOXFX_ variable, sorted by area, variable and place."""
    found = []
    for top in ("kernels", "addon"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found.extend(_reads(path))
    return sorted(set(found), key=lambda s: (area(s.where), s.variable, s.where))


def area(where: str) -> int:
    return next(i for i, (prefix, _) in enumerate(AREAS) if where.startswith(prefix))


def _cell(switch: Switch) -> tuple:
    if switch.ways is None:
        default = f"`{switch.default}`" if switch.default else "unset"
        return "free-form (the module's notes)", default
    ways = ", ".join(f"`{w}`" for w in switch.ways)
    return ways, f"`{switch.default}`"


def markdown(switches=None) -> str:
    switches = scan() if switches is None else switches
    lines = [
        "# Environment switches",
        "",
        "Made from the code by `tools/switches.py` (`python tools/switches.py --write`; a CPU test checks that this",
        "page is the code's). Each row is one place where VoxFX reads a `VOXFX_*` environment variable: its ways and",
        "default as the code resolves them, the function that reads it and the first sentence of that function's",
        "docstring. Most are A/B switches between ways of running a GPU stage that were measured against each other",
        "(bench/RESULTS.md has each measurement; `docs/flip_switch_history.md` what each changed): their defaults are",
        "the ways measured fastest that give the same results, and an artist never needs to set one; a pipeline may,",
        "for a benchmark or a bug report. The liquid's switches are read once a simulation step or level set (a",
        "frame), so one changed while a frame is computed takes effect with the next frame. Set-up for pipelines:",
        "`VOXFX_BACKEND`, `VOXFX_KERNEL_CACHE` and `VOXFX_GPU_DIR` (README, GPU set-up). `VOXFX_FAULT_AT` and",
        "`VOXFX_FREE_BYTES` are the tests' fault injection (README, Reliability).",
        "",
        f"{len({s.variable for s in switches})} variables, {len(switches)} reads.",
    ]
    current = None
    for switch in switches:
        heading = AREAS[area(switch.where)][1]
        if heading != current:
            current = heading
            lines += ["", f"## {heading}", "", "| variable | ways | default | read by | what |",
                      "|---|---|---|---|---|"]
        ways, default = _cell(switch)
        lines.append(f"| `{switch.variable}` | {ways} | {default} | `{switch.where}` | {switch.summary} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(ROOT)}")
    group.add_argument("--check", action="store_true", help=f"exit 1 where {PAGE.relative_to(ROOT)} is not the code's")
    args = ap.parse_args(argv)
    page = markdown()
    if args.write:
        PAGE.write_text(page, encoding="utf-8")
        print(f"wrote {PAGE.relative_to(ROOT)}")
    elif args.check:
        same = PAGE.is_file() and PAGE.read_text(encoding="utf-8") == page
        print(f"{PAGE.relative_to(ROOT)} {'is' if same else 'is NOT'} the code's (python tools/switches.py --write)")
        return 0 if same else 1
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
