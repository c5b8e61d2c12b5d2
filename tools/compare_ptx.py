"""PTX of every CUDA kernel, compiled with the options the kernel modules use, compared
between a git revision and the working tree (a refactoring check on machines without a GPU).

    python tools/compare_ptx.py --base <rev> [--files 'flip_sparse_pressure*.cu']

Identical PTX per ``extern "C"`` entry means the device runs the same instructions, so
its results are bit-identical to the base revision's. Each tree is compiled with its own
modules' options (``launch.compiles()`` of that tree), and an entry is looked up by name
in every file of the working tree, so a kernel moved to another file (a module split)
compares with itself; branch labels and local depots are numbered by the entry's place in
its file, so their numbers are left out. Where an entry differs, the tool
also says whether its floating-point instructions (opcode, rounding and type, registers
and immediates aside) form the same sequence: then only integer and address code moved
(index arithmetic, a clamp), which needs a reading to confirm the same elements are
used. Needs nvcc. Exit status 0 when every entry of the base is present and identical.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

def compiles(tree: Path = ROOT) -> dict:
    """``launch.compiles()`` of *tree* (the working tree here, a base revision in a fresh
    interpreter: its own modules, options and paths)."""
    if tree != ROOT:
        code = ("import json, sys; sys.path.insert(0, '.'); from tools.compare_ptx import compiles; "
                "print(json.dumps({k: [list(o) for o in v] for k, v in compiles().items()}))")
        r = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True)
        return {k: [tuple(o) for o in v] for k, v in json.loads(r.stdout.splitlines()[-1]).items()}
    from tools.package import load

    load()
    from voxfx.kernels.grid import launch

    return launch.compiles()


def entries(ptx: str) -> dict:
    """{entry name: its body}, with comments, debug lines and the .file table dropped, and
    the numbers of branch labels and local depots (the entry's place in its file) left out."""
    text = re.sub(r"//.*", "", ptx)
    text = re.sub(r"\$L__BB\d+_", "$L__BB_", re.sub(r"__local_depot\d+", "__local_depot", text))
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\((.*?)\n\}", text, re.S):
        body = "\n".join(line.strip() for line in m.group(2).splitlines()
                         if line.strip() and not line.strip().startswith((".loc", ".file")))
        out[m.group(1)] = body
    return out


_FLOAT_OP = re.compile(r"^\s*((?:add|sub|mul|div|fma|neg|abs|min|max|sqrt|rcp|cvt|setp|selp|mov)"
                       r"\.[\w.]*f(?:32|64)[\w.]*)")


def float_ops(body: str) -> list:
    """The floating-point opcodes of an entry, in order (cvt and setp involving floats too)."""
    return [m.group(1) for m in map(_FLOAT_OP.match, body.splitlines()) if m]


def ptx_of(tree: Path, source: str, options: tuple, arch: str, tmp: Path) -> dict:
    out = tmp / "out.ptx"
    cmd = ["nvcc", "-ptx", f"-arch={arch}", "--std=c++17", f"-I{tree / 'kernels/cuda/include'}", *options,
           str(tree / "kernels/cuda" / source), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"nvcc failed on {tree / source}:\n{r.stderr[-3000:]}")
    return entries(out.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--quiet", action="store_true", help="do not list the kernels that moved to another file")
    ap.add_argument("--files", nargs="+", metavar="GLOB",
                    help="only the kernel files matching these globs, in both trees (a change to an include: "
                         "the files that include it)")
    args = ap.parse_args(argv)
    wanted = (lambda source: any(fnmatch.fnmatch(source, g) for g in args.files)) if args.files else (lambda _: True)
    bad = same = 0
    with tempfile.TemporaryDirectory(prefix="voxfx-ptx-") as tmp:
        tmp = Path(tmp)
        base = tmp / "base"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        new = {}  # entry name → {body: the files it is in}, over every file and option set of the working tree
        for source, option_sets in filter(lambda kv: wanted(kv[0]), compiles().items()):
            for options in option_sets:
                for name, body in ptx_of(ROOT, source, options, args.arch, tmp).items():
                    new.setdefault(name, {}).setdefault(body, set()).add(source)
        for source, option_sets in filter(lambda kv: wanted(kv[0]), compiles(base).items()):
            for options in option_sets:
                old = ptx_of(base, source, options, args.arch, tmp)
                for name in sorted(old):
                    if old[name] in new.get(name, {}):
                        same += 1
                        files = new[name][old[name]]
                        if source not in files and not args.quiet:
                            print(f"moved: {source} {name} → {', '.join(sorted(files))}")
                    else:
                        bad += 1
                        note = " (missing)" if name not in new else (
                            "; same floating-point operation sequence"
                            if any(float_ops(old[name]) == float_ops(b) for b in new[name])
                            else "; floating-point operations differ")
                        print(f"DIFFERS: {source} {' '.join(options)} {name}{note}")
    print(f"{same} kernels identical, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
